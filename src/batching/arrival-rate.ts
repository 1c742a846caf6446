import { ARRIVAL_WINDOW as ARRIVALS } from './tuning.js';

/**
 * How often rows arrive, as the expected gap between one row and the next: the time the last
 * 16 requests took to arrive, divided by their rows — the mean, not the median, because in a
 * closed loop arrivals come in bursts (most gaps near zero, one long one per batch) and only
 * the mean counts the long gap for what it costs; for Poisson arrivals the mean is also the
 * unbiased one (the median gap is 0.69 of it). One long silence (the night, a client
 * restarting) leaves the window after sixteen requests.
 */
export class ArrivalRate {
  readonly #times = new Float64Array(ARRIVALS);
  readonly #rows = new Float64Array(ARRIVALS);
  #count = 0;
  #next = 0;
  /** Rows of every request in the window but its oldest. */
  #rowsAfterOldest = 0;
  #meanGapMs = Infinity;

  arrived(now: number, rows: number): void {
    if (this.#count === ARRIVALS) {
      // The oldest leaves; the one after it becomes the oldest, its rows no longer counted.
      const second = (this.#next + 1) % ARRIVALS;
      this.#rowsAfterOldest -= this.#rows[second] as number;
    } else {
      this.#count += 1;
    }
    this.#times[this.#next] = now;
    this.#rows[this.#next] = rows;
    if (this.#count > 1) this.#rowsAfterOldest += rows;
    this.#next = (this.#next + 1) % ARRIVALS;
    const oldest = this.#times[this.#count === ARRIVALS ? this.#next : 0] as number;
    this.#meanGapMs = this.#count > 1 ? Math.max(0, now - oldest) / Math.max(1, this.#rowsAfterOldest) : Infinity;
  }

  /**
   * The expected wait for the next row, ms. When the last arrival is already longer ago than
   * the usual gap, the load has dropped since: the time since then is the better guess, so a
   * wait for partners that are not coming ends by itself.
   */
  expectedGapMs(now: number): number {
    const last = this.#count === 0 ? -Infinity : (this.#times[(this.#next + ARRIVALS - 1) % ARRIVALS] as number);
    return Math.max(this.#meanGapMs, now - last);
  }
}
