/** Recent gaps the estimate rests on. */
const GAPS = 16;

/**
 * How often rows arrive, as the expected gap between one row and the next: the median of the
 * last 16 gaps between requests, each divided by the request's rows. A median, because one
 * long silence (the night, a client restarting) is one gap among sixteen and must not make a
 * busy minute after it look quiet; a lasting change of load moves it within eight requests.
 */
export class ArrivalRate {
  readonly #gaps = new Float64Array(GAPS);
  readonly #sorted = new Float64Array(GAPS);
  #count = 0;
  #next = 0;
  #lastArrival = -Infinity;
  #medianGapMs = Infinity;

  arrived(now: number, rows: number): void {
    if (this.#lastArrival !== -Infinity) {
      this.#gaps[this.#next] = Math.max(0, now - this.#lastArrival) / Math.max(1, rows);
      this.#next = (this.#next + 1) % GAPS;
      this.#count = Math.min(this.#count + 1, GAPS);
      this.#medianGapMs = this.#median();
    }
    this.#lastArrival = now;
  }

  /**
   * The expected wait for the next row, ms. When the last arrival is already longer ago than
   * the usual gap, the load has dropped since: the time since then is the better guess, so a
   * wait for partners that are not coming ends by itself.
   */
  expectedGapMs(now: number): number {
    return Math.max(this.#medianGapMs, now - this.#lastArrival);
  }

  #median(): number {
    const sorted = this.#sorted.subarray(0, this.#count);
    sorted.set(this.#gaps.subarray(0, this.#count));
    sorted.sort();
    const middle = this.#count >> 1;
    return this.#count % 2 === 1
      ? (sorted[middle] as number)
      : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
  }
}
