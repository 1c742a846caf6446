import type { CostFit } from './cost-fit.js';
import { MIN_DISTINCT_SIZES, MIN_R2 } from './tuning.js';

/** What is known of the queue when a request asks to join it. */
export interface CompletionQuestion {
  /** Rows that run before this request's, plus its own. */
  readonly rowsThrough: number;
  /** Largest batch; 0 = the model does not batch (a batch is one request). */
  readonly maxBatchSize: number;
  /** For each instance, how long until it is expected to be free, ms (0 when idle); worked on in place, so the caller's own copy. */
  readonly freeInMs: number[];
  readonly fit: CostFit;
  /** How much slower (above 1) or faster than the line batches run now (pace.ts). */
  readonly pace: number;
  /** Work it out no further than this, ms: past it the answer is only "too late". */
  readonly limitMs: number;
}

/**
 * Whether a cost line can say how long a batch will take. Steering the wait needs a trusted
 * line (cost-fit.ts); a prediction asks less: a per-row cost, enough sizes and a line that
 * explains them. A line through passes with no fixed cost to share (c slightly below 0) still
 * predicts well; batching just cannot gain from it.
 */
export function predictsCost(fit: CostFit): boolean {
  return fit.m > 0 && fit.sizes >= MIN_DISTINCT_SIZES && fit.r2 >= MIN_R2 && Number.isFinite(fit.c);
}

/** T(B) on a line, ms: c + m·B, never below 0 (a line with c < 0 would put small batches there). */
export function batchMsOn(fit: CostFit, rows: number): number {
  return Math.max(0, fit.c + fit.m * rows);
}

/**
 * When a request admitted now would be answered, ms from now, if the queue ahead of it runs in
 * order, full batches first, each on whichever instance frees first, at T(B) = c + m·B scaled
 * by the pace. Deciding on the rows ahead refuses only what the queue itself puts past the
 * budget: a batch that fills up behind the request ends at most one fuller batch later, which
 * a budget of two full batches or more (the load warns below it) leaves room for. Stops
 * (above `limitMs`) once that point is passed. The queue is taken as one line: other shapes and
 * priority levels share its instances, so their rows count too.
 */
export function expectedCompletion(question: CompletionQuestion): number {
  const { fit, pace, limitMs, freeInMs: freeIn } = question;
  const batch = Math.max(1, question.maxBatchSize);
  if (freeIn.length === 0) return Infinity;
  let rows = question.rowsThrough;
  let endMs = 0;
  while (rows > 0) {
    let first = 0;
    for (let index = 1; index < freeIn.length; index++) {
      if ((freeIn[index] as number) < (freeIn[first] as number)) first = index;
    }
    const size = Math.min(batch, rows);
    endMs = (freeIn[first] as number) + pace * batchMsOn(fit, size);
    freeIn[first] = endMs;
    rows -= size;
    if (endMs > limitMs) return endMs;
  }
  return endMs;
}
