// Does `max_queue_delay: auto` (adaptive batching) keep up with the best fixed delay, without
// its cost at low load? Two models: the demo orientation classifier (its shipped config:
// max_batch_size 32, preferred sizes 8 and 32; batching pays little, 1 + c/m ≈ 2) and a cost
// model generated here whose forward pass has a fixed cost large next to its per-row cost
// (a 640² matrix product per pass, two passes over 131 072 values per row; 1 + c/m ≈ 10,
// max_batch_size 16). Both with `intra_op_threads: 1` and `max_latency: 100ms`.
//
// Each round starts one fresh `serve` child per model on CPU 0 (taskset, when present), from an
// archive that says `max_queue_delay: auto` (so it times its batches at load as a deployed model
// does, not inside the first level), and drives it from CPU 1 with the bench's own sweep
// (runSweep), which switches it between the configurations (delays 0, 1ms, 2ms, 5ms, 10ms,
// auto, and delay 0 once more: CONTROL) through the management API as `bench --delays` does:
// every ratio compares points of one sweep on one server. One load level at a time across all seven: closed loop at concurrency 1, 4, 16, 64, then open loop
// (Poisson) at 70 % of the highest throughput a fixed delay reached at concurrency 64 in that
// round. At 90 %, and on the slower machines of later passes at 80 %, the rate sat at the
// server's capacity: delay 0's queue ran away (p99 222–537 ms in five of six rounds of the
// ninth pass), so no configuration could answer all of it within the budget, and the level
// measured overload (benchmarks/overload.js's subject) instead of a sustained load.
// Each level runs every configuration four times, interleaved A B B A (measureSlices), and every ratio
// compares figures of the same round, against the fixed delay that did best in the other rounds
// (summarize); the summary takes the median over rounds. Delay 0 measured twice in each slice
// gives the ratios' yardstick: how far one configuration lands from itself. Aims (AIMS):
//   auto throughput ÷ the best fixed delay's, at every load level     ≥ 0.95
//   auto p50 ÷ delay 0's p50, at concurrency 1                        ≤ 1.05
//   auto p99, at every load level                                     ≤ max_latency
// Throughput and latency count answered requests; auto refuses (503 BS_ERR_LATENCY_BUDGET) what
// it expects to answer past max_latency, and the share it refused is printed beside.
// After each level the auto server's learnt line (GET /models/{m}: adaptiveBatching) is kept.
// The policy alone also runs on a simulated clock (simulated-batcher.js) with the in-process line.
// Writes benchmarks/results/adaptive.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:adaptive [-- --quick] [-- --check]
import { spawn, spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import onnxProto from 'onnx-proto';
import { build, decodeFromCompressedBase64 } from 'hdr-histogram-js';
import { parse, stringify } from 'yaml';
import { CONCURRENCY, CONTROL, MAX_LATENCY_MS, RATE_SHARE, STATIC_DELAYS_US } from './adaptive-sweep.js';
import { adaptive as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { serveChild } from './serve-child.js';

const AIMS = { throughputRatio: 0.95, p50Ratio: 1.05 };

/** A run that only brings a level or a configuration to its steady state: its figures are dropped. */
const UNMEASURED = { windowMs: 100, windows: 1 };

const flags = benchFlags('adaptive');
const settings = {
  pinned: spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0 && cpus().length >= 2,
  rounds: flags.quick ? 1 : 3,
  staticDelaysUs: STATIC_DELAYS_US,
  concurrency: CONCURRENCY,
  rateShare: RATE_SHARE,
  maxLatencyMs: MAX_LATENCY_MS,
  /** Each level runs every configuration this many times in a round, interleaved. */
  slices: flags.quick ? 2 : 4,
  // Longer than Retry-After's second: a closed-loop client refused at the start is back before
  // the windows, which then see the steady state, not each configuration's first second.
  warmupMs: flags.quick ? 200 : 1200,
  windowMs: flags.quick ? 250 : 500,
  windows: 2,
};

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const { demoPackArgs, DEMO_EXAMPLES } = await import('./demo-archive.js');
const { runSweep } = await import('../dist/src/bench/sweep.js');
const { measureInProcess } = await import('../dist/src/bench/in-process.js');
const { fitBatchCost } = await import('../dist/src/bench/fit.js');
const { simulate } = await import('./simulated-batcher.js');

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

/**
 * The cost model, as test/fixtures/onnx-models.ts `costModel` builds it: y = x + 0 · work,
 * where work is a fixed [n×n]·[n×n] product (c) plus Sin and Cos over `width` values per row (m).
 * Served with graph_optimization_level: disabled, or onnxruntime folds the fixed product away.
 */
function costModel(n = 640, width = 131_072) {
  const { onnx } = onnxProto;
  const FLOAT = onnx.TensorProto.DataType.FLOAT;
  const INT = onnx.AttributeProto.AttributeType.INT;
  const tensor = (name) => ({
    name,
    type: { tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: 'batch' }, { dimValue: 4 }] } } },
  });
  const keepdims = (i) => [{ name: 'keepdims', type: INT, i }];
  return onnx.ModelProto.encode({
    irVersion: 8,
    producerName: 'batchserve-benchmarks',
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'cost',
      node: [
        { opType: 'MatMul', input: ['fixed', 'fixed'], output: ['fixedSquare'] },
        { opType: 'ReduceSum', input: ['fixedSquare'], output: ['fixedSum'], attribute: keepdims(0) },
        { opType: 'MatMul', input: ['x', 'spread'], output: ['wide0'] },
        { opType: 'Sin', input: ['wide0'], output: ['wide1'] },
        { opType: 'Cos', input: ['wide1'], output: ['wide2'] },
        { opType: 'ReduceSum', input: ['wide2', 'axis1'], output: ['rowSum'], attribute: keepdims(1) },
        { opType: 'Add', input: ['rowSum', 'fixedSum'], output: ['work'] },
        { opType: 'Mul', input: ['work', 'zero'], output: ['nothing'] },
        { opType: 'Add', input: ['x', 'nothing'], output: ['y'] },
      ],
      initializer: [
        {
          name: 'fixed',
          dataType: FLOAT,
          dims: [n, n],
          floatData: Array.from({ length: n * n }, (_, i) => (i % 7) / 7),
        },
        { name: 'spread', dataType: FLOAT, dims: [4, width], floatData: new Array(4 * width).fill(0.25) },
        { name: 'axis1', dataType: onnx.TensorProto.DataType.INT64, dims: [1], int64Data: [1] },
        { name: 'zero', dataType: FLOAT, dims: [], floatData: [0] },
      ],
      input: [tensor('x')],
      output: [tensor('y')],
    },
  }).finish();
}

/** Runs a child to its end. */
function run([command, args]) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'inherit'] });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

/**
 * Both archives, each with intra_op_threads 1 and the adaptive latency budget, twice: the auto
 * servers load a copy whose config says `max_queue_delay: auto`, as a user would deploy it, so
 * they time their batches at load (calibrate-cost.ts) and not inside the first measured level.
 */
async function packModels(dir) {
  const pack = async (name, config, packArgs) => {
    for (const [variant, delay] of [
      ['fixed', undefined],
      ['auto', 'auto'],
    ]) {
      const exportPath = join(dir, variant);
      await mkdir(exportPath, { recursive: true });
      const batching = { ...config.dynamic_batching, ...(delay ? { max_queue_delay: delay } : {}) };
      const configFile = join(exportPath, `${name}.yaml`);
      await writeFile(configFile, stringify({ ...config, dynamic_batching: batching }));
      await run([process.execPath, [bin, ...packArgs(exportPath, configFile)]]);
    }
    return { archive: join(dir, 'fixed', `${name}.mar`), autoArchive: join(dir, 'auto', `${name}.mar`) };
  };

  const demoConfig = parse(await readFile(join(DEMO_EXAMPLES, 'model-config.yaml'), 'utf8'));
  demoConfig.runtime = { ...demoConfig.runtime, intra_op_threads: 1 };
  demoConfig.dynamic_batching = { ...demoConfig.dynamic_batching, max_latency: `${MAX_LATENCY_MS}ms` };
  const demo = await pack('orientation', demoConfig, (exportPath, configFile) =>
    demoPackArgs({ exportPath, configFile }),
  );

  await writeFile(join(dir, 'cost.onnx'), costModel());
  const costConfig = {
    max_batch_size: 16,
    dynamic_batching: { max_latency: `${MAX_LATENCY_MS}ms` },
    runtime: { graph_optimization_level: 'disabled', intra_op_threads: 1 },
  };
  const cost = await pack('cost', costConfig, (exportPath, configFile) => [
    ...['model-archive', 'pack', '--model-name', 'cost', '--serialized-file', join(dir, 'cost.onnx')],
    ...['--config-file', configFile, '--export-path', exportPath],
  ]);
  return [
    { name: 'orientation', label: 'demo orientation classifier', ...demo, maxBatchSize: 32 },
    { name: 'cost', label: 'cost model', ...cost, maxBatchSize: 16 },
  ];
}

/** A fresh `serve` child on CPU 0, from the archive that says auto, and a bench target on it that reconfigures it live. */
async function serve(model, dir) {
  const server = await serveChild({ name: model.name, archive: model.autoArchive, dir, pinned: settings.pinned });
  return {
    ...server,
    /** The adaptive line the server learnt, as the management API describes it. */
    async learnt() {
      const response = await fetch(`${server.management.url}/models/${model.name}`, {
        headers: { authorization: `Bearer ${server.management.token}` },
      });
      const [described] = await response.json();
      return described.adaptiveBatching ?? null;
    },
  };
}

/**
 * Every level once at delay 0 and at 10ms, unmeasured, before a round: a fresh server's first
 * passes at each batch size are slow (onnxruntime sizes its buffers, V8 compiles the hot path),
 * and whichever configuration met them first would pay for it.
 */
async function warmUp(server, model) {
  for (const concurrency of CONCURRENCY) {
    for (const delay of [0, 10_000]) {
      await measureLevel(server, model, delay, { kind: 'concurrency', concurrency }, UNMEASURED);
    }
  }
}

/** One load level on one configuration's server: the figures the ratios use. */
async function measureLevel(server, model, delay, level, load = settings) {
  const { points } = await runSweep(server.target, {
    batchSizes: [model.maxBatchSize],
    delays: [delay === CONTROL ? 0 : delay],
    instances: [1],
    levels: [level],
    protocol: 'v2-binary',
    clientBatch: 1,
    load: {
      warmupMs: settings.warmupMs,
      windowMs: load.windowMs,
      minWindows: load.windows,
      maxWindows: load.windows,
      stabilityPct: 0,
      requestTimeoutMs: 60_000,
      workers: 1,
      keepHistogram: true,
    },
  });
  const [point] = points;
  // What the adaptive server had learnt by the end of the level: whether its line steered.
  const learnt = delay === 'auto' ? { learnt: await server.learnt() } : {};
  return {
    delay,
    level: level.kind === 'concurrency' ? `c=${level.concurrency}` : 'rate',
    throughput: point.throughput,
    p50Ms: point.latency.p50,
    p99Ms: point.latency.p99,
    latencyHistogram: point.latencyHistogram,
    // Little's law: the requests in flight on average. Below a closed loop's concurrency, the
    // rest of its clients were refused and are waiting out Retry-After.
    inFlight: (point.throughput * point.latency.mean) / 1000,
    averageBatch: point.serverSide?.averageBatch ?? 0,
    queueMs: point.serverSide?.queueMsPerRequest ?? 0,
    computeMs: point.serverSide?.computeMsPerRequest ?? 0,
    errors: point.errorCount,
    refusedShare: point.requests > 0 ? point.errorCount / point.requests : 0,
    ...learnt,
  };
}

/**
 * The p99 of every request a configuration answered at a level in a round, all its slices
 * pooled: a slice's own p99 rests on its 4th-slowest of a few hundred, and the worst of four
 * such is nearer a p99.7.
 */
function pooledP99Ms(measured) {
  const pooled = build();
  for (const { latencyHistogram } of measured) pooled.add(decodeFromCompressedBase64(latencyHistogram));
  return Math.min(pooled.getValueAtPercentile(99), pooled.maxValue) / 1000;
}

/**
 * One level in a round: every configuration `slices` times, interleaved, the slices in the
 * round's order, then reversed, reversed again, then as at first (A B B A): on this machine
 * throughput drifts by a fifth within seconds, and within a level it mostly climbs, so a
 * configuration measured just after another gained on it (with the order turned by two places
 * each slice, as before, auto sat just ahead of delay 0 in every slice of two rounds in three,
 * and measured 0.91 of it at concurrency 1 in both). Over A B B A every configuration's slices
 * sit, on average, at the same moment, so the mean of its slices' throughput and p50 stands
 * for the level with a steady drift cancelled; batch sizes and requests in flight take the
 * median, and p99 is that of all its slices' requests pooled (pooledP99Ms). The climb is
 * steepest as a level starts, which A B B A does not cancel, so each level first runs the
 * order's first configuration once, unmeasured: in the twelfth pass, without it, the first
 * slice of the configuration measured first at a level answered 0.951 of its later slices on
 * average (30 levels × rounds), of the second 0.957, of the others 0.98–1.03.
 */
async function measureSlices(server, model, order, level) {
  await measureLevel(server, model, order[0], level, UNMEASURED);
  const slices = new Map(order.map((delay) => [delay, []]));
  for (let slice = 0; slice < settings.slices; slice++) {
    const reversed = slice % 4 === 1 || slice % 4 === 2;
    for (const delay of reversed ? [...order].reverse() : order) {
      slices.get(delay).push(await measureLevel(server, model, delay, level));
    }
  }
  return order.map((delay) => {
    const measured = slices.get(delay);
    const middle = (key) => median(measured.map((p) => p[key]));
    const mean = (key) => measured.reduce((sum, p) => sum + p[key], 0) / measured.length;
    // eslint-disable-next-line @typescript-eslint/no-unused-vars -- pooled below, not kept per slice
    const { latencyHistogram, ...last } = measured.at(-1);
    return {
      ...last,
      throughput: mean('throughput'),
      p50Ms: mean('p50Ms'),
      p99Ms: pooledP99Ms(measured),
      averageBatch: middle('averageBatch'),
      inFlight: middle('inFlight'),
      queueMs: middle('queueMs'),
      computeMs: middle('computeMs'),
      errors: measured.reduce((sum, p) => sum + p.errors, 0),
      refusedShare: middle('refusedShare'),
      slices: measured.map((p) => Math.round(p.throughput)),
    };
  });
}

/**
 * One round on one model: a fresh server, each load level on every configuration back to back,
 * so a machine that slows down over the round moves the figures a ratio compares together.
 * Auto leads the order in odd rounds and ends it in even ones.
 */
async function measureRound(model, dir, round) {
  const configs = ['auto', ...STATIC_DELAYS_US, CONTROL];
  const order = round % 2 === 1 ? configs : [...configs].reverse();
  const server = await serve(model, dir);
  try {
    await warmUp(server, model);
    const points = [];
    for (const concurrency of CONCURRENCY) {
      points.push(...(await measureSlices(server, model, order, { kind: 'concurrency', concurrency })));
    }
    const top = `c=${CONCURRENCY.at(-1)}`;
    const staticTop = points.filter((p) => typeof p.delay === 'number' && p.level === top && p.errors === 0);
    const rate = Math.round(RATE_SHARE * Math.max(...staticTop.map((p) => p.throughput)));
    points.push(...(await measureSlices(server, model, order, { kind: 'rate', rate, arrival: 'poisson' })));
    return { round, order: order.map(String), rate, points };
  } finally {
    await server.stop();
  }
}

/**
 * Per level, each round's auto throughput is divided by that of the fixed delay with the
 * highest median throughput over the *other* rounds, in the same round; the median of those is
 * the ratio. Choosing the best delay on the very figures it is then compared on would favour
 * whichever delay got lucky (where several form the same batches, the highest of five noisy
 * medians sits above their common value by about the noise, and every ratio below it), so the
 * choice and the comparison use different rounds. p50 is compared with delay 0's at
 * concurrency 1, p99 with max_latency.
 */
function summarize(model, rounds, inProcess, simulated) {
  const point = (round, level, delay) => round.points.find((p) => p.level === level && p.delay === delay);
  const levels = [...new Set(rounds[0].points.map((p) => p.level))];
  const perLevel = levels.map((level) => {
    const served = STATIC_DELAYS_US.filter((delay) => rounds.every((round) => point(round, level, delay).errors === 0));
    const bestOf = (chosenFrom) => {
      const typical = (delay) => median(chosenFrom.map((round) => point(round, level, delay).throughput));
      return served.reduce((top, delay) => (typical(delay) > typical(top) ? delay : top));
    };
    const best = bestOf(rounds);
    const others = (index) => (rounds.length > 1 ? rounds.filter((_, other) => other !== index) : rounds);
    const bestElsewhere = rounds.map((_, index) => bestOf(others(index)));
    const throughputRatios = rounds.map(
      (round, index) => point(round, level, 'auto').throughput / point(round, level, bestElsewhere[index]).throughput,
    );
    const autoP99Ms = Math.max(...rounds.map((round) => point(round, level, 'auto').p99Ms));
    const autoRefused = median(rounds.map((round) => point(round, level, 'auto').refusedShare));
    const autoInFlight = median(rounds.map((round) => point(round, level, 'auto').inFlight));
    const batch = (delay) => median(rounds.map((round) => point(round, level, delay).averageBatch));
    const controlRatios = rounds.map(
      (round) => point(round, level, CONTROL).throughput / point(round, level, 0).throughput,
    );
    return {
      level,
      bestStaticDelayUs: best,
      bestElsewhereUs: bestElsewhere,
      batches: { auto: batch('auto'), zero: batch(0), best: batch(best) },
      throughputRatio: median(throughputRatios),
      throughputRatios,
      autoP99Ms,
      autoRefused,
      autoInFlight,
      zeroP99Ms: Math.max(...rounds.map((round) => point(round, level, 0).p99Ms)),
      controlRatios,
    };
  });
  const p50Ratios = rounds.map((round) => point(round, 'c=1', 'auto').p50Ms / point(round, 'c=1', 0).p50Ms);
  const controlP50Ratios = rounds.map((round) => point(round, 'c=1', CONTROL).p50Ms / point(round, 'c=1', 0).p50Ms);
  // At the highest concurrency every configuration forms the same full batches: how far apart
  // they land is this machine's noise, the yardstick for the ratios.
  const top = rounds.flatMap((round) => round.points.filter((p) => p.level === `c=${CONCURRENCY.at(-1)}`));
  const span = (key) => [Math.min(...top.map((p) => p[key])), Math.max(...top.map((p) => p[key]))];
  return {
    name: model.name,
    label: model.label,
    maxBatchSize: model.maxBatchSize,
    inProcess,
    simulated,
    rounds,
    perLevel,
    p50Ratio: median(p50Ratios),
    p50Ratios,
    controlP50Ratios,
    aims: AIMS,
    noise: { level: `c=${CONCURRENCY.at(-1)}`, throughput: span('throughput'), computeMs: span('computeMs') },
    verdicts: [
      ...perLevel.map(({ level, throughputRatio }) => ({
        key: `throughput ${level}`,
        aim: `≥ ${AIMS.throughputRatio}`,
        met: throughputRatio >= AIMS.throughputRatio,
      })),
      { key: 'p50 c=1', aim: `≤ ${AIMS.p50Ratio}`, met: median(p50Ratios) <= AIMS.p50Ratio },
      ...perLevel.map(({ level, autoP99Ms }) => ({
        key: `p99 ${level}`,
        aim: `≤ ${MAX_LATENCY_MS} ms`,
        met: autoP99Ms <= MAX_LATENCY_MS,
      })),
    ],
  };
}

/** T(B) straight on the session, for the c and m the table quotes. */
async function inProcessFit(model) {
  const samples = await measureInProcess(model.archive, { rounds: 3, iterations: 5, warmupIterations: 2 });
  const fit = fitBatchCost(samples);
  return { c: fit.c, m: fit.m, ceiling: fit.ceiling ?? null };
}

const dir = await mkdtemp(join(tmpdir(), 'batchserve-adaptive-'));
const record = resultRecord('adaptive', flags, { settings, models: [] }, ['undici']);
try {
  // The client (this process, every thread) keeps off CPU 0, which the servers get.
  if (settings.pinned) spawnSync('taskset', ['-a', '-p', '-c', '1-1023', String(process.pid)], { stdio: 'ignore' });
  const models = await packModels(dir);
  console.log(render.header(record));
  for (const model of models) {
    const inProcess = await inProcessFit(model);
    // The policy alone on the in-process line, closed loops and the open loop (simulated-batcher.js).
    const simulated = await simulate(inProcess, model.maxBatchSize, {
      delays: STATIC_DELAYS_US,
      concurrency: CONCURRENCY,
      rateShare: RATE_SHARE,
      maxLatencyMs: MAX_LATENCY_MS,
    });
    const rounds = [];
    for (let round = 1; round <= settings.rounds; round++) {
      rounds.push(await measureRound(model, dir, round));
      console.log(render.round(rounds.at(-1), model));
    }
    const summary = summarize(model, rounds, inProcess, simulated);
    record.models.push(summary);
    console.log(render.simulated(summary));
    console.log(render.summary(summary, MAX_LATENCY_MS));
  }
  await writeResult(flags.json, record);
  exitOnMissed(
    flags,
    record.models.flatMap(({ name, verdicts }) =>
      verdicts.map(({ key, aim, met }) => ({ label: `${name} ${key} ${aim}`, met })),
    ),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
