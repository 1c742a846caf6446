/**
 * Capacity planning (`bench --plan`): from the open-loop points a sweep measured, the highest
 * rate one replica sustains inside the p99 budget, the rows it holds there, and what that
 * means for a target rate: replicas = ceil(target / per-replica rate), and the autoscaler's
 * queue-depth target (docs/deploy.md, "Autoscaling on queue depth").
 */
import type { CapacityPlan, PointResult, RateSearchResult } from './report-types.js';

/**
 * Served requests must reach this share of the offered rate: the requests still in flight when
 * the last window closes are not counted, and a server falling behind serves its capacity and
 * no more, however high the rate.
 */
export const SERVED_SHARE = 0.9;

/**
 * How far below its rate a point's count may fall by chance: Poisson arrivals over a short run
 * stray by about the square root of the count (18 ± 4 requests at 40/s over 0.45 s), so a
 * shortfall counts only when it is beyond three of those as well as beyond the served share.
 */
const CHANCE_DEVIATIONS = 3;

/** An open-loop point the server kept up with: no errors, p99 inside the budget, the rate served. */
export function sustains(point: PointResult, sloP99Ms: number): boolean {
  if (point.load.kind !== 'rate' || point.errorCount > 0 || point.latency.count === 0) return false;
  const offered = point.load.rate * point.durationSeconds;
  const served = point.throughput * point.durationSeconds;
  const allowance = Math.max((1 - SERVED_SHARE) * offered, CHANCE_DEVIATIONS * Math.sqrt(offered));
  return point.latency.p99 <= sloP99Ms && served >= offered - allowance;
}

/**
 * Rows queued or running on the server at a point, by Little's law: rows per second × the
 * time a request spends in the server (its queue and compute time, from the statistics). That
 * is what `batchserve_pending_rows` averages there. Without server statistics the client's mean
 * latency stands in, which also counts the network and the codecs, so it reads high.
 */
export function pendingRowsAt(point: PointResult): number {
  const side = point.serverSide;
  const msPerRequest =
    side && side.requests > 0 ? side.queueMsPerRequest + side.computeMsPerRequest : point.latency.mean;
  return (point.itemsPerSecond * msPerRequest) / 1000;
}

export interface PlanTarget {
  /** Requests per second to serve in all. */
  readonly targetRate: number;
  readonly sloP99Ms: number;
}

/** The plan, or undefined when no open-loop point was sustained. */
export function planCapacity(
  points: readonly PointResult[],
  searches: readonly RateSearchResult[],
  { targetRate, sloP99Ms }: PlanTarget,
): CapacityPlan | undefined {
  const best = points
    .filter((point) => sustains(point, sloP99Ms))
    .sort((a, b) => offeredRate(b) - offeredRate(a) || a.latency.p99 - b.latency.p99)[0];
  if (!best) return undefined;
  const replicaRate = offeredRate(best);
  const pendingRows = pendingRowsAt(best);
  return {
    targetRate,
    sloP99Ms,
    point: best,
    replicaRate,
    pendingRows,
    replicas: Math.ceil(targetRate / replicaRate),
    // Rounded down: the autoscaler keeps each replica at or below the target, and a target
    // above the measured depth would let a replica run past the rate that kept p99 in budget.
    targetQueueDepth: Math.max(1, Math.floor(pendingRows)),
    searches,
  };
}

function offeredRate(point: PointResult): number {
  return point.load.kind === 'rate' ? point.load.rate : 0;
}
