import { performance } from 'node:perf_hooks';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { decodeFromCompressedBase64, encodeIntoCompressedBase64, type Histogram } from 'hdr-histogram-js';
import type { ClientTls } from '../core/client-tls.js';
import { UsageError } from '../core/errors.js';
import { isGrpcProtocol, isGrpcUrl } from './grpc-channel.js';
import { LoadEngine, newHistogram, type EngineSettings, type WindowSample } from './load-engine.js';
import type { RequestPayload } from './payload.js';
import type { LatencySummary, LoadLevel } from './report-types.js';
import { isStable, type WindowFigures } from './stability.js';

/**
 * The bench's client: drives one load level against a server and measures it, over HTTP
 * (undici) or gRPC (framed on node:http2), as the payload's protocol says.
 *
 * - Closed loop (concurrency N): N request slots, one request in flight on each (HTTP: each
 *   on a connection of its own; gRPC: calls multiplexed on one HTTP/2 connection;
 *   grpc-stream: a ModelStreamInfer stream each); a completion sends the next at once.
 * - Open loop (rate R): requests are scheduled every 1/R s (constant) or at exponential
 *   intervals (poisson) and sent at their scheduled time whatever is still in flight. Latency
 *   runs from the scheduled time, so a stalled server cannot hide its queue (coordinated
 *   omission): a request that waits for a connection is late, and counted late.
 * - Only successes (2xx responses read to the end; gRPC answers with status OK and, on a
 *   stream, no error_message) go into the latency histogram; every other outcome is counted
 *   by kind (HTTP status, gRPC status name, "error_message", "connection", "timeout",
 *   "other") and has no latency. `throughput` and `rows` count successful requests;
 *   `requests` counts every completion. Successes are also counted by the model version
 *   their answers named, so the bench reads the statistics of the version that served.
 * - After the warm-up, each window gets its own histogram; the run stops when the last
 *   `minWindows` windows agree (see stability.ts `isStable`), at `maxWindows`, or after `maxRequests`.
 *
 * The hot loop allocates little per request: one reused slot per request in flight (for HTTP
 * undici's dispatch API, no promises), the same options, headers and body Buffer each time
 * (for gRPC the request serialized and framed once, see grpc-http2.ts).
 */

export interface LoadOptions {
  readonly level: LoadLevel;
  /** Sent but not measured: connections open, the server warms up. */
  /** Called once the warm-up ends, before measuring: e.g. to read the server's statistics. */
  readonly onMeasureStart?: () => Promise<void>;
  readonly warmupMs: number;
  readonly windowMs: number;
  readonly minWindows: number;
  /** Stop here even when the windows never agree. */
  readonly maxWindows: number;
  /** The last `minWindows` windows' throughput and p99 must each lie within ±pct of their mean. */
  readonly stabilityPct: number;
  /** Stop once this many requests have been measured. */
  readonly maxRequests?: number;
  /** From the (scheduled) send to the end of the body; counted as "timeout". */
  readonly requestTimeoutMs: number;
  /** Worker threads to spread the client over (the load is split evenly); 1 = this thread. */
  readonly workers?: number;
  /** What https:// and grpcs:// connections trust and present (`--tls-ca`, `--tls-cert`, `--tls-key`). */
  readonly tls?: ClientTls;
  readonly onWindow?: (progress: WindowProgress) => void;
  /** Also return the measured latencies' histogram (`LoadResult.latencyHistogram`), to pool with others. */
  readonly keepHistogram?: boolean;
}

export interface WindowProgress extends WindowFigures {
  readonly windows: number;
}

export interface LoadResult {
  readonly durationSeconds: number;
  /** Completed requests, any outcome, in the measured windows. */
  readonly requests: number;
  /** Rows carried by the successful requests. */
  readonly rows: number;
  /** Successful requests only, in ms. */
  readonly latency: LatencySummary;
  readonly errors: Record<string, number>;
  readonly errorCount: number;
  /**
   * Successful requests by the model version their answers named (X-Model-Version, gRPC's
   * x-model-version or a stream answer's model_version); undefined when none named one.
   */
  readonly versions?: Record<string, number>;
  readonly stable: boolean;
  readonly windows: number;
  /** The windows `stable` was judged on, in order: every one but a last one cut short. */
  readonly fullWindows: readonly WindowFigures[];
  /** With `keepHistogram`: the successful requests' latencies, µs, as HdrHistogram's compressed base64. */
  readonly latencyHistogram?: string;
  /** Successful requests per second. */
  readonly throughput: number;
  readonly itemsPerSecond: number;
}

/** Open-loop connections in all: enough that the client never limits the rate it offers. */
const OPEN_LOOP_CONNECTIONS = 256;
const WORKER_KIND = 'batchserve-load-worker';

export async function runLoad(baseUrl: string, payload: RequestPayload, options: LoadOptions): Promise<LoadResult> {
  checkOptions(options);
  if (isGrpcProtocol(payload.protocol) !== isGrpcUrl(baseUrl)) {
    throw new UsageError(
      `the ${payload.protocol} protocol needs ${isGrpcProtocol(payload.protocol) ? 'a grpc://host:port' : 'an http://'} URL, got ${baseUrl}`,
    );
  }
  const shares = splitLevel(options.level, options.workers ?? 1);
  const budgets = splitCount(options.maxRequests ?? Infinity, shares.length);
  const settings = shares.map((share, index): EngineSettings => ({
    url: baseUrl,
    protocol: payload.protocol,
    path: payload.path,
    headers: payload.headers,
    bodies: payload.bodies ?? [payload.body],
    level: share.level,
    phaseMs: share.phaseMs,
    connections: Math.ceil(OPEN_LOOP_CONNECTIONS / shares.length),
    requestTimeoutMs: options.requestTimeoutMs,
    budget: budgets[index] as number,
    ...(options.tls ? { tls: options.tls } : {}),
  }));
  const engines: EngineHandle[] =
    settings.length === 1 ? [new LocalEngine(settings[0] as EngineSettings)] : await spawnWorkers(settings);
  try {
    return await measure(engines, payload.rows, options);
  } finally {
    await Promise.all(engines.map((engine) => engine.stop()));
  }
}

async function measure(engines: EngineHandle[], rowsPerRequest: number, options: LoadOptions): Promise<LoadResult> {
  engines.forEach((engine) => engine.start());
  const finished = Number.isFinite(options.maxRequests ?? Infinity)
    ? Promise.all(engines.map((engine) => engine.finished)).then(() => true)
    : new Promise<boolean>(() => undefined);
  await sleep(options.warmupMs);
  await options.onMeasureStart?.();
  await Promise.all(engines.map((engine) => engine.snapshot()));

  const total = newHistogram();
  const errors: Record<string, number> = {};
  const versions: Record<string, number> = {};
  const fullWindows: WindowFigures[] = [];
  let windows = 0;
  let successes = 0;
  let errorCount = 0;
  const start = performance.now();
  let windowStart = start;
  for (;;) {
    const ended = await Promise.race([sleep(options.windowMs).then(() => false), finished]);
    const samples = await Promise.all(engines.map((engine) => engine.snapshot()));
    const now = performance.now();
    const seconds = (now - windowStart) / 1000;
    windowStart = now;
    const histogram = newHistogram();
    let windowSuccesses = 0;
    let windowErrors = 0;
    for (const sample of samples) {
      histogram.add(sample.histogram);
      windowSuccesses += sample.successes;
      for (const [kind, count] of Object.entries(sample.errors)) {
        errors[kind] = (errors[kind] ?? 0) + count;
        windowErrors += count;
      }
      for (const [version, count] of Object.entries(sample.versions))
        versions[version] = (versions[version] ?? 0) + count;
    }
    total.add(histogram);
    successes += windowSuccesses;
    errorCount += windowErrors;
    windows += 1;
    const figures = {
      throughput: windowSuccesses / seconds,
      p99Ms: histogram.getValueAtPercentile(99) / 1000,
      completedPerSecond: (windowSuccesses + windowErrors) / seconds,
    };
    // A last window cut short by maxRequests is measured but not compared.
    if (!ended || seconds >= (0.9 * options.windowMs) / 1000) fullWindows.push(figures);
    options.onWindow?.({ windows, ...figures });
    if (ended || windows >= options.maxWindows) break;
    if (isStable(fullWindows, options.minWindows, options.stabilityPct)) break;
  }
  const durationSeconds = (windowStart - start) / 1000;
  return {
    durationSeconds,
    requests: successes + errorCount,
    rows: successes * rowsPerRequest,
    latency: summarize(total),
    errors,
    errorCount,
    ...(Object.keys(versions).length > 0 ? { versions } : {}),
    stable: isStable(fullWindows, options.minWindows, options.stabilityPct),
    windows,
    fullWindows,
    throughput: successes / durationSeconds,
    itemsPerSecond: (successes * rowsPerRequest) / durationSeconds,
    ...(options.keepHistogram ? { latencyHistogram: encodeIntoCompressedBase64(total) } : {}),
  };
}

/** All the workers, or none: the ones that started are stopped when another fails to. */
async function spawnWorkers(settings: readonly EngineSettings[]): Promise<EngineHandle[]> {
  const spawned = await Promise.allSettled(settings.map((each) => WorkerEngine.spawn(each)));
  const engines = spawned.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  const failure = spawned.find((outcome) => outcome.status === 'rejected');
  if (failure === undefined) return engines;
  await Promise.all(engines.map((engine) => engine.stop()));
  throw failure.reason;
}

function checkOptions(options: LoadOptions): void {
  const problems: string[] = [];
  const { level } = options;
  if (level.kind === 'concurrency' && !(Number.isSafeInteger(level.concurrency) && level.concurrency >= 1)) {
    problems.push(`concurrency must be a positive integer, got ${level.concurrency}`);
  }
  if (level.kind === 'rate' && !(Number.isFinite(level.rate) && level.rate > 0)) {
    problems.push(`rate must be a positive number, got ${level.rate}`);
  }
  const positive = { windowMs: options.windowMs, requestTimeoutMs: options.requestTimeoutMs } as const;
  for (const [name, value] of Object.entries(positive)) {
    if (!(Number.isFinite(value) && value > 0)) problems.push(`${name} must be positive, got ${value}`);
  }
  if (!(Number.isFinite(options.warmupMs) && options.warmupMs >= 0)) {
    problems.push(`warmupMs must be 0 or more, got ${options.warmupMs}`);
  }
  if (!(Number.isSafeInteger(options.minWindows) && options.minWindows >= 1)) {
    problems.push(`minWindows must be a positive integer, got ${options.minWindows}`);
  }
  if (!(Number.isSafeInteger(options.maxWindows) && options.maxWindows >= options.minWindows)) {
    problems.push(`maxWindows must be an integer of at least minWindows, got ${options.maxWindows}`);
  }
  if (options.maxRequests !== undefined && !(Number.isSafeInteger(options.maxRequests) && options.maxRequests >= 1)) {
    problems.push(`maxRequests must be a positive integer, got ${options.maxRequests}`);
  }
  if (options.workers !== undefined && !(Number.isSafeInteger(options.workers) && options.workers >= 1)) {
    problems.push(`workers must be a positive integer, got ${options.workers}`);
  }
  if (problems.length > 0) throw new UsageError(`load options: ${problems.join('; ')}`);
}

/** Each worker's part of the load; constant arrivals are interleaved by a phase offset. */
function splitLevel(level: LoadLevel, workers: number): { level: LoadLevel; phaseMs: number }[] {
  if (level.kind === 'concurrency') {
    return splitCount(level.concurrency, Math.min(workers, level.concurrency)).map((concurrency) => ({
      level: { kind: 'concurrency', concurrency },
      phaseMs: 0,
    }));
  }
  return Array.from({ length: workers }, (_, index) => ({
    level: { ...level, rate: level.rate / workers },
    phaseMs: level.arrival === 'constant' ? (index * 1000) / level.rate : 0,
  }));
}

function splitCount(count: number, parts: number): number[] {
  if (!Number.isFinite(count)) return Array.from({ length: parts }, () => Infinity);
  return Array.from({ length: parts }, (_, index) => Math.floor(count / parts) + (index < count % parts ? 1 : 0));
}

function summarize(histogram: Histogram): LatencySummary {
  if (histogram.totalCount === 0) return { count: 0, mean: 0, p50: 0, p90: 0, p99: 0, p999: 0, max: 0 };
  // A percentile is the top of its bucket (within 0.1%), so it may pass the exact max: clamp.
  const max = histogram.maxValue;
  const at = (percentile: number): number => Math.min(histogram.getValueAtPercentile(percentile), max) / 1000;
  return {
    count: histogram.totalCount,
    mean: histogram.mean / 1000,
    p50: at(50),
    p90: at(90),
    p99: at(99),
    p999: at(99.9),
    max: max / 1000,
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** One thread's engine as the measuring loop sees it, wherever it runs. */
interface EngineHandle {
  start(): void;
  /** What completed since the last snapshot; the first one ends the warm-up. */
  snapshot(): Promise<WindowSample>;
  /** Resolves once the budget is spent and nothing is in flight. */
  readonly finished: Promise<void>;
  stop(): Promise<void>;
}

class LocalEngine implements EngineHandle {
  readonly #engine: LoadEngine;
  readonly finished: Promise<void>;

  constructor(settings: EngineSettings) {
    this.#engine = new LoadEngine(settings);
    this.finished = this.#engine.finished;
  }

  start(): void {
    this.#engine.start();
  }

  async snapshot(): Promise<WindowSample> {
    return this.#engine.snapshot();
  }

  stop(): Promise<void> {
    return this.#engine.stop();
  }
}

// --- worker threads --------------------------------------------------------------------------

type ToWorker = { type: 'start' } | { type: 'snapshot' } | { type: 'stop' };
type FromWorker =
  | { type: 'ready' }
  | {
      type: 'sample';
      histogram: string;
      successes: number;
      errors: Record<string, number>;
      versions: Record<string, number>;
    }
  | { type: 'finished' }
  | { type: 'stopped' };

/** An engine in a worker thread: histograms cross as HdrHistogram's compressed encoding. */
class WorkerEngine implements EngineHandle {
  readonly #waiting: { resolve: (message: FromWorker) => void; reject: (error: Error) => void }[] = [];
  #failure: Error | undefined;
  #markFinished: () => void = () => undefined;
  readonly finished = new Promise<void>((resolve) => {
    this.#markFinished = resolve;
  });

  readonly #worker: Worker;

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (message: FromWorker) => {
      if (message.type === 'finished') this.#markFinished();
      else this.#waiting.shift()?.resolve(message);
    });
    const fail = (error: Error): void => {
      this.#failure = error;
      for (const waiter of this.#waiting.splice(0)) waiter.reject(error);
    };
    worker.on('error', fail);
    worker.on('exit', (code) => fail(new Error(`a load worker exited (code ${code})`)));
  }

  static async spawn(settings: EngineSettings): Promise<WorkerEngine> {
    // A copy: a pooled Buffer's whole backing store would be cloned otherwise.
    const bodies = settings.bodies.map((body) => new Uint8Array(body));
    const worker = new Worker(new URL(import.meta.url), {
      workerData: { kind: WORKER_KIND, settings: { ...settings, bodies } },
    });
    const engine = new WorkerEngine(worker);
    await engine.#reply();
    return engine;
  }

  start(): void {
    this.#worker.postMessage({ type: 'start' } satisfies ToWorker);
  }

  async snapshot(): Promise<WindowSample> {
    const answer = this.#reply();
    this.#worker.postMessage({ type: 'snapshot' } satisfies ToWorker);
    const message = await answer;
    if (message.type !== 'sample') throw new Error(`a load worker answered ${message.type} to a snapshot`);
    return {
      histogram: decodeFromCompressedBase64(message.histogram),
      successes: message.successes,
      errors: message.errors,
      versions: message.versions,
    };
  }

  async stop(): Promise<void> {
    if (this.#failure === undefined) {
      const answer = this.#reply();
      this.#worker.postMessage({ type: 'stop' } satisfies ToWorker);
      await answer.catch(() => undefined);
    }
    await this.#worker.terminate();
  }

  #reply(): Promise<FromWorker> {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => this.#waiting.push({ resolve, reject }));
  }
}

function serveAsWorker(settings: EngineSettings): void {
  const port = parentPort;
  if (!port) return;
  const engine = new LoadEngine(settings);
  const send = (message: FromWorker): void => port.postMessage(message);
  void engine.finished.then(() => send({ type: 'finished' }));
  port.on('message', (message: ToWorker) => {
    if (message.type === 'start') engine.start();
    else if (message.type === 'snapshot') {
      const sample = engine.snapshot();
      send({
        type: 'sample',
        histogram: encodeIntoCompressedBase64(sample.histogram),
        successes: sample.successes,
        errors: sample.errors,
        versions: sample.versions,
      });
    } else {
      void engine.stop().finally(() => {
        send({ type: 'stopped' });
        port.close();
      });
    }
  });
  send({ type: 'ready' });
}

const init = workerData as { kind?: unknown; settings?: EngineSettings } | null;
if (!isMainThread && init?.kind === WORKER_KIND && init.settings) serveAsWorker(init.settings);
