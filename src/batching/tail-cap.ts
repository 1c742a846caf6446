import { plannedMs } from './admission-limit.js';
import { RowCap } from './row-cap.js';

/** Answers the cap is judged on at a time: their p99 is the third slowest. */
const HORIZON = 200;
/** The index of the p99 among HORIZON latencies sorted. */
const P99_AT = Math.floor(0.99 * (HORIZON - 1));
/** A cap that turned requests away rises at most this many times at once. */
const MAX_GROWTH = 1.25;
/**
 * The cap rises only while the p99 is under this share of the planned part of max_latency. Raised
 * whenever the p99 was under the planned part itself, it went from 9 rows to 13 in two horizons
 * and was past the budget again in the third (the demo at 16 in flight): 200 answers' p99 is
 * too noisy to aim at the edge.
 */
const RAISE_SHARE = 0.75;

/**
 * The p99 half of `max_queue_delay: auto`'s latency budget: a cap on the rows ahead of a
 * request (its own included), set from the 99th percentile of how long answered requests took,
 * admission to answer, over the last HORIZON answers. AdmissionLimit judges every 32 answers by
 * their slowest and lets lateness pass that the queue's depth does not explain (a stall every
 * request in flight sat through, or a slowest with no more rows ahead than a cut would leave).
 * Where such stalls are routine — batches stretched by the main thread's HTTP work on the core
 * the instance shares — a window is late now and then (5 of about 35 in one traced 8 s run),
 * never two in a row, and that limit never cuts while the p99 sits past the budget: the demo at
 * 16 in flight, six runs, p50 42–56 ms and p99 77–152 ms with almost nothing refused
 * (docs/benchmarks.md, ninth pass). Fewer rows in flight still shorten those stretched batches
 * and what waits behind them, so the cap counts every answer:
 *
 * - a horizon whose p99 is past `max_latency` scales the most rows any of its answers went
 *   through (rows ahead and its own) by the planned share of max_latency ÷ that p99, and only
 *   answers admitted after that judge the cut;
 * - a horizon in which the cap turned requests away, with a p99 under RAISE_SHARE of the
 *   planned share, raises it the same way towards that mark, by a row at least and at most a
 *   quarter at once;
 * - in between it holds.
 *
 * It starts only once the p99 is past the budget, so where the budget holds it never binds.
 *
 * Where turning requests away costs little throughput (`cheapToCut`: the line says batching
 * gains at most 2×, c ≤ m, so a shorter queue runs almost as many rows a second), a horizon
 * cuts once its p99 passes the planned share instead of max_latency itself, keeping a margin
 * for the next horizon's stalls. On the simulated noisy core (benchmarks/adaptive-feasibility.js,
 * the demo's line), cutting only past the budget left auto's p99 at 101–187 ms at 10 of the 13
 * levels where a fixed delay behind a fixed cap met both aims; with the margin auto met both
 * at three more of them (p99 99, 115 and 134 ms became 95, 92 and 88), 53 levels of 90 in all
 * instead of 50. Where batching pays (the cost model, c ≈ 6 m) the same margin cost up to a
 * quarter of the throughput at some levels (a cap of a few rows is a batch of a few rows), so
 * the cap waits for the budget itself.
 */
export class TailCap extends RowCap {
  readonly #latencies = new Float64Array(HORIZON);
  #count = 0;
  #mostThrough = 0;
  /** Answers admitted before this moment (the batcher's clock, ms) do not count: they queued behind the old cap. */
  #since = -Infinity;

  /** Whether turning requests away costs little throughput (c ≤ m): then a p99 past the planned share cuts. */
  cheapToCut = false;
  /** max_latency, ms. */
  readonly budgetMs: number;
  /** The share of it auto plans answers in, ms (admission-limit.ts). */
  readonly targetMs: number;

  /** No cap (Infinity) until a p99 was past `maxLatencyUs`. */
  constructor(maxLatencyUs: number) {
    super();
    this.budgetMs = maxLatencyUs / 1000;
    this.targetMs = plannedMs(maxLatencyUs);
  }

  /** A request of `rows` admitted at `admittedAtMs` with `ahead` rows ahead was answered at `answeredAtMs`. */
  answered(admittedAtMs: number, answeredAtMs: number, ahead: number, rows: number): void {
    const latencyMs = answeredAtMs - admittedAtMs;
    if (!Number.isFinite(latencyMs) || admittedAtMs < this.#since) return;
    this.#latencies[this.#count++] = latencyMs;
    if (ahead + rows > this.#mostThrough) this.#mostThrough = ahead + rows;
    if (this.#count < HORIZON) return;
    const p99 = this.#latencies.sort()[P99_AT] as number;
    if (p99 > (this.cheapToCut ? this.targetMs : this.budgetMs)) {
      this.capRows = Math.max(1, Math.min(this.capRows, Math.floor((this.#mostThrough * this.targetMs) / p99)));
      this.#since = answeredAtMs;
    } else if (this.turnedAway && p99 < RAISE_SHARE * this.targetMs) {
      const room = Math.floor((this.capRows * RAISE_SHARE * this.targetMs) / Math.max(p99, 1e-3));
      this.capRows = Math.max(this.capRows + 1, Math.min(room, Math.ceil(this.capRows * MAX_GROWTH)));
    }
    this.#count = 0;
    this.#mostThrough = 0;
    this.turnedAway = false;
  }
}
