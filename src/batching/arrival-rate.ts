import { ARRIVAL_WINDOW, ARRIVAL_WINDOW_BATCHES } from './tuning.js';

/**
 * How often rows arrive, as the expected gap between one row and the next: the time the last
 * requests of the window took to arrive, divided by their rows — the mean, not the median,
 * because in a closed loop arrivals come in bursts (most gaps near zero, one long one per
 * batch) and only the mean counts the long gap for what it costs; for Poisson arrivals the
 * mean is also the unbiased one (the median gap is 0.69 of it). The window holds two full
 * batches' requests (tuning.ts), so it always spans a burst's silence too; one long silence
 * (the night, a client restarting) leaves it after that many requests.
 */
export class ArrivalRate {
  readonly #size: number;
  readonly #times: Float64Array;
  readonly #rows: Float64Array;
  #count = 0;
  #next = 0;
  /** Rows of every request in the window but its oldest. */
  #rowsAfterOldest = 0;
  #meanGapMs = Infinity;

  constructor(maxBatchSize: number) {
    this.#size = Math.max(ARRIVAL_WINDOW, ARRIVAL_WINDOW_BATCHES * maxBatchSize);
    this.#times = new Float64Array(this.#size);
    this.#rows = new Float64Array(this.#size);
  }

  arrived(now: number, rows: number): void {
    if (this.#count === this.#size) {
      // The oldest leaves; the one after it becomes the oldest, its rows no longer counted.
      const second = (this.#next + 1) % this.#size;
      this.#rowsAfterOldest -= this.#rows[second] as number;
    } else {
      this.#count += 1;
    }
    this.#times[this.#next] = now;
    this.#rows[this.#next] = rows;
    if (this.#count > 1) this.#rowsAfterOldest += rows;
    this.#next = (this.#next + 1) % this.#size;
    const oldest = this.#times[this.#count === this.#size ? this.#next : 0] as number;
    this.#meanGapMs = this.#count > 1 ? Math.max(0, now - oldest) / Math.max(1, this.#rowsAfterOldest) : Infinity;
  }

  /**
   * The expected wait for the next row, ms. When the last arrival is already longer ago than
   * the usual gap, the load has dropped since: the time since then is the better guess, so a
   * wait for partners that are not coming ends by itself.
   */
  expectedGapMs(now: number): number {
    const last = this.#count === 0 ? -Infinity : (this.#times[(this.#next + this.#size - 1) % this.#size] as number);
    return Math.max(this.#meanGapMs, now - last);
  }
}
