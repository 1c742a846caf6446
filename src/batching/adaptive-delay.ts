import type { CostFit } from './cost-fit.js';
import { MIN_WAIT_MS, PLANNED_SHARE } from './tuning.js';

/** The part of `max_latency` (µs) auto plans its waits to end within, ms (to the µs). */
export function plannedMs(maxLatencyUs: number): number {
  return Math.round(PLANNED_SHARE * maxLatencyUs) / 1000;
}

/** What the adaptive policy knows when an instance is free and rows are queued. */
export interface WaitQuestion {
  /** Rows queued in the group. */
  readonly queuedRows: number;
  readonly maxBatchSize: number;
  /** Instances free now, this one included. */
  readonly freeInstances: number;
  /** Instances serving the shape, free or busy: rows owed back are shared among them. */
  readonly instances: number;
  /** How long the oldest queued request has waited, ms. */
  readonly oldestWaitMs: number;
  /** The expected wait for the next row of the stream of arrivals (its mean gap), ms. */
  readonly gapMs: number;
  /**
   * Rows whose clients are expected back (a closed loop): of batches answered a moment ago and
   * of batches still running, and in how long all of them, ms.
   */
  readonly returningRows: number;
  readonly returningInMs: number;
  /** Of those, the answered batches' rows (they come first), and in how long, ms. */
  readonly answeredRows: number;
  readonly answeredInMs: number;
  /** Latency budget: the oldest request's expected completion may not pass it, ms. */
  readonly maxLatencyMs: number;
  readonly fit: CostFit;
  /** How much longer than the line recent batches held their instance (pace.ts): the budget check's batch costs that much. */
  readonly pace: number;
}

/**
 * Whether to hold the batch for rows about to arrive rather than dispatch it now, and for how
 * long.
 *
 * The cost of a row is the instance time it takes: a batch of B costs T(B)/B = c/B + m a row.
 * With q rows queued and one instance free, waiting Δ for k more rows holds the instance idle
 * for Δ — what the wait costs the rows already queued, and instance time nobody else gets — and
 * then runs q + k together; not waiting runs q now and leaves the k to a later batch. Waiting
 * pays when it lowers the instance time per row of the q + k rows. What the k would cost left
 * behind depends on where they come from, so two expectations are asked, in this order:
 *
 *  - Rows owed back (a closed loop; returning-rows.ts): the rows of the batch just answered,
 *    due within Δ. Left behind they are all that is coming, so they run as a batch of their own:
 *        (Δ + T(q + k))/(q + k) < (T(q) + T(k))/(q + k)   ⇔   Δ < c,
 *    m cancelling since every row costs m either way. On one instance k = min(rows owed, room in
 *    the batch); on I instances the rows owed are shared, so this batch waits for its share,
 *    ⌈(q + owed)/I⌉ − q, even with another instance free: K clients on I instances then ride I
 *    batches of K/I, staggered by their arrival, rather than the first free instance taking a
 *    few and the rest straggling (the answered batches' rows are due first, a running batch's
 *    after it ends).
 *  - The stream (arrival-rate.ts): left behind, the next row joins the next batch, which forms
 *    while this one runs and costs about what this one does a row, T(q)/q. Waiting Δ = k·gap
 *    for k rows pays when
 *        (k·gap + T(q + k))/(q + k) < T(q)/q   ⇔   gap < c/q,
 *    whatever k: wait one gap while fewer rows are queued than arrive during one fixed cost
 *    (q < c·λ). Below that rate the batch of q keeps up with arrivals on its own and waiting
 *    only adds latency: at low load auto is delay 0.
 *
 * With c = 4.8 ms, m = 0.55 ms and rows 1 ms apart, it waits with 3 queued (1 < 4.8/3 = 1.6) and
 * goes with 5 (1 > 0.96); 12 rows of a closed loop due back in 2 ms are worth the wait (2 < 4.8).
 * It never waits when the batch is full, nor for the stream while another instance is free
 * (newcomers would not queue), and never when the oldest request, waiting Δ more and then
 * running a batch of q + k (at the line's cost times the pace), would end after
 * `maxLatencyMs`. Every arrival and the end of each wait asks again.
 *
 * Returns the ms to wait, or 0 to dispatch now. Untrusted fits dispatch now (delay 0).
 */
export function adaptiveWaitMs(question: WaitQuestion): number {
  const { queuedRows: q, maxBatchSize, fit, oldestWaitMs, maxLatencyMs } = question;
  if (!fit.trusted || q >= maxBatchSize) return 0;
  const { c, m } = fit;
  const inBudget = (k: number, waitMs: number): boolean =>
    oldestWaitMs + waitMs + question.pace * (c + m * (q + k)) <= maxLatencyMs;
  // This batch's share of the rows coming back: on I instances K clients ride I batches of K/I.
  const share = Math.min(maxBatchSize, Math.ceil((q + question.returningRows) / Math.max(1, question.instances)));
  const returning = share - q;
  const returningInMs = returning <= question.answeredRows ? question.answeredInMs : question.returningInMs;
  if (returning > 0 && returningInMs < c && inBudget(returning, returningInMs)) {
    return Math.max(MIN_WAIT_MS, returningInMs);
  }
  if (question.freeInstances > 1) return 0;
  const { gapMs } = question;
  return gapMs < c / q && inBudget(1, gapMs) ? Math.max(MIN_WAIT_MS, gapMs) : 0;
}
