/**
 * Recent overruns the margin rests on: a 99th percentile needs about a thousand to rest on ten,
 * and a stall lands on every request in flight at once, so a short window forgets it between
 * stalls (256 kept about a third of a second at 800 requests a second).
 */
const WINDOW = 1024;
/** The margin is worked out again after this many overruns (a sort of the window, ~50 µs). */
const RECOMPUTE_EVERY = 64;
/** The share of recent requests the margin covers: the budget is a p99 promise. */
const QUANTILE = 0.99;

/**
 * How much later than predicted at admission requests finish: the margin the latency budget
 * keeps on top of the prediction. The prediction (expected-completion.ts) is a mean, the
 * queue ahead at the line's cost; what it cannot see — a stall of the machine, a batch that
 * ran long, the main thread late to pick an answer up — lands on many queued requests at
 * once, so a budget held on the mean alone is passed by the tail. The margin is the 99th
 * percentile of (finished − predicted) over the last 1,024 admitted requests (0 when they
 * finish early), capped by the caller so one long pause cannot shut admission for long.
 */
export class CompletionOverrun {
  readonly #overruns = new Float64Array(WINDOW);
  readonly #sorted = new Float64Array(WINDOW);
  #count = 0;
  #next = 0;
  #sinceRecompute = 0;
  #marginMs = 0;

  /** The margin, ms: the p99 overrun of recent requests, at least 0. */
  get marginMs(): number {
    return this.#marginMs;
  }

  /** A request admitted with a prediction finished `overrunMs` after it (negative: early). */
  observe(overrunMs: number): void {
    if (!Number.isFinite(overrunMs)) return;
    this.#overruns[this.#next] = overrunMs;
    this.#next = (this.#next + 1) % WINDOW;
    this.#count = Math.min(this.#count + 1, WINDOW);
    if (++this.#sinceRecompute < RECOMPUTE_EVERY) return;
    this.#sinceRecompute = 0;
    const recent = this.#sorted.subarray(0, this.#count);
    recent.set(this.#overruns.subarray(0, this.#count));
    recent.sort();
    const at = Math.min(this.#count - 1, Math.floor(QUANTILE * this.#count));
    this.#marginMs = Math.max(0, recent[at] as number);
  }
}
