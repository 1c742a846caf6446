import { RETURN_DELAYS as DELAYS, RETURN_SLACK as SLACK, RETURN_SLACK_MS as SLACK_MS } from './tuning.js';

/**
 * The rows expected back soon: clients in a closed loop (most load tests, any client that
 * sends its next request when the last is answered) return right after their batch is
 * answered, together. A rate cannot see this — it is the same rows every time, not a stream —
 * but the batcher can: every row answered is owed back, and arrivals pay the debt. How long
 * they take is learnt as the longest of the last 16 delays from an answer to a row that paid.
 * The debt lapses once it is overdue, so clients that left are not waited for again.
 *
 * Rows still running count too, due a return delay after their batch is expected to end: a
 * batch formed while another runs (an instance that queues batches is sent the next one
 * before it frees) would otherwise never wait for the running batch's clients, and K clients
 * split into two half batches would stay split, paying the fixed cost twice per cycle.
 */
export class ReturningRows {
  readonly #delays = new Float64Array(DELAYS);
  #count = 0;
  #next = 0;
  #longestDelayMs = 0;
  #owed = 0;
  #answeredAt = -Infinity;
  /** Rows in running batches, and when the last of those batches is expected to end. */
  #running = 0;
  #runningEndsAt = -Infinity;

  /** A batch of `rows` was sent to an instance, expected to end at `endsAt`. */
  started(now: number, rows: number, endsAt: number): void {
    if (now > this.#runningDueAt()) this.#running = 0;
    this.#running += rows;
    this.#runningEndsAt = Math.max(this.#runningEndsAt, endsAt);
  }

  /** A batch of `rows` was answered. */
  answered(now: number, rows: number): void {
    this.#running = Math.max(0, this.#running - rows);
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

  /** Rows still owed back (answered, or running) if they are due after `now`, else 0. */
  owedRows(now: number): number {
    return (now < this.#dueAt() ? this.#owed : 0) + (now < this.#runningDueAt() ? this.#running : 0);
  }

  /** The owed rows of batches already answered (not those still running), if due after `now`, else 0. */
  answeredRows(now: number): number {
    return now < this.#dueAt() ? this.#owed : 0;
  }

  /** How long until the answered batches' rows should be back, ms (0 when overdue). */
  answeredDueInMs(now: number): number {
    return Math.max(0, this.#dueAt() - now);
  }

  /** How long until the owed rows should all be back, ms (0 when overdue). */
  dueInMs(now: number): number {
    const runningDueAt = now < this.#runningDueAt() && this.#running > 0 ? this.#runningDueAt() : -Infinity;
    return Math.max(0, this.#dueAt() - now, runningDueAt - now);
  }

  #dueAt(): number {
    return this.#dueAfter(this.#answeredAt);
  }

  /** Rows of a batch that ran past this are not waited for (it failed, or ran late). */
  #runningDueAt(): number {
    return this.#dueAfter(this.#runningEndsAt);
  }

  #dueAfter(at: number): number {
    return this.#count === 0 ? -Infinity : at + this.#longestDelayMs * SLACK + SLACK_MS;
  }
}
