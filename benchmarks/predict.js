// Does `batchserve predict` keep memory flat and the model busy? On the demo model:
//   peak RSS scoring 10,000 and 100,000 rows of a .npy (one file; --shard 0/10 takes the first
//   tenth): the two within 20 % of each other (the pipeline is bounded, not the input);
//   rows/s ÷ `bench --in-process` items/s at the same batch size (the archive's 32), for the
//   tensor handler on .npy input: aim ≥ 0.95 (medians of 3 rounds, each measuring both, so
//   a busy moment on the machine hits both alike). The archives set runtime.intra_op_threads
//   and inter_op_threads to 1: the model gets one CPU and reading and writing another, as
//   served-vs-in-process.js pins the server to one CPU and its client to the other. The
//   stock config (onnxruntime's own thread count, every CPU) is measured too, without an aim:
//   there the pipeline's own work takes CPU from the model;
//   rows/s ÷ the served throughput (best point of benchmarks/results/served-vs-in-process.json);
//   the same ratios for JSON Lines input (tensor handler) and a folder of PNGs
//   (image-classifier handler: decoding and resizing included), reported without an aim.
// Rows/s is predict's own figure: rows scored per second from the first row read to the
// output renamed into place, model loading excluded. Peak RSS is the child's VmHWM.
// Writes benchmarks/results/predict.json (see results.js for --quick, --check, --json).
// Usage: npm run build && node benchmarks/predict.js [--quick] [--check]
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { open, mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PNG } from 'pngjs';
import { DEMO_EXAMPLES, DEMO_MODEL_PATH, demoPackArgs } from './demo-archive.js';
import { predict as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, RESULTS_DIR, writeResult } from './results.js';

const AIMS = { rssGrowth: 0.2, npyVsInProcess: 0.95 };
const flags = benchFlags('predict');
const settings = {
  rows: flags.quick ? [1_000, 10_000] : [10_000, 100_000],
  jsonlRows: flags.quick ? 200 : 2_000,
  imageRows: flags.quick ? 200 : 2_000,
  batchSize: 32,
  rounds: flags.quick ? 1 : 3,
};

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const dir = await mkdtemp(join(tmpdir(), 'batchserve-predict-bench-'));
const ROW = [3, 48, 192];
const ROW_FLOATS = ROW.reduce((a, b) => a * b, 1);

const cli = (args) => execFileSync(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
const pack = (handler, exportPath, configFile) => cli(demoPackArgs({ exportPath, handler, configFile }));

/** `predict` in a child, its summary printed; its rows/s (from the summary) and its peak RSS (VmHWM, polled). */
async function predict(archive, input, output, ...extra) {
  const child = spawn(
    process.execPath,
    [bin, 'predict', archive, '--input', input, '--output', output, '--progress-interval', '1000s', ...extra],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let stdout = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  let peakKiB = 0;
  const poll = setInterval(async () => {
    const status = await readFile(`/proc/${child.pid}/status`, 'utf8').catch(() => '');
    peakKiB = Math.max(peakKiB, Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0));
  }, 100);
  const [code] = await once(child, 'close');
  clearInterval(poll);
  if (code !== 0) throw new Error(`predict exited with ${code}: ${stdout}`);
  const rowsPerSecond = Number(/\(([\d.]+) rows\/s\)/.exec(stdout)?.[1]);
  console.log(stdout.trim());
  return { rowsPerSecond, peakRssMiB: peakKiB / 1024 };
}

/** Random rows, written as one block repeated: the file is large, building it is quick. */
async function writeNpy(path, rows) {
  const header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${rows}, ${ROW.join(', ')}), }`;
  const padded = header + ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const head = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(head);
  head.writeUInt16LE(padded.length, 8);
  const blockRows = Math.min(rows, 1_000);
  const block = Float32Array.from({ length: blockRows * ROW_FLOATS }, () => Math.random() * 2 - 1);
  const handle = await open(path, 'w');
  try {
    await handle.write(Buffer.concat([head, Buffer.from(padded, 'latin1')]));
    for (let written = 0; written < rows; written += blockRows) {
      const count = Math.min(blockRows, rows - written);
      await handle.write(new Uint8Array(block.buffer, 0, count * ROW_FLOATS * 4));
    }
  } finally {
    await handle.close();
  }
}

async function writeJsonl(path, rows) {
  const handle = await open(path, 'w');
  try {
    for (let row = 0; row < rows; row++) {
      const data = Array.from({ length: ROW_FLOATS }, () => Math.random() * 2 - 1);
      await handle.write(
        `${JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, ...ROW], data }] })}\n`,
      );
    }
  } finally {
    await handle.close();
  }
}

/** Text-line-like PNGs of varied widths, so every image is resized and padded. */
async function writeImages(folder, rows) {
  await mkdir(folder, { recursive: true });
  for (let row = 0; row < rows; row++) {
    const width = 96 + (row % 7) * 32;
    const image = new PNG({ width, height: 32 });
    for (let i = 0; i < width * 32; i++) {
      const ink = (i % width) % (9 + (row % 5)) < 4 && Math.floor(i / width) % 24 > 6;
      image.data.set(ink ? [20, 20, 20, 255] : [245, 245, 245, 255], i * 4);
    }
    await writeFile(join(folder, `line-${String(row).padStart(6, '0')}.png`), PNG.sync.write(image));
  }
}

try {
  const stockConfig = join(DEMO_EXAMPLES, 'model-config.yaml');
  const oneThreadConfig = join(dir, 'one-thread.yaml');
  await writeFile(
    oneThreadConfig,
    `${await readFile(stockConfig, 'utf8')}runtime:\n  intra_op_threads: 1\n  inter_op_threads: 1\n`,
  );
  pack('tensor', join(dir, 'tensor'), oneThreadConfig);
  pack('image-classifier', join(dir, 'image'), oneThreadConfig);
  pack('tensor', join(dir, 'stock'), stockConfig);
  const tensorArchive = join(dir, 'tensor', 'orientation.mar');
  const imageArchive = join(dir, 'image', 'orientation.mar');
  const stockArchive = join(dir, 'stock', 'orientation.mar');
  const servedResult = JSON.parse(await readFile(join(RESULTS_DIR, 'served-vs-in-process.json'), 'utf8'));
  const servedBest = servedResult.protocols.find((p) => p.protocol === 'v2-binary').best;

  const [fewer, more] = settings.rows;
  await writeNpy(join(dir, 'rows.npy'), more);
  // Each round measures the references and the shorter run in turn, so a busy moment hits
  // them alike; the plain loop runs before and after predict, and the two are the control.
  const inProcessRounds = [];
  const fewerRuns = [];
  const plainRounds = [];
  for (let round = 0; round < settings.rounds; round++) {
    const before = measurePlainLoop();
    inProcessRounds.push(measureInProcess(tensorArchive));
    const output = join(dir, `npy-${round}.jsonl`);
    fewerRuns.push(await predict(tensorArchive, join(dir, 'rows.npy'), output, '--shard', `0/${more / fewer}`));
    plainRounds.push({ before, after: measurePlainLoop() });
  }
  const moreRun = await predict(tensorArchive, join(dir, 'rows.npy'), join(dir, 'npy-all.jsonl'));
  const stockInProcess = measureInProcess(stockArchive);
  const stockRun = await predict(
    stockArchive,
    join(dir, 'rows.npy'),
    join(dir, 'stock.jsonl'),
    '--shard',
    `0/${more / fewer}`,
  );
  await rm(join(dir, 'rows.npy'));
  const inProcess = median(inProcessRounds);
  const plainLoop = {
    itemsPerSecond: median(plainRounds.flatMap(({ before, after }) => [before, after])),
    rounds: plainRounds,
    // predict's rows/s ÷ the mean of the loop around it, each round: the spread to judge by.
    npyRatios: plainRounds.map(({ before, after }, round) => fewerRuns[round].rowsPerSecond / ((before + after) / 2)),
    controlRatios: plainRounds.map(({ before, after }) => after / before),
  };

  await writeJsonl(join(dir, 'rows.jsonl'), settings.jsonlRows);
  const jsonl = await predict(tensorArchive, join(dir, 'rows.jsonl'), join(dir, 'jsonl.jsonl'));
  await writeImages(join(dir, 'images'), settings.imageRows);
  const images = await predict(imageArchive, join(dir, 'images'), join(dir, 'images.jsonl'));

  const rss = [
    { rows: fewer, peakRssMiB: Math.max(...fewerRuns.map((run) => run.peakRssMiB)) },
    { rows: more, peakRssMiB: moreRun.peakRssMiB },
  ];
  const rssGrowth = rss[1].peakRssMiB / rss[0].peakRssMiB - 1;
  const ratios = (rowsPerSecond, reference = inProcess) => ({
    rowsPerSecond,
    vsInProcess: rowsPerSecond / reference,
    vsPlainLoop: rowsPerSecond / plainLoop.itemsPerSecond,
    vsServed: rowsPerSecond / servedBest.itemsPerSecond,
  });
  const inputs = [
    { input: 'npy', handler: 'tensor', rows: fewer, ...ratios(median(fewerRuns.map((run) => run.rowsPerSecond))) },
    { input: 'npy', handler: 'tensor', rows: more, ...ratios(moreRun.rowsPerSecond) },
    { input: 'jsonl', handler: 'tensor', rows: settings.jsonlRows, ...ratios(jsonl.rowsPerSecond) },
    { input: 'images', handler: 'image-classifier', rows: settings.imageRows, ...ratios(images.rowsPerSecond) },
    {
      input: 'npy',
      handler: 'tensor, stock threads',
      rows: fewer,
      ...ratios(stockRun.rowsPerSecond, stockInProcess),
    },
  ];
  const verdicts = [
    {
      label: `peak RSS ${fewer} vs ${more} rows within ${AIMS.rssGrowth * 100} %`,
      met: Math.abs(rssGrowth) <= AIMS.rssGrowth,
    },
    {
      label: `npy rows/s ÷ in-process ≥ ${AIMS.npyVsInProcess}`,
      met: inputs[0].vsInProcess >= AIMS.npyVsInProcess,
    },
    {
      label: `npy rows/s ÷ a plain one-thread onnxruntime loop ≥ ${AIMS.npyVsInProcess}, median round`,
      met: median(plainLoop.npyRatios) >= AIMS.npyVsInProcess,
    },
  ];
  const record = resultRecord('predict', flags, {
    settings,
    inProcess: { itemsPerSecond: inProcess, rounds: inProcessRounds, stockThreads: stockInProcess },
    plainLoop,
    served: {
      itemsPerSecond: servedBest.itemsPerSecond,
      batchSize: servedBest.batchSize,
      date: servedResult.date,
      cpu: servedResult.environment.cpu,
    },
    rss,
    rssGrowth,
    inputs,
    verdicts,
  });
  console.log(`\n${render.render(record)}`);
  await writeResult(flags.json, record);
  exitOnMissed(flags, verdicts);
} finally {
  await rm(dir, { recursive: true, force: true });
}

/** `bench --in-process` at the batch size: items per second straight on a session. */
function measureInProcess(archive) {
  const json = join(dir, 'in-process.json');
  execFileSync(
    process.execPath,
    [bin, 'bench', archive, '--in-process', '--batch-sizes', String(settings.batchSize), '--json', json],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  // bench measures every power of two up to the batch size; the reference is the batch size's own.
  const sample = JSON.parse(readFileSync(json, 'utf8')).inProcess.samples.find(
    (one) => one.batchSize === settings.batchSize,
  );
  return (sample.batchSize * 1000) / sample.ms;
}

/** The plain loop (benchmarks/ort-loop.js) on the demo model for 8 s: items per second. */
function measurePlainLoop() {
  const loop = fileURLToPath(new URL('ort-loop.js', import.meta.url));
  const printed = execFileSync(process.execPath, [loop, DEMO_MODEL_PATH, String(settings.batchSize), '8'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return Number(printed.toString().trim());
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}
