import { MIN_DISTINCT_SIZES, MIN_R2, type CostFit } from './cost-fit.js';

/** What is known of the queue when a request asks to join it. */
export interface CompletionQuestion {
  /** Rows that run before this request's, plus its own. */
  readonly rowsThrough: number;
  /** Largest batch; 0 = the model does not batch (a batch is one request). */
  readonly maxBatchSize: number;
  /** For each instance, how long until it is expected to be free, ms (0 when idle). */
  readonly freeInMs: readonly number[];
  readonly fit: CostFit;
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

/**
 * When a request admitted now would be answered, ms from now, if the queue ahead of it runs
 * in order, full batches first, each on whichever instance frees first, at T(B) = c + m·B.
 * Its own batch, when it has to wait for an instance, is taken as full: the rows that arrive
 * meanwhile join it (a closed loop's clients return together, which no arrival rate
 * foresees), and counting only the rows ahead of it predicted the front of a queue as much as
 * a whole batch too early. So the prediction is late rather than early on how its batch
 * fills, and what is left to overrun it (completion-overrun.ts) is what the line cannot see.
 * Returns early (above `limitMs`) once that point is passed. The queue is taken as one line:
 * other shapes and priority levels share its instances, so their rows count too.
 */
export function expectedCompletionMs(question: CompletionQuestion): number {
  const { fit, limitMs } = question;
  const batch = Math.max(1, question.maxBatchSize);
  const freeIn = [...question.freeInMs];
  if (freeIn.length === 0) return Infinity;
  let rows = question.rowsThrough;
  let endMs = 0;
  while (rows > 0) {
    let first = 0;
    for (let index = 1; index < freeIn.length; index++) {
      if ((freeIn[index] as number) < (freeIn[first] as number)) first = index;
    }
    const startMs = freeIn[first] as number;
    const size = startMs > 0 ? batch : Math.min(batch, rows);
    endMs = startMs + Math.max(0, fit.c + fit.m * size);
    freeIn[first] = endMs;
    rows -= size;
    if (endMs > limitMs) return endMs;
  }
  return endMs;
}
