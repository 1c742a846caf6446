// Which Parquet library should `batchserve predict --format parquet` use? Writes the same
// records (a classifier's answer per row: id, model, version, an FP32 output of shape [2] and
// one of shape [1,10]) with each candidate that is installed, streaming in row groups of
// 10,000 rows, and with batchserve's own writers (src/predict/*-writer.ts), each in a child
// process of its own, and prints rows/s and rows per CPU-second (the best of three runs; CPU
// time is what a busy machine disturbs least), file size and peak RSS.
// Peak RSS is also measured at 4 × the rows: a streaming writer's peak stays where it was.
// Ratios are against the JSON Lines writer, the default output, measured in the same run.
// Every Parquet file is read back with hyparquet (row count, last row) before it counts.
// Only the chosen library (and hyparquet, a devDependency) are in package.json; to measure the
// others: npm install --no-save parquet-wasm apache-arrow parquetjs-lite
// (@dsnp/parquetjs is left out: it requires Node >= 24).
// Writes benchmarks/results/parquet-writers.json (see results.js for --quick, --json).
// Usage: npm run build && node benchmarks/parquet-writers.js [--quick]
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const ROW_GROUP = 10_000;
const CHOSEN = 'hyparquet-writer';
const SHAPES = JSON.stringify({ probabilities: [2], logits: [1, 10] });

/** Each candidate: the packages it needs and a function that streams `rows` records to `path`. */
const CANDIDATES = {
  'records only': { packages: [], write: drain },
  'batchserve jsonl': { packages: [], write: batchserveWriter('jsonl-writer.js', 'openJsonlWriter') },
  'batchserve csv': { packages: [], write: batchserveWriter('csv-writer.js', 'openCsvWriter') },
  'batchserve parquet': { packages: [CHOSEN], write: batchserveWriter('parquet-writer.js', 'openParquetWriter') },
  'hyparquet-writer': { packages: ['hyparquet-writer'], write: writeHyparquet },
  'parquet-wasm': { packages: ['parquet-wasm', 'apache-arrow'], write: writeParquetWasm },
  'parquetjs-lite': { packages: ['parquetjs-lite'], write: writeParquetjsLite },
};
const REFERENCE = 'batchserve jsonl';
const PARQUET = new Set(['batchserve parquet', 'hyparquet-writer', 'parquet-wasm', 'parquetjs-lite']);

if (process.argv[2] === '--child') {
  // One measured run: --child NAME ROWS PATH; prints {seconds, cpuSeconds, maxRssKiB}.
  const [name, rows, path] = process.argv.slice(3);
  const started = performance.now();
  await CANDIDATES[name].write(Number(rows), path);
  const seconds = (performance.now() - started) / 1000;
  const { userCPUTime, systemCPUTime, maxRSS } = process.resourceUsage();
  const cpuSeconds = (userCPUTime + systemCPUTime) / 1e6;
  process.stdout.write(JSON.stringify({ seconds, cpuSeconds, maxRssKiB: maxRSS }));
  process.exit(0);
}

/** Deterministic records, made one at a time so that the input holds no memory. */
function* records(rows) {
  let seed = 0x9e3779b9;
  const random = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
  for (let i = 0; i < rows; i++) {
    const p = random();
    yield {
      id: String(i + 1),
      model: 'classifier',
      version: '3',
      outputs: {
        probabilities: { datatype: 'FP32', shape: [2], data: [p, 1 - p] },
        logits: { datatype: 'FP32', shape: [1, 10], data: Array.from({ length: 10 }, () => random() * 20 - 10) },
      },
      answer: undefined,
    };
  }
}

async function drain(rows) {
  let count = 0;
  for (const record of records(rows)) count += record.outputs.logits.data.length;
  return count;
}

function batchserveWriter(file, opener) {
  return async (rows, path) => {
    const open = (await import(`../dist/src/predict/${file}`))[opener];
    const writer = await open(path);
    for (const record of records(rows)) await writer.write(record);
    await writer.close();
  };
}

/** Row groups of ROW_GROUP records as columns: what the columnar libraries take. */
function* columnGroups(rows) {
  let group = emptyGroup();
  for (const record of records(rows)) {
    group.id.push(record.id);
    group.model.push(record.model);
    group.version.push(record.version);
    group.probabilities.push(record.outputs.probabilities.data);
    group.logits.push(record.outputs.logits.data);
    if (group.id.length === ROW_GROUP) {
      yield group;
      group = emptyGroup();
    }
  }
  if (group.id.length > 0) yield group;
}

function emptyGroup() {
  return { id: [], model: [], version: [], probabilities: [], logits: [] };
}

async function writeHyparquet(rows, path) {
  const { ParquetWriter, fileWriter } = await import('hyparquet-writer');
  const utf8 = (name) => ({ name, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' });
  const floats = (name) => [
    { name, repetition_type: 'REQUIRED', converted_type: 'LIST', num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    { name: 'element', type: 'FLOAT', repetition_type: 'REQUIRED' },
  ];
  const schema = [
    { name: 'schema', num_children: 5 },
    utf8('id'),
    utf8('model'),
    utf8('version'),
    ...floats('probabilities'),
    ...floats('logits'),
  ];
  const writer = new ParquetWriter({
    writer: fileWriter(path),
    schema,
    codec: 'SNAPPY',
    kvMetadata: [{ key: 'shapes', value: SHAPES }],
  });
  for (const group of columnGroups(rows)) {
    const columnData = Object.entries(group).map(([name, data]) => ({ name, data }));
    await writer.write({ columnData, rowGroupSize: ROW_GROUP });
  }
  await writer.finish();
}

async function writeParquetWasm(rows, path) {
  const arrow = await import('apache-arrow');
  const wasm = await import('parquet-wasm');
  const { createWriteStream } = await import('node:fs');
  const { Writable } = await import('node:stream');
  const floatList = new arrow.List(new arrow.Field('element', new arrow.Float32(), false));
  const groups = columnGroups(rows);
  const batches = new ReadableStream({
    pull(controller) {
      const { value: group, done } = groups.next();
      if (done) return controller.close();
      const table = new arrow.Table({
        id: arrow.vectorFromArray(group.id, new arrow.Utf8()),
        model: arrow.vectorFromArray(group.model, new arrow.Utf8()),
        version: arrow.vectorFromArray(group.version, new arrow.Utf8()),
        probabilities: listVector(arrow, floatList, group.probabilities),
        logits: listVector(arrow, floatList, group.logits),
      });
      const wasmTable = wasm.Table.fromIPCStream(arrow.tableToIPC(table, 'stream'));
      for (const batch of wasmTable.recordBatches()) controller.enqueue(batch);
    },
  });
  const properties = new wasm.WriterPropertiesBuilder()
    .setCompression(wasm.Compression.SNAPPY)
    .setMaxRowGroupSize(ROW_GROUP)
    .setKeyValueMetadata(new Map([['shapes', SHAPES]]))
    .build();
  const bytes = await wasm.transformParquetStream(batches, properties);
  await bytes.pipeTo(Writable.toWeb(createWriteStream(path)));
}

function listVector(arrow, type, lists) {
  const valueOffsets = new Int32Array(lists.length + 1);
  for (let i = 0; i < lists.length; i++) valueOffsets[i + 1] = valueOffsets[i] + lists[i].length;
  const values = new Float32Array(valueOffsets[lists.length]);
  lists.forEach((list, i) => values.set(list, valueOffsets[i]));
  const child = arrow.makeData({ type: type.children[0].type, length: values.length, data: values });
  return arrow.makeVector(arrow.makeData({ type, length: lists.length, nullCount: 0, valueOffsets, child }));
}

async function writeParquetjsLite(rows, path) {
  const parquet = createRequire(import.meta.url)('parquetjs-lite');
  const schema = new parquet.ParquetSchema({
    id: { type: 'UTF8', compression: 'SNAPPY' },
    model: { type: 'UTF8', compression: 'SNAPPY' },
    version: { type: 'UTF8', compression: 'SNAPPY' },
    probabilities: { type: 'FLOAT', repeated: true, compression: 'SNAPPY' },
    logits: { type: 'FLOAT', repeated: true, compression: 'SNAPPY' },
  });
  const writer = await parquet.ParquetWriter.openFile(schema, path, { rowGroupSize: ROW_GROUP });
  writer.setMetadata('shapes', SHAPES);
  for (const record of records(rows)) {
    await writer.appendRow({
      id: record.id,
      model: record.model,
      version: record.version,
      probabilities: record.outputs.probabilities.data,
      logits: record.outputs.logits.data,
    });
  }
  await writer.close();
}

/** The installed version of a package, or undefined when it is not installed here. */
function installed(name) {
  const require = createRequire(import.meta.url);
  for (const dir of require.resolve.paths(name) ?? []) {
    const manifest = join(dir, name, 'package.json');
    if (existsSync(manifest)) return JSON.parse(readFileSync(manifest, 'utf8')).version;
  }
  return undefined;
}

/** A Parquet file's row count and last row, as hyparquet reads them. */
async function readBack(path) {
  const { parquetMetadata, parquetReadObjects } = await import('hyparquet');
  const file = (await readFile(path)).buffer;
  const rows = Number(parquetMetadata(file).num_rows);
  const [last] = await parquetReadObjects({ file, rowStart: rows - 1, rowEnd: rows });
  return { rows, last };
}

function run(name, rows, path) {
  const script = fileURLToPath(import.meta.url);
  const child = spawnSync(process.execPath, [script, '--child', name, String(rows), path], { encoding: 'utf8' });
  if (child.status !== 0) {
    const lines = child.stderr.split('\n');
    throw new Error(lines.find((line) => /Error\b/.test(line)) ?? lines.slice(0, 3).join(' | '));
  }
  return JSON.parse(child.stdout);
}

const { benchFlags, resultRecord, writeResult } = await import('./results.js');
const flags = benchFlags('parquet-writers');
const rows = flags.quick ? 20_000 : 100_000;
const dir = await mkdtemp(join(tmpdir(), 'batchserve-parquet-'));
const [expectedLast] = [...records(rows)].slice(-1);
const figures = [];
try {
  for (const [name, { packages }] of Object.entries(CANDIDATES)) {
    const missing = packages.filter((pkg) => !installed(pkg));
    if (missing.length > 0) {
      figures.push({ name, skipped: `not installed: ${missing.join(', ')}` });
      continue;
    }
    const path = join(dir, name.replaceAll(' ', '-'));
    try {
      // The fastest of three runs: the least disturbed by whatever else the machine is doing.
      const runs = [1, 2, 3].map(() => run(name, rows, path));
      const fastest = (key) => Math.min(...runs.map((one) => one[key]));
      const bytes = name === 'records only' ? 0 : (await stat(path)).size;
      if (PARQUET.has(name)) {
        const { rows: read, last } = await readBack(path);
        const expected = Math.fround(expectedLast.outputs.logits.data[9]);
        if (read !== rows || last.id !== expectedLast.id || last.logits[9] !== expected) {
          throw new Error(`hyparquet read back ${read} rows, last ${JSON.stringify(last)}`);
        }
      }
      figures.push({
        name,
        versions: Object.fromEntries(packages.map((pkg) => [pkg, installed(pkg)])),
        rowsPerSecond: Math.round(rows / fastest('seconds')),
        rowsPerCpuSecond: Math.round(rows / fastest('cpuSeconds')),
        fileBytes: bytes,
        peakRssMiB: Math.round(runs[0].maxRssKiB / 1024),
        peakRssMiBFourTimesRows: Math.round(run(name, rows * 4, path).maxRssKiB / 1024),
      });
    } catch (error) {
      figures.push({ name, failed: String(error.message ?? error) });
    }
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}

const reference = figures.find((figure) => figure.name === REFERENCE && figure.rowsPerSecond);
console.log(
  `${rows.toLocaleString('en')} records, row groups of ${ROW_GROUP.toLocaleString('en')}, Node ${process.version}, ` +
    `${cpus().length} CPUs, load average ${loadavg()[0].toFixed(2)}`,
);
console.log(
  'writer                 rows/s  rows/CPU-s  ×jsonl (CPU)  file MiB  ' +
    `peak RSS MiB (${rows / 1000}k → ${(rows * 4) / 1000}k rows)`,
);
for (const figure of figures) {
  if (!figure.rowsPerSecond) {
    console.log(`${figure.name.padEnd(20)} ${figure.skipped ?? `FAILED: ${figure.failed}`}`);
    continue;
  }
  const ratio = reference ? (figure.rowsPerCpuSecond / reference.rowsPerCpuSecond).toFixed(2) : '-';
  console.log(
    [
      figure.name.padEnd(20),
      String(figure.rowsPerSecond).padStart(8),
      String(figure.rowsPerCpuSecond).padStart(11),
      ratio.padStart(13),
      (figure.fileBytes / 2 ** 20).toFixed(2).padStart(9),
      `${figure.peakRssMiB} → ${figure.peakRssMiBFourTimesRows}`.padStart(14),
    ].join(' '),
  );
}
const measured = Object.fromEntries(figures.filter((figure) => figure.rowsPerSecond).map((f) => [f.name, f]));
const versus = (other) => {
  const [a, b] = [measured[CHOSEN], measured[other]];
  if (!a || !b) return `${other} not measured`;
  const speed = (a.rowsPerCpuSecond / b.rowsPerCpuSecond).toFixed(2);
  const size = (a.fileBytes / b.fileBytes).toFixed(2);
  const rss = `${a.peakRssMiBFourTimesRows} against ${b.peakRssMiBFourTimesRows} MiB`;
  return `${speed}× the rows per CPU-second of ${other}, ${size}× its file size, peak RSS ${rss} at ${(rows * 4) / 1000}k rows`;
};
const chosen =
  `chosen: ${CHOSEN}: ${versus('parquet-wasm')}; ${versus('parquetjs-lite')}. ` +
  'Pure JavaScript with one dependency (hyparquet), an incremental ParquetWriter (one row group ' +
  'at a time), three-level LIST columns, converted types, key-value metadata and snappy. ' +
  'About 1.5 MB installed, against some 23 MB for parquet-wasm with apache-arrow (which also ' +
  'brings @types/node 25 as a runtime dependency), which costs an Arrow IPC copy per row group; ' +
  'parquetjs-lite writes legacy two-level repeated fields rather than LIST columns.';
console.log(`\n${chosen}`);
await writeResult(flags.json, resultRecord('parquet-writers', flags, { rows, rowGroup: ROW_GROUP, figures, chosen }));
