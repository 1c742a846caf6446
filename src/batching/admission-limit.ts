/** Answered requests the limit is judged on at a time. */
const WINDOW = 32;
/**
 * The share of `max_latency` auto plans its requests to be answered in: the rest is for what
 * follows the batcher's answer (encoding and writing it) and what precedes the server's
 * reading the request, which the clients' own p99 holds and the batcher never sees.
 */
const TARGET_SHARE = 0.8;
/**
 * The part of `max_latency` (µs) auto plans its requests to be answered in, ms (to the µs):
 * waits, predictions and the admission limit all aim for it.
 */
export function plannedMs(maxLatencyUs: number): number {
  return Math.round(TARGET_SHARE * maxLatencyUs) / 1000;
}

/** A window within the target in which the limit turned requests away raises it at most this many times. */
const MAX_GROWTH = 2;
/**
 * Raises aim at this share of the target, cuts at the target itself; between the two the limit
 * holds. A limit raised all the way to the target on one window's extrapolation was never tried
 * at that depth: clients refused together came back together after Retry-After, filled it to its
 * last row, and the back of the burst passed max_latency, which cut the limit and refused the
 * next burst. The demo at 64 in flight, six alternating runs each: p99 89–127 ms without the
 * gap, 82–92 ms with it, 1.14× the throughput and a quarter fewer refusals.
 */
const RAISE_SHARE = 0.75;

/**
 * The feedback half of `max_queue_delay: auto`'s latency budget: a limit on the rows ahead of
 * a request (queued, running, and held for requests still reading their bodies), learnt from
 * how long admitted requests actually took, from admission to answer. The cost line predicts
 * what the queue will cost (expected-completion.ts) and refuses what it can see will be late;
 * what it cannot see — the main thread busy with other requests' HTTP work on the core an
 * instance shares, a collection, a stalled machine — only the measured latency shows.
 *
 * Every 32 answered requests, the slowest, if it was past the target (TARGET_SHARE of
 * max_latency), says how much the queue must shrink: each row ahead cost about `rowMs` (what
 * recent batches took a row, dispatch to answer, over the instances), so the limit falls to
 * the most rows any of the 32 had ahead less the slowest's excess in rows — unless even an
 * empty queue would not have saved it (it was late by more than all its own rows ahead cost: a
 * stall, which no limit on the queue helps, and cutting would only starve the instance), or
 * the slowest had no more rows ahead than the cut would leave: under the cut it would have
 * queued just as deep, so the queue's depth does not explain its lateness (a slow batch on a
 * busy machine does), and cutting would only turn away others. On a contended core the cost model
 * at 350 req/s, open loop, three alternating runs each: such cuts held the limit near the rows
 * one batch runs, refused 250–1,365 requests a run where 201–522 were refused without them,
 * and answered 259 req/s on average against 297. If
 * the limit turned someone away meanwhile and the slowest was within RAISE_SHARE of the target,
 * it rises the same way, by the slowest's room under that lower mark in rows (a row at least,
 * at most doubling at once), so a limit cut in a bad moment comes back within a few windows;
 * a slowest between the two marks leaves it where it is. Without a per-row cost to go by,
 * latency is taken to grow in proportion to the rows ahead. It never starts before an answer
 * is late, and rises only while it binds, so a quiet spell does not leave it anywhere a burst
 * would find it wrong.
 */
export class AdmissionLimit {
  #rows = Infinity;
  #answered = 0;
  /** The window's slowest answer: its latency, its rows ahead, and what a row cost then. */
  #slowestMs = 0;
  #slowestAhead = 0;
  #slowestRowMs = Number.NaN;
  #mostAhead = 0;
  #refused = false;

  constructor(readonly targetMs: number) {}

  /** The most rows a request may have ahead of it with its own; Infinity until an answer was late. */
  get rows(): number {
    return this.#rows;
  }

  /** Whether a request of `rows` with `ahead` rows in front of it may join; one with nothing ahead always may. */
  admits(ahead: number, rows: number): boolean {
    if (ahead === 0 || ahead + rows <= this.#rows) return true;
    this.#refused = true;
    return false;
  }

  /**
   * A request admitted with `ahead` rows ahead of it was answered `latencyMs` after its
   * admission; each row ahead cost about `rowMs` then (NaN: not known).
   */
  answered(latencyMs: number, ahead: number, rowMs: number): void {
    if (!Number.isFinite(latencyMs)) return;
    if (latencyMs > this.#slowestMs) {
      this.#slowestMs = latencyMs;
      this.#slowestAhead = ahead;
      this.#slowestRowMs = rowMs;
    }
    this.#mostAhead = Math.max(this.#mostAhead, ahead);
    if (++this.#answered < WINDOW) return;
    const raiseMs = RAISE_SHARE * this.targetMs;
    if (this.#slowestMs > this.targetMs) {
      const wanted = this.#wantedRows(this.targetMs);
      if (wanted < this.#slowestAhead) this.#rows = Math.min(this.#rows, Math.max(1, wanted));
    } else if (this.#refused && this.#slowestMs <= raiseMs) {
      this.#rows = Math.max(this.#rows + 1, Math.min(this.#wantedRows(raiseMs), this.#rows * MAX_GROWTH));
    }
    this.#answered = 0;
    this.#slowestMs = 0;
    this.#mostAhead = 0;
    this.#refused = false;
  }

  /**
   * After a window: the rows ahead that would have brought its slowest answer to `markMs` —
   * fewer by its excess in rows when it was late, more by its room in rows when it was not;
   * Infinity for a late one that an empty queue would not have saved (a stall).
   */
  #wantedRows(markMs: number): number {
    const excessMs = this.#slowestMs - markMs;
    const rowMs = this.#slowestRowMs;
    if (!(rowMs > 0)) {
      // No cost a row to go by: latency taken to grow in proportion to the rows ahead. (One
      // late with nothing ahead is a stall too: no cut leaves fewer than its 0 rows.)
      return Math.floor((Math.max(1, this.#mostAhead) * markMs) / Math.max(this.#slowestMs, 1e-3));
    }
    // Late by more than all its rows ahead cost: an empty queue would not have saved it.
    if (excessMs > 0 && excessMs >= this.#slowestAhead * rowMs) return Infinity;
    return Math.floor(this.#mostAhead - excessMs / rowMs);
  }
}
