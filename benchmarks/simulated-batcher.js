// The batching policy alone, on a simulated clock: the server's own Batcher, one instance whose
// pass takes exactly c + m·B ms, and clients with no HTTP, no other load and no noise unless
// asked for (coreModel: HTTP work, stalls and slow spells on the instance's core, drawn from a
// seed). What `max_queue_delay: auto` does with a cost line, against every fixed delay, in a
// second of CPU. adaptive.js prints it beside its real runs; adaptive-feasibility.js asks it
// whether the benchmark's aims can hold together on a noisy core; run alone it is the quick
// check while changing the policy:
//   npm run build && node benchmarks/simulated-batcher.js [c m maxBatchSize] [options below]
// (default: the cost model's line, c = 4.8 ms, m = 0.55 ms, max_batch_size 16, and the demo
// classifier's, c = 0, m = 0.8 ms, max_batch_size 32).
import { fileURLToPath } from 'node:url';
import { CONCURRENCY, MAX_LATENCY_MS, RATE_SHARE, STATIC_DELAYS_US } from './adaptive-sweep.js';

const { Batcher } = await import('../dist/src/batching/batcher.js');
const { calibrationSizes } = await import('../dist/src/repository/calibrate-cost.js');
const { OWN_CORE } = await import('../dist/src/batching/core-share.js');

/** A client's round trip outside the batcher (HTTP, decode, encode), ms. */
export const SIMULATED_ROUND_TRIP_MS = 0.5;
export const SIMULATED_SECONDS = 3;
/** The longest run the core model draws noise for, s. */
const SIMULATED_SECONDS_MAX = 60;
/** What a run measures starts after this, unless `variation.warmupMs` says otherwise. */
const MEASURE_FROM_MS = 1000;

/** Uniform in (0, 1), the same sequence every run. */
function seededRandom(seed = 12345) {
  return () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return (seed + 0.5) / 2147483648;
  };
}

/** A deterministic clock whose timers run in order of time, then of setting. */
function simulatedClock() {
  const timers = [];
  let order = 0;
  const clock = {
    now: 0,
    timers,
    api: {
      now: () => clock.now,
      setTimeout(callback, ms) {
        // A nanosecond at least: a delay that ends at `oldest + delay` exactly can compare as not
        // quite over after rounding, and a clock that did not move would ask again forever.
        const timer = { at: clock.now + Math.max(1e-6, ms), order: order++, callback, live: true };
        timers.push(timer);
        return timer;
      },
      clearTimeout(timer) {
        if (timer) timer.live = false;
      },
    },
    /** Runs timers until `endMs`; every promise a timer settles runs before the next, as on an event loop. */
    async runUntil(endMs) {
      for (;;) {
        timers.sort((a, b) => a.at - b.at || a.order - b.order);
        const timer = timers.shift();
        if (!timer || timer.at > endMs) break;
        if (!timer.live) continue;
        clock.now = timer.at;
        timer.callback();
        await new Promise((resolve) => setImmediate(resolve));
      }
    },
  };
  return clock;
}

/**
 * What the simulated server's core does besides the instance's passes (`variation.noise`), none
 * by default. A server on this machine shares its one core with the HTTP work of every request it
 * reads, answers or refuses; now and then that core stops for everybody (a collection of the
 * main thread, another process); and for seconds at a time it runs slower (the host lending the
 * vCPU's time elsewhere: capacity here swings 2× within minutes). The passes then take longer
 * than the line, by amounts the line cannot see. With `httpMs` each request costs that much of
 * the core, half to read it (a refused one pays this half only) and half to answer it, and a pass
 * is longer by the share of the core the requests of the last half second took; with
 * `stallsPerSecond`, Poisson-spaced stalls of 0.5–1.5 × `stallMs` stop passes and HTTP work
 * alike; with `slowSpells` per second, spells of 0.5–1.5 × `slowMs` run them at `slowSpeed`. The
 * draws come from `seed` (the same for every configuration).
 */
function coreModel(noise = {}, clock) {
  const httpMs = noise.httpMs ?? 0;
  const spanMs = SIMULATED_SECONDS_MAX * 1000 + 10_000;
  // The core's speed each millisecond: 1, less in slow spells, 0 in stalls.
  const speed = new Float64Array(spanMs).fill(1);
  const random = seededRandom(noise.seed);
  const spells = (perSecond, meanMs, value) => {
    if (!(perSecond > 0)) return;
    for (let at = 0; at < spanMs;) {
      at += (-Math.log(random()) * 1000) / perSecond;
      const to = Math.min(spanMs, at + meanMs * (0.5 + random()));
      for (let ms = Math.floor(at); ms < to; ms++) speed[ms] = Math.min(speed[ms], value);
    }
  };
  spells(noise.slowSpells, noise.slowMs ?? 1000, noise.slowSpeed ?? 0.6);
  spells(noise.stallsPerSecond, noise.stallMs ?? 50, 0);
  const arrivals = [];
  let first = 0;
  /** How long `workMs` of the core started now takes, ms. */
  const after = (workMs) => {
    let at = clock.now;
    let left = workMs;
    while (left > 0) {
      const ms = Math.floor(at);
      if (ms >= spanMs) return at + left - clock.now;
      const rate = speed[ms];
      const room = (ms + 1 - at) * rate;
      if (room >= left) return at + left / rate - clock.now;
      left -= room;
      at = ms + 1;
    }
    return at - clock.now;
  };
  return {
    httpMs,
    /** A request arrived: its HTTP work now counts against the passes for half a second. */
    arrived() {
      arrivals.push(clock.now);
    },
    after,
    /** How long a pass of `workMs` takes now, ms. */
    passMs(workMs) {
      while (first < arrivals.length && arrivals[first] < clock.now - 500) first++;
      const httpShare = Math.min(0.9, ((arrivals.length - first) * httpMs) / 500);
      return after(workMs * (1 + httpShare));
    },
  };
}

/**
 * A Batcher on the simulated clock with one instance costing c + m·B; with `auto`, seeded as
 * the server seeds it at load (calibrate-cost.ts: each calibration size, three times).
 */
function simulatedBatcher({ c, m }, maxBatchSize, delay, maxLatencyMs, clock, core, { coarseTimers = false } = {}) {
  const runner = {
    id: 'simulated',
    device: 'cpu',
    run: (requests) =>
      new Promise((resolve) => {
        const timings = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
        clock.api.setTimeout(
          () => resolve({ responses: requests.map(() => null), timings }),
          core.passMs(c + m * requests.length),
        );
      }),
  };
  const state = { fit: undefined };
  const batcher = new Batcher(
    [runner],
    {
      maxBatchSize,
      maxQueueDelayUs: delay === 'auto' ? 0 : delay,
      ...(delay === 'auto' ? { adaptive: { maxLatencyUs: maxLatencyMs * 1000 } } : {}),
      preferredBatchSizes: [],
      maxQueueSize: 1 << 20,
      defaultTimeoutUs: 0,
      priorityLevels: 1,
    },
    { fitChanged: (line) => (state.fit = line) },
    // Node's setTimeout waits 1 ms at least: `coarseTimers` gives the batcher that, the rest stays exact.
    coarseTimers
      ? { ...clock.api, setTimeout: (callback, ms) => clock.api.setTimeout(callback, Math.max(1, ms)) }
      : clock.api,
    // The simulated instance has a core of its own, whatever CPUs this process may use.
    OWN_CORE,
  );
  if (delay === 'auto') {
    for (let round = 0; round < 3; round++) {
      for (const rows of calibrationSizes(maxBatchSize)) batcher.seedCost(rows, c + m * rows);
    }
  }
  return { batcher, state };
}

/** A refused client comes back after this long, as the server's `Retry-After: 1` asks. */
const REFUSED_RETRY_AFTER_MS = 1000;

/** One run's bookkeeping: rows in flight, refusals, its admission cap and when measuring starts. */
function newRun(variation) {
  return {
    inFlight: 0,
    refused: 0,
    capRows: variation.capRows ?? Infinity,
    fromMs: variation.warmupMs ?? MEASURE_FROM_MS,
  };
}

/**
 * Submits one row and waits for its answer: undefined when it was refused, by `max_latency` or
 * by `capRows` (counted once measuring). `capRows` is a fixed admission cap in front of the
 * batcher, whatever its policy: a request that would find that many rows ahead with its own
 * (submitted and not answered) is refused unless it would find none, as auto's learnt caps do
 * (row-cap.ts). With a fixed delay behind it, it is the best static answer to a latency budget.
 */
async function submitOne(batcher, run, clock) {
  if (run.inFlight > 0 && run.inFlight + 1 > run.capRows) {
    if (clock.now >= run.fromMs) run.refused += 1;
    return undefined;
  }
  run.inFlight += 1;
  try {
    return await batcher.submit({}, { rows: 1, shapeKey: 'x' });
  } catch (error) {
    if (error?.code !== 'BS_ERR_LATENCY_BUDGET') throw error;
    if (clock.now >= run.fromMs) run.refused += 1;
    return undefined;
  } finally {
    run.inFlight -= 1;
  }
}

/** What a run measured after its warm-up: throughput, latency, batch sizes, refusals. */
function summary(delay, level, answers, sizes, state, run, seconds) {
  const latencies = answers.sort((a, b) => a - b);
  const quantile = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  const batches = [...sizes].reduce((sum, [size, count]) => sum + count / size, 0);
  return {
    delay,
    level,
    throughput: latencies.length / (seconds - run.fromMs / 1000),
    p50Ms: quantile(0.5),
    p99Ms: quantile(0.99),
    averageBatch: latencies.length / batches,
    batchSizes: [...sizes.keys()].sort((a, b) => a - b),
    refused: run.refused,
    ...(state.fit ? { fitTrusted: state.fit.trusted, fitReason: state.fit.reason ?? null } : {}),
  };
}

/**
 * `concurrency` clients that each send again a round trip after their answer; with `jitterMs`,
 * each round trip is longer by up to that much (the same draws for every configuration).
 */
export async function simulateClosedLoop(line, maxBatchSize, delay, concurrency, maxLatencyMs, variation = {}) {
  const clock = simulatedClock();
  const core = coreModel(variation.noise, clock);
  const { batcher, state } = simulatedBatcher(line, maxBatchSize, delay, maxLatencyMs, clock, core, variation);
  const random = seededRandom(variation.noise?.seed);
  const jitter = () => (variation.jitterMs ?? 0) * random();
  // Each half of the round trip, on the core model's HTTP work when it has some.
  const halfMs = core.httpMs > 0 ? core.httpMs / 2 : SIMULATED_ROUND_TRIP_MS / 2;
  const seconds = variation.seconds ?? SIMULATED_SECONDS;
  const sizes = new Map();
  const answers = [];
  const run = newRun(variation);
  const send = (afterMs = 0) =>
    clock.api.setTimeout(() => {
      const sent = clock.now;
      core.arrived();
      clock.api.setTimeout(async () => {
        const answer = await submitOne(batcher, run, clock);
        clock.api.setTimeout(() => {
          if (answer === undefined) return send(REFUSED_RETRY_AFTER_MS);
          if (clock.now >= run.fromMs) {
            answers.push(clock.now - sent);
            sizes.set(answer.batchRows, (sizes.get(answer.batchRows) ?? 0) + 1);
          }
          send();
        }, core.after(halfMs));
      }, core.after(halfMs));
    }, afterMs + jitter());
  for (let client = 0; client < concurrency; client++) send();
  await clock.runUntil(seconds * 1000);
  return summary(delay, `c=${concurrency}`, answers, sizes, state, run, seconds);
}

/** Poisson arrivals at `ratePerSecond`, from a fixed seed so every configuration sees the same ones. */
export async function simulateOpenLoop(line, maxBatchSize, delay, ratePerSecond, maxLatencyMs, variation = {}) {
  const clock = simulatedClock();
  const core = coreModel(variation.noise, clock);
  const { batcher, state } = simulatedBatcher(line, maxBatchSize, delay, maxLatencyMs, clock, core, variation);
  const random = seededRandom(variation.noise?.seed);
  const halfMs = core.httpMs / 2;
  const seconds = variation.seconds ?? SIMULATED_SECONDS;
  const sizes = new Map();
  const answers = [];
  const run = newRun(variation);
  let at = 0;
  while (at < seconds * 1000) {
    at += (-Math.log(random()) * 1000) / ratePerSecond;
    const sent = at;
    clock.api.setTimeout(() => {
      core.arrived();
      clock.api.setTimeout(async () => {
        const answer = await submitOne(batcher, run, clock);
        if (answer === undefined) return;
        clock.api.setTimeout(() => {
          if (sent < run.fromMs) return;
          answers.push(clock.now - sent);
          sizes.set(answer.batchRows, (sizes.get(answer.batchRows) ?? 0) + 1);
        }, core.after(halfMs));
      }, core.after(halfMs));
    }, at);
  }
  await clock.runUntil(seconds * 1000 + 10_000);
  return summary(delay, 'rate', answers, sizes, state, run, seconds);
}

/**
 * Every configuration at each closed-loop level, then Poisson arrivals at `rateShare` of the
 * best fixed delay's throughput at the highest concurrency (as adaptive.js chooses its rate).
 */
export async function simulate(line, maxBatchSize, { delays, concurrency, rateShare, maxLatencyMs, variation = {} }) {
  const points = [];
  for (const clients of concurrency) {
    for (const delay of [...delays, 'auto']) {
      points.push(await simulateClosedLoop(line, maxBatchSize, delay, clients, maxLatencyMs, variation));
    }
  }
  const top = `c=${concurrency.at(-1)}`;
  const rate = Math.round(
    rateShare * Math.max(...points.filter((p) => p.delay !== 'auto' && p.level === top).map((p) => p.throughput)),
  );
  for (const delay of [...delays, 'auto']) {
    points.push(await simulateOpenLoop(line, maxBatchSize, delay, rate, maxLatencyMs, variation));
  }
  return { roundTripMs: SIMULATED_ROUND_TRIP_MS, seconds: SIMULATED_SECONDS, rate, points };
}

/** Auto's throughput over the best fixed delay's, per level. */
export function simulatedRatios(points) {
  const levels = [...new Set(points.map((p) => p.level))];
  return levels.map((level) => {
    const here = points.filter((p) => p.level === level);
    const auto = here.find((p) => p.delay === 'auto');
    const best = Math.max(...here.filter((p) => p.delay !== 'auto').map((p) => p.throughput));
    return { level, ratio: auto.throughput / best, auto };
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // --jitter MS: round trips vary by up to MS; --coarse: the batcher's timers wait 1 ms at least, as
  // Node's do; --http MS, --stalls N --stall-ms MS, --slow N --slow-ms MS --slow-speed S: a core
  // shared with HTTP work, with stalls and slow spells (coreModel); --seconds S: how long each
  // point runs (60 at most).
  const args = process.argv.slice(2);
  const option = (name) => {
    const at = args.indexOf(name);
    return at >= 0 ? Number(args.splice(at, 2)[1]) : undefined;
  };
  const variation = {
    jitterMs: option('--jitter') ?? 0,
    noise: {
      httpMs: option('--http') ?? 0,
      stallsPerSecond: option('--stalls') ?? 0,
      stallMs: option('--stall-ms') ?? 50,
      slowSpells: option('--slow') ?? 0,
      slowMs: option('--slow-ms') ?? 1000,
      slowSpeed: option('--slow-speed') ?? 0.6,
      seed: option('--seed'),
    },
    seconds: option('--seconds') ?? SIMULATED_SECONDS,
    coarseTimers: args.includes('--coarse') && args.splice(args.indexOf('--coarse'), 1).length > 0,
  };
  const [c, m, max] = args.map(Number);
  const lines =
    c === undefined || Number.isNaN(c)
      ? [
          { label: 'cost model', c: 4.8, m: 0.55, maxBatchSize: 16 },
          { label: 'demo classifier', c: 0, m: 0.8, maxBatchSize: 32 },
        ]
      : [{ label: 'given line', c, m, maxBatchSize: max || 16 }];
  const options = {
    delays: STATIC_DELAYS_US,
    concurrency: CONCURRENCY,
    rateShare: RATE_SHARE,
    maxLatencyMs: MAX_LATENCY_MS,
    variation,
  };
  for (const { label, c: fixed, m: perRow, maxBatchSize } of lines) {
    const { points, rate } = await simulate({ c: fixed, m: perRow }, maxBatchSize, options);
    console.log(`${label}: T(B) = ${fixed} + ${perRow}·B ms, max_batch_size ${maxBatchSize}, open loop ${rate}/s`);
    for (const { level, ratio, auto } of simulatedRatios(points)) {
      const row = points.filter((p) => p.level === level).map((p) => `${p.throughput.toFixed(0).padStart(6)}`);
      console.log(
        `  ${level.padEnd(5)} ${row.join('')}  auto÷best ${ratio.toFixed(3)}  auto p99 ${auto.p99Ms.toFixed(1)} ms, batch ${auto.averageBatch.toFixed(1)}${auto.fitTrusted === false ? ` (not trusted: ${auto.fitReason})` : ''}`,
      );
    }
  }
}
