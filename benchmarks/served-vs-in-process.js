// How close does the server get to the model's own limit on the demo model?
// Runs `bench --in-process` (the curve straight on the session) and served sweeps with binary
// and JSON tensors, the server pinned to CPU 0 and the client to CPU 1 (taskset, when present),
// and prints the ratios the project aims at:
//   served throughput (best sweep point) ÷ in-process limit   binary ≥ 0.95, JSON ≥ 0.6
//   realized batching speedup ÷ speedup predicted in process   ≥ 0.9
//   added p50 latency at concurrency 1, delay 0 over the in-process call   ≤ 150 µs
// Usage: npm run build && node benchmarks/served-vs-in-process.js
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ort from 'onnxruntime-node';
import { DEMO_MODEL_PATH } from '../dist/src/runtime/demo-model.js';

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const examples = fileURLToPath(new URL('../examples/orientation/', import.meta.url));
const dir = await mkdtemp(join(tmpdir(), 'batchserve-served-'));
const pinned = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0;
const onCpu0 = (args) => (pinned ? ['taskset', ['-c', '0', process.execPath, ...args]] : [process.execPath, args]);
const run = (args) => {
  const [command, commandArgs] = onCpu0([bin, ...args]);
  execFileSync(command, commandArgs, { stdio: ['ignore', 'ignore', 'inherit'] });
};
const report = async (name) => JSON.parse(await readFile(join(dir, name), 'utf8'));

run([
  'model-archive',
  'pack',
  '--model-name',
  'orientation',
  '--serialized-file',
  DEMO_MODEL_PATH,
  '--handler',
  'image-classifier',
  '--config-file',
  join(examples, 'model-config.yaml'),
  '--extra-files',
  join(examples, 'labels.txt'),
  '--export-path',
  dir,
]);
const archive = join(dir, 'orientation.mar');
run(['bench', archive, '--in-process', '--batch-sizes', '32', '--json', join(dir, 'in-process.json')]);
const timing = { window: ['--window', '1s', '--warmup', '1s', '--duration', '6s'] };
for (const protocol of ['v2-binary', 'v2-json']) {
  // The bench client itself runs on CPU 1; with --pin it moves there and serves on CPU 0.
  execFileSync(
    process.execPath,
    [
      bin,
      'bench',
      archive,
      ...(pinned ? ['--pin'] : []),
      '--protocol',
      protocol,
      '--batch-sizes',
      '1,8,32',
      '--delays',
      '0,2ms',
      '--concurrency',
      '1,8,32',
      ...timing.window,
      '--json',
      join(dir, `${protocol}.json`),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

const inProcess = (await report('in-process.json')).inProcess;
const limit = Math.max(...inProcess.samples.map((s) => (s.batchSize * 1000) / s.ms));
const predicted = (b) => (b * (inProcess.c + inProcess.m)) / (inProcess.c + b * inProcess.m);
const t1 = inProcess.samples.find((s) => s.batchSize === 1).ms;

console.log(
  `node ${process.version}, onnxruntime-node ${ort.env.versions.common}, ${cpus().length}× ${cpus()[0]?.model}`,
);
console.log(
  pinned ? 'server pinned to CPU 0, client to CPU 1 (taskset)' : 'taskset not found: server and client share the CPUs',
);
console.log(
  `in-process: c = ${inProcess.c.toFixed(3)} ms, m = ${inProcess.m.toFixed(3)} ms, ceiling ${inProcess.ceiling.toFixed(2)}×, limit ${limit.toFixed(0)} items/s`,
);
for (const protocol of ['v2-binary', 'v2-json']) {
  const { points } = await report(`${protocol}.json`);
  const best = points.reduce((a, b) => (b.itemsPerSecond > a.itemsPerSecond ? b : a));
  const bestAt = (size) =>
    Math.max(...points.filter((p) => p.server.maxBatchSize === size).map((p) => p.itemsPerSecond));
  const realized = bestAt(best.server.maxBatchSize) / bestAt(1);
  const solo = points.find(
    (p) => p.server.maxBatchSize === 1 && p.server.maxQueueDelayUs === 0 && p.load.concurrency === 1,
  );
  console.log(
    `\n${protocol}: best ${best.itemsPerSecond.toFixed(0)} items/s at B=${best.server.maxBatchSize} delay ${best.server.maxQueueDelayUs} µs, concurrency ${best.load.concurrency}`,
  );
  console.log(`  served ÷ in-process limit            ${(best.itemsPerSecond / limit).toFixed(3)}`);
  console.log(
    `  realized speedup ÷ predicted S(${best.server.maxBatchSize})    ${(realized / predicted(best.server.maxBatchSize)).toFixed(3)}  (realized ${realized.toFixed(2)}×, predicted ${predicted(best.server.maxBatchSize).toFixed(2)}×)`,
  );
  console.log(
    `  added p50 latency at c=1, delay 0    ${((solo.latency.p50 - t1) * 1000).toFixed(0)} µs  (served p50 ${solo.latency.p50.toFixed(3)} ms, in-process T(1) ${t1.toFixed(3)} ms)`,
  );
}
await rm(dir, { recursive: true, force: true });
