import type { ModelStatsJson } from '../metrics/model-statistics.js';
import type { LoadOptions } from './load-generator.js';
import { runLoad } from './load-generator.js';
import { GpuWatch, type GpuWatchOptions } from './gpu-use.js';
import { filePayloadPool, randomPayloadPool } from './input-pool.js';
import type { RequestPayload } from './payload.js';
import { SERVED_SHARE, sustains } from './plan.js';
import { roundRate, searchSustainedRate, highestSustained, type RateProbe } from './rate-search.js';
import type {
  Arrival,
  LoadLevel,
  PointResult,
  Protocol,
  RateSearchResult,
  ServerPoint,
  ServerSideFigures,
} from './report-types.js';
import { samplesFromStats } from './fit.js';
import { servedStats } from './served-version.js';
import { windowVariation } from './stability.js';
import type { BenchTarget } from './targets.js';

export interface SweepOptions {
  /** Each undefined axis keeps the server's current value. */
  readonly batchSizes?: readonly number[];
  /** max_queue_delay values: µs, or `auto` (adaptive batching). */
  readonly delays?: readonly (number | 'auto')[];
  readonly instances?: readonly number[];
  readonly levels: readonly LoadLevel[];
  readonly load: Omit<LoadOptions, 'level' | 'onWindow' | 'onMeasureStart'>;
  readonly protocol: Protocol;
  readonly clientBatch: number;
  readonly inputFile?: string;
  /** `--input-pool`: distinct requests sent in rotation (input-pool.ts); 1 sends one payload. */
  readonly inputPool?: number;
  /**
   * How to sample the GPUs during each point when the target is local (gpu-use.ts); false
   * turns it off. Default: `nvidia-smi` on PATH every second.
   */
  readonly gpu?: GpuWatchOptions | false;
  /** `--plan`: after its levels, search each configuration for the highest rate it sustains. */
  readonly plan?: PlanSearch;
  readonly onProgress?: (progress: SweepProgress) => void;
}

export interface PlanSearch {
  /** Where a configuration's search starts when none of its levels brackets the answer. */
  readonly targetRate: number;
  readonly sloP99Ms: number;
  readonly arrival: Arrival;
  readonly maxProbes: number;
  readonly resolution: number;
}

export interface SweepProgress {
  readonly server: ServerPoint;
  readonly level: LoadLevel;
  readonly pointIndex: number;
  readonly pointCount: number;
  /** Set while `--plan` searches rates: the probe's number, 1-based, and the most there may be. */
  readonly probe?: { readonly index: number; readonly max: number };
  readonly throughput?: number;
  readonly p99Ms?: number;
}

export interface BatchTimeSample {
  readonly batchSize: number;
  readonly ms: number;
  readonly count: number;
}

export interface SweepResult {
  /** The levels of every configuration, then (with `plan`) its search probes. */
  readonly points: PointResult[];
  /**
   * Forward-pass time per batch size from the server's statistics: the lowest per-point mean,
   * over points that ran that batch size at least MIN_EXECUTIONS times. Under heavy load the
   * server's own HTTP work competes with the forward pass for cores; the least contended
   * point is the best estimate of what a batch costs.
   */
  readonly samples: BatchTimeSample[];
  /** With `plan`: each configuration's rate search. */
  readonly searches: RateSearchResult[];
}

const MIN_EXECUTIONS = 10;

/**
 * Runs every load level at every server point of the cross product batch sizes × delays ×
 * instances, reading the server's statistics before and after each run so that each point
 * carries what the server itself formed (average batch, queue and compute time).
 */
export async function runSweep(target: BenchTarget, options: SweepOptions): Promise<SweepResult> {
  const current = await target.current();
  const serverPoints: ServerPoint[] = [];
  for (const instances of options.instances ?? [current.instances]) {
    for (const maxBatchSize of options.batchSizes ?? [current.maxBatchSize]) {
      for (const maxQueueDelayUs of options.delays ?? [current.maxQueueDelayUs]) {
        serverPoints.push({ maxBatchSize, maxQueueDelayUs, instances });
      }
    }
  }
  const pointCount = serverPoints.length * options.levels.length;
  const points: PointResult[] = [];
  const searches: RateSearchResult[] = [];
  const fastest = new Map<number, BatchTimeSample>();
  let gpuWatch: Promise<GpuWatch | undefined> | undefined;
  for (const server of serverPoints) {
    await target.apply(server);
    // Once the target is up: an archive's server, and so its URL, exists from its first apply.
    gpuWatch ??= options.gpu === false ? Promise.resolve(undefined) : GpuWatch.open(target.inferenceUrl, options.gpu);
    const gpu = await gpuWatch;
    const payload = await buildPayload(target, options);
    const measure = async (level: LoadLevel, probe?: SweepProgress['probe']): Promise<PointResult> => {
      const progress = { server, level, pointIndex: points.length, pointCount, ...(probe ? { probe } : {}) };
      const { point, samples } = await measurePoint(target, payload, server, level, options, progress, gpu);
      for (const sample of samples) {
        const best = fastest.get(sample.batchSize);
        if (sample.count >= MIN_EXECUTIONS && (!best || sample.ms < best.ms)) fastest.set(sample.batchSize, sample);
      }
      points.push(point);
      return point;
    };
    const measured: PointResult[] = [];
    for (const level of options.levels) measured.push(await measure(level));
    if (options.plan) searches.push(await searchRates(server, measured, options.plan, measure));
  }
  return { points, samples: [...fastest.values()].sort((a, b) => a.batchSize - b.batchSize), searches };
}

/**
 * One configuration's rate search. It starts at the best closed-loop throughput the
 * configuration reached (about its capacity), else at the target rate; its own open-loop
 * levels count as probes already made.
 */
async function searchRates(
  server: ServerPoint,
  measured: readonly PointResult[],
  plan: PlanSearch,
  measure: (level: LoadLevel, probe: SweepProgress['probe']) => Promise<PointResult>,
): Promise<RateSearchResult> {
  const asProbe = (point: PointResult): RateProbe => ({
    rate: point.load.kind === 'rate' ? point.load.rate : 0,
    sustained: sustains(point, plan.sloP99Ms),
    throughput: point.throughput,
  });
  const known = measured.filter((point) => point.load.kind === 'rate').map(asProbe);
  const closedLoop = measured.filter((point) => point.load.kind === 'concurrency' && point.errorCount === 0);
  const startRate =
    closedLoop.length > 0 ? roundRate(Math.max(...closedLoop.map((point) => point.throughput))) : plan.targetRate;
  let index = 0;
  const probes = await searchSustainedRate(
    async (rate) => {
      index += 1;
      const level: LoadLevel = { kind: 'rate', rate, arrival: plan.arrival };
      return asProbe(await measure(level, { index, max: plan.maxProbes }));
    },
    { startRate, known, maxProbes: plan.maxProbes, resolution: plan.resolution, servedShare: SERVED_SHARE },
  );
  return {
    server,
    sustainedRate: highestSustained([...known, ...probes])?.rate ?? null,
    probes: probes.map(({ rate, sustained }) => ({ rate, sustained })),
  };
}

async function measurePoint(
  target: BenchTarget,
  payload: RequestPayload,
  server: ServerPoint,
  level: LoadLevel,
  options: SweepOptions,
  progress: SweepProgress,
  gpu: GpuWatch | undefined,
): Promise<{ point: PointResult; samples: BatchTimeSample[] }> {
  options.onProgress?.(progress);
  // Read after the warm-up, so the server-side figures exclude it like the client's do.
  let before = await target.stats();
  const result = await runLoad(target.inferenceUrl, payload, {
    ...options.load,
    level,
    onMeasureStart: async () => {
      before = await target.stats();
      gpu?.start();
    },
    onWindow: ({ throughput, p99Ms }) => {
      options.onProgress?.({ ...progress, throughput, p99Ms });
    },
  }).finally(() => gpu?.stop());
  const gpus = gpu?.finish();
  const served = servedStats(before, await target.stats(), result.versions);
  const point: PointResult = {
    server,
    load: level,
    clientBatch: options.clientBatch,
    durationSeconds: result.durationSeconds,
    requests: result.requests,
    throughput: result.throughput,
    itemsPerSecond: result.itemsPerSecond,
    latency: result.latency,
    errors: result.errors,
    errorCount: result.errorCount,
    stable: result.stable,
    windows: result.windows,
    // The windows the stability rule compared, to say by how much they disagreed.
    variation: windowVariation(result.fullWindows, options.load.minWindows, options.load.stabilityPct),
    serverSide: {
      ...serverSideFigures(served.before, served.after, result.durationSeconds * server.instances),
      version: served.version,
    },
    versions: result.versions,
    ...(gpus && gpus.length > 0 ? { gpus } : {}),
    ...(result.latencyHistogram ? { latencyHistogram: result.latencyHistogram } : {}),
  };
  return { point, samples: samplesFromStats(served.before, served.after) };
}

async function buildPayload(target: BenchTarget, options: SweepOptions): Promise<RequestPayload> {
  const metadata = await target.metadata();
  const pool = options.inputPool ?? 1;
  return options.inputFile
    ? filePayloadPool(options.inputFile, metadata, options.protocol, pool)
    : randomPayloadPool(metadata, { protocol: options.protocol, clientBatch: options.clientBatch, seed: 1 }, pool);
}

/**
 * What the server's statistics changed by while one point ran. `instanceSeconds`: the point's
 * duration times the instances serving it, what the busy share is a share of.
 */
export function serverSideFigures(
  before: ModelStatsJson,
  after: ModelStatsJson,
  instanceSeconds?: number,
): ServerSideFigures {
  const delta = (pick: (stats: ModelStatsJson) => number): number => pick(after) - pick(before);
  const requests = delta((s) => s.inference_stats.success.count);
  const executions = delta((s) => s.execution_count);
  const inferences = delta((s) => s.inference_count);
  const computeNs = delta(
    (s) =>
      s.inference_stats.compute_input.ns + s.inference_stats.compute_infer.ns + s.inference_stats.compute_output.ns,
  );
  const cacheHits = delta((s) => s.inference_stats.cache_hit.count);
  const cacheLookups = cacheHits + delta((s) => s.inference_stats.cache_miss.count);
  return {
    requests,
    inferences,
    executions,
    averageBatch: executions > 0 ? inferences / executions : 0,
    queueMsPerRequest: requests > 0 ? delta((s) => s.inference_stats.queue.ns) / requests / 1e6 : 0,
    computeMsPerRequest: requests > 0 ? computeNs / requests / 1e6 : 0,
    ...(cacheLookups > 0 ? { cacheHitRatio: cacheHits / cacheLookups } : {}),
    ...(instanceSeconds !== undefined && instanceSeconds > 0
      ? { busyShare: (batchComputeNs(after) - batchComputeNs(before)) / 1e9 / instanceSeconds }
      : {}),
  };
}

/** The instances' compute time over every forward pass: each batch counted once (batch_stats). */
function batchComputeNs(stats: ModelStatsJson): number {
  let ns = 0;
  for (const batch of stats.batch_stats)
    ns += batch.compute_input.ns + batch.compute_infer.ns + batch.compute_output.ns;
  return ns;
}
