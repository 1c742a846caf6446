import type { CostFit } from './cost-fit.js';

/** What the adaptive policy knows when an instance is free and rows are queued. */
export interface WaitQuestion {
  /** Rows queued in the group. */
  readonly queuedRows: number;
  readonly maxBatchSize: number;
  /** Instances free now, this one included. */
  readonly freeInstances: number;
  /** How long the oldest queued request has waited, ms. */
  readonly oldestWaitMs: number;
  /** The expected wait for the next row, ms. */
  readonly gapMs: number;
  /** Latency budget: the oldest request's expected completion may not pass it, ms. */
  readonly maxLatencyMs: number;
  readonly fit: CostFit;
}

/**
 * Whether to hold the batch for the next row rather than dispatch it now, and for how long.
 *
 * With q rows queued, one instance free, a batch costing T(B) = c + m·B and the next row
 * expected in Δ: dispatching now finishes the q rows at T(q), and the newcomer, arriving at Δ,
 * queues behind them for max(0, T(q) − Δ) and then runs alone in T(1). Waiting runs all q + 1
 * together at Δ, finishing at Δ + T(q + 1). Summed over the rows, waiting costs each queued
 * row Δ + m (the wait, and one more row in its batch) and the newcomer q·m (a larger batch),
 * and saves the newcomer its queueing, max(0, T(q) − Δ). Waiting lowers the total when
 *
 *     q·(Δ + 2m) < c + q·m − Δ,   that is   Δ < (c − q·m) / (q + 1).
 *
 * So the policy waits only while the fixed cost is large next to what the queued rows already
 * cost (q·m < c) and rows come faster than that break-even gap; with another instance free the
 * newcomer would not queue, so it dispatches. It never waits past the point where the oldest
 * request, waiting Δ more and then running a batch of q + 1, would end after `maxLatencyMs`.
 * Each wait is one expected gap; when it ends the question is asked again with what arrived.
 *
 * Returns the ms to wait, or 0 to dispatch now. Untrusted fits dispatch now (delay 0).
 */
export function adaptiveWaitMs(question: WaitQuestion): number {
  const { queuedRows: q, fit, gapMs, oldestWaitMs, maxLatencyMs } = question;
  if (!fit.trusted || q >= question.maxBatchSize || question.freeInstances > 1) return 0;
  const { c, m } = fit;
  const breakEven = (c - q * m) / (q + 1);
  if (!(gapMs < breakEven)) return 0;
  const finishesBy = oldestWaitMs + gapMs + c + m * (q + 1);
  return finishesBy <= maxLatencyMs ? gapMs : 0;
}
