import { RETURN_DELAYS as DELAYS, RETURN_SLACK as SLACK, RETURN_SLACK_MS as SLACK_MS } from './tuning.js';

/**
 * The rows expected back soon: clients in a closed loop (most load tests, any client that
 * sends its next request when the last is answered) return right after their batch is
 * answered, together. A rate cannot see this — it is the same rows every time, not a stream —
 * but the batcher can: every row answered is owed back, and arrivals pay the debt. How long
 * they take is learnt as the longest of the last 16 delays from an answer to a row that paid.
 * The debt lapses once it is overdue, so clients that left are not waited for again.
 */
export class ReturningRows {
  readonly #delays = new Float64Array(DELAYS);
  #count = 0;
  #next = 0;
  #longestDelayMs = 0;
  #owed = 0;
  #answeredAt = -Infinity;

  /** A batch of `rows` was answered. */
  answered(now: number, rows: number): void {
    if (now > this.#dueAt()) this.#owed = 0;
    this.#owed += rows;
    this.#answeredAt = now;
  }

  arrived(now: number, rows: number): void {
    if (this.#owed === 0) return;
    this.#delays[this.#next] = now - this.#answeredAt;
    this.#next = (this.#next + 1) % DELAYS;
    this.#count = Math.min(this.#count + 1, DELAYS);
    let longest = 0;
    for (let index = 0; index < this.#count; index++) longest = Math.max(longest, this.#delays[index] as number);
    this.#longestDelayMs = longest;
    this.#owed = Math.max(0, this.#owed - rows);
  }

  /** Rows still owed back if they are due after `now`, else 0. */
  owedRows(now: number): number {
    return now < this.#dueAt() ? this.#owed : 0;
  }

  /** How long until the owed rows should all be back, ms (0 when overdue). */
  dueInMs(now: number): number {
    return Math.max(0, this.#dueAt() - now);
  }

  #dueAt(): number {
    return this.#count === 0 ? -Infinity : this.#answeredAt + this.#longestDelayMs * SLACK + SLACK_MS;
  }
}
