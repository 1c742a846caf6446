import { RowCap } from './row-cap.js';

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
 * busy machine does), and cutting would only turn away others. On a contended core the cost
 * model at 350 req/s, open loop, three alternating runs each: such cuts held the limit near
 * the rows one batch runs, refused 250–1,365 requests a run where 201–522 were refused
 * without them, and answered 259 req/s on average against 297. If the limit turned someone
 * away meanwhile and the slowest was within RAISE_SHARE of the target, it rises the same way,
 * by the slowest's room under that lower mark in rows (a row at least, at most doubling at
 * once), so a limit cut in a bad moment comes back within a few windows; a slowest between the
 * two marks leaves it where it is. Without a per-row cost to go by, latency is taken to grow
 * in proportion to the rows ahead. It never starts before answers are late, and rises only
 * while it binds, so a quiet spell does not leave it anywhere a burst would find it wrong.
 *
 * A late window cuts only once answers admitted after lateness was first seen are late too: a
 * stall (a collection, another process on the core) makes every request in flight late at
 * once, whatever the depth it queued at, and the ones admitted after it are on time again. The
 * cost model at 64 in flight on a quiet machine, where no limit is needed: cutting at first
 * sight, stall-late windows cut the limit from none to 29–58 rows in 4 runs of 10 (turning
 * away up to 3.6 % of a slice's requests, each for a second); waiting for later answers, in
 * none of 7. Lateness of an answer that only the limit's last raise let in (more rows ahead
 * than the limit allowed before it) cuts at once: the raise was the cause. The demo at 64 in
 * flight, where the limit binds, three alternating runs each: waiting for later answers after
 * a raise too, p99 98–124 ms against 87–90 ms; with this exception, 85–100 ms against 88–100
 * ms, and a fifth fewer refused. Lateness this limit lets pass (stalls, and a slowest no deeper
 * than a cut would leave) is TailCap's (tail-cap.ts), judged on the p99.
 */
export class AdmissionLimit extends RowCap {
  #answered = 0;
  /** The window's slowest answer: its latency, its rows ahead, and what a row cost then. */
  #slowestMs = 0;
  #slowestAhead = 0;
  #slowestRowMs = Number.NaN;
  #mostAhead = 0;
  /** Answers in the window admitted at or after `#since`: the ones it is judged on. */
  #judged = 0;
  /**
   * Answers admitted before this moment (the batcher's clock, ms) do not count: they were in
   * flight when a window was first seen late, or when the limit was last cut, so they carry what
   * made that window late, not what the queue does now. NaN: every answer counts.
   */
  #since = Number.NaN;
  /** The limit before its last raise, until a cut: rows ahead only that raise admitted start at it. */
  #raisedFrom = Infinity;

  /** No limit (Infinity) until an answer was late. */
  constructor(readonly targetMs: number) {
    super();
  }

  /**
   * A request admitted at `admittedAtMs` with `ahead` rows ahead of it was answered at
   * `answeredAtMs` (both on the batcher's clock); each row ahead cost about `rowMs` then (NaN:
   * not known).
   */
  answered(admittedAtMs: number, answeredAtMs: number, ahead: number, rowMs: number): void {
    const latencyMs = answeredAtMs - admittedAtMs;
    if (!Number.isFinite(latencyMs)) return;
    if (!(admittedAtMs < this.#since)) {
      this.#judged++;
      if (latencyMs > this.#slowestMs) {
        this.#slowestMs = latencyMs;
        this.#slowestAhead = ahead;
        this.#slowestRowMs = rowMs;
      }
      this.#mostAhead = Math.max(this.#mostAhead, ahead);
    }
    if (++this.#answered < WINDOW) return;
    if (this.#judged > 0) this.#judge(answeredAtMs);
    this.#answered = 0;
    this.#judged = 0;
    this.#slowestMs = 0;
    this.#mostAhead = 0;
    this.turnedAway = false;
  }

  /** A window with answers to judge it on ended at `nowMs`: cut, raise or hold. */
  #judge(nowMs: number): void {
    if (this.#slowestMs > this.targetMs) {
      // First sight of lateness: wait for answers admitted since, which say whether the queue
      // keeps them late (it is too deep) or not (a stall every request in flight sat through)
      // — unless the slowest queued deeper than the limit before its last raise allowed: then
      // the raise let it in, and is undone at once.
      if (Number.isNaN(this.#since) && this.#slowestAhead < this.#raisedFrom) {
        this.#since = nowMs;
        return;
      }
      const wanted = this.#wantedRows(this.targetMs);
      if (wanted < this.#slowestAhead) {
        this.capRows = Math.min(this.capRows, Math.max(1, wanted));
        this.#raisedFrom = Infinity;
        // Answers already in flight queued behind the old limit: the cut is judged on later ones.
        this.#since = nowMs;
      }
      return;
    }
    this.#since = Number.NaN;
    const raiseMs = RAISE_SHARE * this.targetMs;
    if (this.turnedAway && this.#slowestMs <= raiseMs) {
      this.#raisedFrom = this.capRows;
      this.capRows = Math.max(this.capRows + 1, Math.min(this.#wantedRows(raiseMs), this.capRows * MAX_GROWTH));
    }
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
