/** The seconds of history the busy share is measured over. */
export const BUSY_WINDOW_SECONDS = 10;

/**
 * The compute seconds a model version's instances spent, in one-second buckets over the last
 * BUSY_WINDOW_SECONDS: their busy share is that over the window's instance-seconds. A batch
 * counts in the second it ended; a gauge, so a dashboard reads the device's use without a rate().
 */
export class BusyWindow {
  readonly #buckets = new Float64Array(BUSY_WINDOW_SECONDS);
  /** The second (since the epoch) each bucket holds. */
  readonly #secondOf = new Float64Array(BUSY_WINDOW_SECONDS).fill(-1);
  readonly #since: number;

  constructor(nowMs: number) {
    this.#since = nowMs;
  }

  add(nowMs: number, seconds: number): void {
    const second = Math.floor(nowMs / 1000);
    const index = second % BUSY_WINDOW_SECONDS;
    if (this.#secondOf[index] !== second) {
      this.#secondOf[index] = second;
      this.#buckets[index] = 0;
    }
    (this.#buckets[index] as number) += seconds;
  }

  /** The share of `instances` × the window (or the time since it started, when shorter) spent computing, 0–1. */
  ratio(nowMs: number, instances: number): number {
    const second = Math.floor(nowMs / 1000);
    let busy = 0;
    for (let index = 0; index < BUSY_WINDOW_SECONDS; index++) {
      if (second - (this.#secondOf[index] as number) < BUSY_WINDOW_SECONDS) busy += this.#buckets[index] as number;
    }
    // The window's oldest second is whole; the current one is only as far along as now.
    const span = Math.min(BUSY_WINDOW_SECONDS - 1 + (nowMs % 1000) / 1000, (nowMs - this.#since) / 1000);
    if (instances <= 0 || span <= 0) return 0;
    return Math.min(1, busy / (span * instances));
  }
}
