// Does the server's V8 flag (src/core/serving-node-flags.ts: --initial-old-space-size=64) pay?
// The demo model (intra_op_threads 1, max_queue_delay 0) served by `serve` on CPU 0 under
// V8's default heap sizing and under the flag, alternately, fresh servers each time, driven
// from CPU 1 by the bench's own sweep at concurrency 1 and 64. Besides the client's
// throughput and latency, the server's own garbage collection from its metrics
// (prom-client's nodejs_gc_duration_seconds: the main thread's collections by kind): a major
// GC every few hundred ms is what the flag is for. Ratios compare the two in the same round;
// the summary takes the median over rounds. Aims: with the flag, p99 at concurrency 1 ≤ 0.8 ×
// the default's and throughput at concurrency 64 ≥ 1.0 × the default's.
// Writes benchmarks/results/serving-heap.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:heap [-- --quick] [-- --check]
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { servingHeap as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { CAN_PIN, pinSelfOffServerCpu, serveChild } from './serve-child.js';

const AIMS = { p99RatioC1: 0.8, throughputRatioC64: 1.0 };
const CONCURRENCY = [1, 64];

const flags = benchFlags('serving-heap');
const settings = {
  pinned: CAN_PIN,
  rounds: flags.quick ? 1 : 4,
  concurrency: CONCURRENCY,
  warmupMs: 1000,
  windowMs: flags.quick ? 1000 : 2000,
  windows: 2,
};

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const { demoPackArgs, DEMO_EXAMPLES } = await import('./demo-archive.js');
const { SERVING_NODE_FLAGS } = await import('../dist/src/core/serving-node-flags.js');
const { runSweep } = await import('../dist/src/bench/sweep.js');

const VARIANTS = [
  { name: 'default', label: "V8's default heap sizing", nodeFlags: [] },
  { name: 'flag', label: SERVING_NODE_FLAGS.join(' '), nodeFlags: SERVING_NODE_FLAGS },
];
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

async function packDemo(dir) {
  const config = parse(await readFile(join(DEMO_EXAMPLES, 'model-config.yaml'), 'utf8'));
  config.runtime = { ...config.runtime, intra_op_threads: 1 };
  config.dynamic_batching = { ...config.dynamic_batching, max_queue_delay: 0 };
  const configFile = join(dir, 'orientation.yaml');
  await writeFile(configFile, stringify(config));
  const pack = spawnSync(process.execPath, [bin, ...demoPackArgs({ exportPath: dir, configFile })], {
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  if (pack.status !== 0) throw new Error(`pack exited ${pack.status}`);
  return join(dir, 'orientation.mar');
}

/** A `serve` child on CPU 0 with the variant's Node flags. */
function serve(archive, dir, variant) {
  return serveChild({ name: 'orientation', archive, dir, pinned: settings.pinned, nodeFlags: variant.nodeFlags });
}

/** The main thread's collections so far, by kind: count and seconds (prom-client's histogram). */
async function gcTotals(metricsUrl) {
  const text = await (await fetch(metricsUrl)).text();
  const totals = {};
  for (const [, field, kind, value] of text.matchAll(
    /^nodejs_gc_duration_seconds_(count|sum)\{kind="(\w+)"\} (\S+)$/gm,
  )) {
    totals[kind] ??= { count: 0, seconds: 0 };
    totals[kind][field === 'count' ? 'count' : 'seconds'] = Number(value);
  }
  return totals;
}

const gcDelta = (after, before) =>
  Object.fromEntries(
    Object.entries(after).map(([kind, { count, seconds }]) => [
      kind,
      { count: count - (before[kind]?.count ?? 0), seconds: seconds - (before[kind]?.seconds ?? 0) },
    ]),
  );

async function measure(server, concurrency) {
  const before = await gcTotals(server.urls.metrics);
  const { points } = await runSweep(server.target, {
    batchSizes: [32],
    delays: [0],
    instances: [1],
    levels: [{ kind: 'concurrency', concurrency }],
    protocol: 'v2-binary',
    clientBatch: 1,
    load: {
      warmupMs: settings.warmupMs,
      windowMs: settings.windowMs,
      minWindows: settings.windows,
      maxWindows: settings.windows,
      stabilityPct: 0,
      requestTimeoutMs: 60_000,
      workers: 1,
    },
  });
  const gc = gcDelta(await gcTotals(server.urls.metrics), before);
  const [point] = points;
  // Over the warm-up and the windows together: the metrics cannot tell them apart.
  const seconds = (settings.warmupMs + settings.windowMs * settings.windows) / 1000;
  return {
    concurrency,
    throughput: point.throughput,
    p50Ms: point.latency.p50,
    p99Ms: point.latency.p99,
    majorGcsPerSecond: (gc.major?.count ?? 0) / seconds,
    /** The share of the time the main thread spent collecting (every kind, incremental steps included). */
    gcShare: Object.values(gc).reduce((sum, { seconds: spent }) => sum + spent, 0) / seconds,
  };
}

async function measureRound(archive, dir, round) {
  const order = round % 2 === 1 ? VARIANTS : [...VARIANTS].reverse();
  const runs = [];
  for (const variant of order) {
    const server = await serve(archive, dir, variant);
    try {
      for (const concurrency of CONCURRENCY)
        runs.push({ variant: variant.name, ...(await measure(server, concurrency)) });
    } finally {
      await server.stop();
    }
  }
  return { round, order: order.map((variant) => variant.name), runs };
}

function summarize(rounds) {
  const run = (round, variant, concurrency) =>
    round.runs.find((r) => r.variant === variant && r.concurrency === concurrency);
  const ratio = (concurrency, key) =>
    rounds.map((round) => run(round, 'flag', concurrency)[key] / run(round, 'default', concurrency)[key]);
  const perVariant = VARIANTS.map(({ name }) => ({
    variant: name,
    levels: CONCURRENCY.map((concurrency) => {
      const of = (key) => median(rounds.map((round) => run(round, name, concurrency)[key]));
      return {
        concurrency,
        throughput: of('throughput'),
        p50Ms: of('p50Ms'),
        p99Ms: of('p99Ms'),
        majorGcsPerSecond: of('majorGcsPerSecond'),
        gcShare: of('gcShare'),
      };
    }),
  }));
  const p99RatiosC1 = ratio(1, 'p99Ms');
  const throughputRatiosC64 = ratio(64, 'throughput');
  return {
    perVariant,
    p99RatioC1: median(p99RatiosC1),
    p99RatiosC1,
    p99RatioC64: median(ratio(64, 'p99Ms')),
    p99RatiosC64: ratio(64, 'p99Ms'),
    throughputRatioC64: median(throughputRatiosC64),
    throughputRatiosC64,
    verdicts: [
      { key: 'p99 c=1', aim: `≤ ${AIMS.p99RatioC1}`, met: median(p99RatiosC1) <= AIMS.p99RatioC1 },
      {
        key: 'throughput c=64',
        aim: `≥ ${AIMS.throughputRatioC64}`,
        met: median(throughputRatiosC64) >= AIMS.throughputRatioC64,
      },
    ],
  };
}

const dir = await mkdtemp(join(tmpdir(), 'batchserve-heap-'));
const record = resultRecord('serving-heap', flags, { settings, variants: VARIANTS, rounds: [] }, ['undici']);
try {
  // The client (this process, every thread) keeps off CPU 0, which the server gets.
  if (settings.pinned) pinSelfOffServerCpu();
  const archive = await packDemo(dir);
  console.log(render.header(record));
  for (let round = 1; round <= settings.rounds; round++) {
    record.rounds.push(await measureRound(archive, dir, round));
    console.log(render.round(record.rounds.at(-1)));
  }
  record.summary = summarize(record.rounds);
  console.log(render.summary(record));
  await writeResult(flags.json, record);
  exitOnMissed(
    flags,
    record.summary.verdicts.map(({ key, aim, met }) => ({ label: `${key} ${aim}`, met })),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
