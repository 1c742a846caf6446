// How close does the server get to the model's own limit on the demo model?
// Runs `bench --in-process` (the curve straight on the session) and served sweeps with binary
// and JSON tensors, the server pinned to CPU 0 and the client to CPU 1 (taskset, when present),
// and prints the ratios the project aims at (AIMS below), each marked met or MISSED:
//   served throughput (best sweep point) ÷ in-process limit   binary ≥ 0.95, JSON ≥ 0.6
//   realized batching speedup ÷ speedup predicted in process   ≥ 0.9
//   added p50 latency at concurrency 1, delay 0: served p50 − (in-process T(1) + the HTTP
//   round trip of the same body to a trivial server, trivial-round-trip.js)   ≤ 100 µs
// Writes benchmarks/results/served-vs-in-process.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:served [-- --quick] [-- --check]
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { demoPackArgs } from './demo-archive.js';
import { servedVsInProcess } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';

const AIMS = {
  served: { 'v2-binary': 0.95, 'v2-json': 0.6 },
  speedup: 0.9,
  addedP50Us: 100,
};
const flags = benchFlags('served-vs-in-process');
// --quick: B 1 and 8, no delay, concurrency 1 and 8, sub-second points; T(B) up to 8.
const settings = {
  pinned: spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0,
  inProcessUpTo: flags.quick ? 8 : 32,
  batchSizes: flags.quick ? [1, 8] : [1, 8, 32],
  delays: flags.quick ? ['0'] : ['0', '2ms'],
  concurrency: flags.quick ? [1, 8] : [1, 8, 32],
  window: flags.quick ? '250ms' : '1s',
  warmup: flags.quick ? '250ms' : '1s',
  duration: flags.quick ? '750ms' : '6s',
};

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const dir = await mkdtemp(join(tmpdir(), 'batchserve-served-'));
const { pinned } = settings;
const onCpu0 = (args) => (pinned ? ['taskset', ['-c', '0', process.execPath, ...args]] : [process.execPath, args]);
const run = (args) => {
  const [command, commandArgs] = onCpu0([bin, ...args]);
  execFileSync(command, commandArgs, { stdio: ['ignore', 'ignore', 'inherit'] });
};
const report = async (name) => JSON.parse(await readFile(join(dir, name), 'utf8'));

run(demoPackArgs({ exportPath: dir }));
const archive = join(dir, 'orientation.mar');
run([
  'bench',
  archive,
  '--in-process',
  '--batch-sizes',
  String(settings.inProcessUpTo),
  '--json',
  join(dir, 'in-process.json'),
]);
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
      settings.batchSizes.join(','),
      '--delays',
      settings.delays.join(','),
      '--concurrency',
      settings.concurrency.join(','),
      '--window',
      settings.window,
      '--warmup',
      settings.warmup,
      '--duration',
      settings.duration,
      '--json',
      join(dir, `${protocol}.json`),
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
}

// The round trip alone, server on CPU 0 and client on CPU 1 as in the sweeps.
const trivialScript = fileURLToPath(new URL('./trivial-round-trip.js', import.meta.url));
const onCpu = (cpu, args) =>
  pinned ? ['taskset', ['-c', String(cpu), process.execPath, ...args]] : [process.execPath, args];
const trivialServer = spawn(...onCpu(0, [trivialScript, 'serve']), { stdio: ['ignore', 'pipe', 'inherit'] });
const [portLine] = await once(trivialServer.stdout, 'data');
const roundTripP50Ms = {};
for (const protocol of ['v2-binary', 'v2-json']) {
  const [command, args] = onCpu(1, [
    trivialScript,
    'measure',
    String(portLine).trim(),
    protocol,
    flags.quick ? '1000' : '4000',
  ]);
  roundTripP50Ms[protocol] = JSON.parse(execFileSync(command, args, { encoding: 'utf8' })).p50Ms;
}
trivialServer.kill();

const fit = (await report('in-process.json')).inProcess;
/**
 * The speedup the model itself gives at B: B·T(1) ÷ T(B) as timed in process, or from the fit
 * where B was not timed. (A fit can fail — a negative c when bigger batches cost more a row —
 * and its formula then says nothing.)
 */
const predicted = (b) => {
  const timed = fit.samples.find((s) => s.batchSize === b);
  const one = fit.samples.find((s) => s.batchSize === 1);
  if (timed && one) return (b * one.ms) / timed.ms;
  return (b * (fit.c + fit.m)) / (fit.c + b * fit.m);
};
const inProcess = {
  c: fit.c,
  m: fit.m,
  ceiling: fit.ceiling,
  failure: fit.failure,
  limit: Math.max(...fit.samples.map((s) => (s.batchSize * 1000) / s.ms)),
  t1: fit.samples.find((s) => s.batchSize === 1).ms,
};

const protocols = [];
for (const protocol of ['v2-binary', 'v2-json']) {
  const { points } = await report(`${protocol}.json`);
  const best = points.reduce((a, b) => (b.itemsPerSecond > a.itemsPerSecond ? b : a));
  const bestAt = (size) =>
    Math.max(...points.filter((p) => p.server.maxBatchSize === size).map((p) => p.itemsPerSecond));
  const batchSize = best.server.maxBatchSize;
  const realizedSpeedup = bestAt(batchSize) / bestAt(1);
  const solo = points.find(
    (p) => p.server.maxBatchSize === 1 && p.server.maxQueueDelayUs === 0 && p.load.concurrency === 1,
  );
  const servedRatio = best.itemsPerSecond / inProcess.limit;
  const speedupRatio = realizedSpeedup / predicted(batchSize);
  const roundTripMs = roundTripP50Ms[protocol];
  const addedP50Us = (solo.latency.p50 - inProcess.t1 - roundTripMs) * 1000;
  protocols.push({
    protocol,
    best: {
      itemsPerSecond: best.itemsPerSecond,
      batchSize,
      delayUs: best.server.maxQueueDelayUs,
      concurrency: best.load.concurrency,
    },
    servedRatio,
    realizedSpeedup,
    predictedSpeedup: predicted(batchSize),
    speedupRatio,
    soloP50Ms: solo.latency.p50,
    roundTripMs,
    addedP50Us,
    verdicts: [
      { key: 'served', aim: `≥ ${AIMS.served[protocol]}`, met: servedRatio >= AIMS.served[protocol] },
      { key: 'speedup', aim: `≥ ${AIMS.speedup}`, met: speedupRatio >= AIMS.speedup },
      { key: 'latency', aim: `≤ ${AIMS.addedP50Us} µs`, met: addedP50Us <= AIMS.addedP50Us },
    ],
  });
}

const record = resultRecord('served-vs-in-process', flags, { settings, inProcess, protocols });
console.log(servedVsInProcess.render(record));
await writeResult(flags.json, record);
exitOnMissed(
  flags,
  protocols.flatMap(({ protocol, verdicts }) =>
    verdicts.map(({ key, aim, met }) => ({ label: `${protocol} ${key} ${aim}`, met })),
  ),
);
await rm(dir, { recursive: true, force: true });
