import { formatDelay } from './delay.js';
/**
 * The batching model behind the bench's explanations: a forward pass over B rows costs
 * T(B) = c + m·B (a fixed cost c per pass plus m per row), so batching B rows into one pass
 * speeds serving up by S(B) = B(c+m)/(c+B·m), which approaches 1 + c/m and never passes it.
 */
import type { ModelStatsJson } from '../metrics/model-statistics.js';
import type {
  BatchCostFit,
  BenchReport,
  FitFailure,
  PointResult,
  Recommendation,
  ServerPoint,
  SpeedupFit,
  SpeedupRow,
} from './report-types.js';

export type BatchCostSample = BatchCostFit['samples'][number];

/** Below this R² the straight line explains the timings too poorly to lean on. */
const POOR_FIT_R2 = 0.9;

/**
 * Least squares of ms = c + m·B, one point per distinct batch size, unweighted. Weighting by
 * `count` would let the batch size the load happened to form most often (usually the largest)
 * pin the line alone; each sample is already the mean of `count` passes, so every size gets an
 * equal say. Samples of the same size are merged first (count-weighted mean).
 *
 * Undefined when fewer than two distinct batch sizes ran: a line needs two points. With
 * exactly two the line passes through both and R² is 1 whatever the timings were.
 */
export function fitBatchCost(samples: readonly BatchCostSample[]): BatchCostFit | undefined {
  const merged = mergeByBatchSize(samples);
  if (merged.length < 2) return undefined;
  const n = merged.length;
  const meanB = merged.reduce((sum, s) => sum + s.batchSize, 0) / n;
  const meanMs = merged.reduce((sum, s) => sum + s.ms, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const s of merged) {
    sxy += (s.batchSize - meanB) * (s.ms - meanMs);
    sxx += (s.batchSize - meanB) ** 2;
    syy += (s.ms - meanMs) ** 2;
  }
  const m = sxy / sxx;
  const c = meanMs - m * meanB;
  const residual = merged.reduce((sum, s) => sum + (s.ms - (c + m * s.batchSize)) ** 2, 0);
  // Identical timings at every size: the flat line fits them exactly (and m = 0 fails it).
  const r2 = syy === 0 ? 1 : 1 - residual / syy;
  const failure = fitFailure(c, m);
  return {
    c,
    m,
    r2,
    ...(failure === undefined ? { ceiling: 1 + c / m } : { failure }),
    poorFit: r2 < POOR_FIT_R2,
    samples: merged,
  };
}

/**
 * A line that cannot be the cost of a pass, however well it fits: a high R² with c < 0 (seen:
 * c = −21.4 ms, R² 0.954) would otherwise print a negative ceiling and negative speedups.
 */
function fitFailure(c: number, m: number): FitFailure | undefined {
  if (m <= 0) return 'm ≤ 0';
  return c < 0 ? 'c < 0' : undefined;
}

/**
 * The fit that predicts the speedups: the in-process one, the limit the server is judged
 * against, unless it failed where the server's did not.
 */
export function speedupFitOf({ fit, inProcess }: Pick<BenchReport, 'fit' | 'inProcess'>): SpeedupFit | undefined {
  if (inProcess && (inProcess.failure === undefined || !fit || fit.failure !== undefined)) return 'inProcess';
  return fit ? 'fit' : undefined;
}

function mergeByBatchSize(samples: readonly BatchCostSample[]): BatchCostSample[] {
  const bySize = new Map<number, { totalMs: number; count: number }>();
  for (const { batchSize, ms, count } of samples) {
    if (!(batchSize >= 1 && count > 0 && Number.isFinite(ms))) continue;
    const entry = bySize.get(batchSize) ?? { totalMs: 0, count: 0 };
    entry.totalMs += ms * count;
    entry.count += count;
    bySize.set(batchSize, entry);
  }
  return [...bySize]
    .sort(([a], [b]) => a - b)
    .map(([batchSize, { totalMs, count }]) => ({ batchSize, ms: totalMs / count, count }));
}

/** S(B) = B(c+m)/(c+B·m): rows per second at batch B over rows per second one at a time. */
export function predictedSpeedup(fit: Pick<BatchCostFit, 'c' | 'm'>, batchSize: number): number {
  return (batchSize * (fit.c + fit.m)) / (fit.c + batchSize * fit.m);
}

type StatsSnapshot = Pick<ModelStatsJson, 'batch_stats'>;

/**
 * Mean compute_infer per batch size over the passes that ran between two statistics snapshots
 * of one model. Sizes that did not run in between are left out, and so are sizes whose counters
 * went backwards (the server restarted; those figures are not this window's).
 */
export function samplesFromStats(before: StatsSnapshot | undefined, after: StatsSnapshot): BatchCostSample[] {
  const earlier = new Map((before?.batch_stats ?? []).map((b) => [b.batch_size, b.compute_infer]));
  const samples: BatchCostSample[] = [];
  for (const { batch_size: batchSize, compute_infer: now } of after.batch_stats) {
    const then = earlier.get(batchSize) ?? { count: 0, ns: 0 };
    const count = now.count - then.count;
    const ns = now.ns - then.ns;
    if (count > 0 && ns >= 0) samples.push({ batchSize, ms: ns / count / 1e6, count });
  }
  return samples.sort((a, b) => a.batchSize - b.batchSize);
}

/** A point of a server whose settings bench knows: every v2 point (http-json's have none). */
type ConfiguredPoint = PointResult & { readonly server: ServerPoint };

function configured(points: readonly PointResult[]): ConfiguredPoint[] {
  return points.filter((point): point is ConfiguredPoint => point.server !== undefined);
}

/**
 * One row per max_batch_size swept. Points with errors are left out of the measured speedup:
 * a quick 503 is not a served request, and counting it would flatter an overloaded point. A
 * failed fit predicts nothing; the rows then carry only what was measured.
 */
export function speedupTable(
  fit: Pick<BatchCostFit, 'c' | 'm' | 'failure'>,
  points: readonly PointResult[],
): SpeedupRow[] {
  const swept = configured(points);
  const sizes = [...new Set(swept.map((p) => p.server.maxBatchSize))].sort((a, b) => a - b);
  const unbatched = bestThroughput(swept, 1);
  return sizes.map((batchSize) => {
    const best = bestThroughput(swept, batchSize);
    const measured = unbatched !== undefined && best !== undefined ? { measured: best / unbatched } : {};
    if (fit.failure !== undefined) return { batchSize, ...measured };
    const fullest = Math.max(...swept.filter((p) => p.server.maxBatchSize === batchSize).map(fullestBatch));
    return {
      batchSize,
      predicted: predictedSpeedup(fit, batchSize),
      achievableBound: predictedSpeedup(fit, Math.min(batchSize, fullest)),
      ...measured,
    };
  });
}

/**
 * The most rows one instance's batch could hold under a point's load: a closed loop has only
 * concurrency × client batch rows in flight, shared by the instances. An open loop can queue
 * without bound, so only max_batch_size limits it.
 */
function fullestBatch(point: ConfiguredPoint): number {
  if (point.load.kind === 'rate') return point.server.maxBatchSize;
  return Math.ceil((point.load.concurrency * point.clientBatch) / point.server.instances);
}

function bestThroughput(points: readonly ConfiguredPoint[], maxBatchSize: number): number | undefined {
  const served = points.filter((p) => p.server.maxBatchSize === maxBatchSize && p.errorCount === 0);
  return served.length === 0 ? undefined : Math.max(...served.map((p) => p.throughput));
}

/**
 * The highest-throughput point that met the p99 objective without a single error, among the
 * points whose settings can be pasted into a model config.
 */
export function recommend(points: readonly PointResult[], sloP99Ms: number): Recommendation | undefined {
  // A point whose windows disagreed is a guess: a stable one that meets the budget comes first,
  // and an unstable one is recommended only when nothing stable qualifies (and says so).
  let best: ConfiguredPoint | undefined;
  for (const point of configured(points)) {
    if (point.errorCount > 0 || !(point.latency.p99 <= sloP99Ms)) continue;
    const better =
      best === undefined ||
      (point.stable && !best.stable) ||
      (point.stable === best.stable && point.throughput > best.throughput);
    if (better) best = point;
  }
  return best === undefined ? undefined : recommendationFor(best, sloP99Ms);
}

/** The model-config snippet that deploys `point`'s configuration. */
export function recommendationFor(point: PointResult, sloP99Ms: number): Recommendation | undefined {
  if (!point.server) return undefined;
  const { maxBatchSize, maxQueueDelayUs, instances } = point.server;
  // The bench cannot tell which device the server ran on; cpu is the config's default.
  const snippet =
    `max_batch_size: ${maxBatchSize}\n` +
    `dynamic_batching:\n` +
    `  max_queue_delay: ${formatDelay(maxQueueDelayUs)}\n` +
    `instances:\n` +
    `  - { count: ${instances}, device: cpu }\n`;
  return { sloP99Ms, point, snippet };
}
