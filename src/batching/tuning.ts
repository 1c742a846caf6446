/**
 * Every tuning constant of the batching policy, in one place, each with the test that pins its
 * behaviour and, where one does, the bench:accelerator figure it moves ("moves:"). Change one
 * only with those figures measured before and after, in one run (docs/benchmarks.md).
 */

/**
 * The share of `max_latency` auto plans its waits to end within: the rest is for what follows
 * the batcher's answer (encoding, writing) and what precedes its reading of the request.
 * Moves: bench:accelerator, auto at K = 64..128 (0 refusals where p99 ≤ max_latency);
 * test: adaptive.test.ts "never waits past max_latency".
 */
export const PLANNED_SHARE = 0.8;

/**
 * A wait is at least this long (ms), so rows expected "now" (a burst) get a moment to come.
 * Test: adaptive.test.ts "the wait rule" (a burst waits 0.01 ms).
 */
export const MIN_WAIT_MS = 0.01;

/**
 * Requests the arrival rate rests on: at least ARRIVAL_WINDOW, and ARRIVAL_WINDOW_BATCHES full
 * batches' worth, so that one batch's burst (a closed loop returning: at most max_batch_size
 * requests) never fills the window and reads as the rate — with a window of one burst, a
 * closed loop of 16 looked like a stream 30 µs apart and auto held every batch a timer's turn
 * (≥ 1 ms) after its last client was back. Short enough that a silence leaves the window soon.
 * Moves: bench:accelerator auto at K = 16 … 32; test: adaptive.test.ts "ArrivalRate".
 */
export const ARRIVAL_WINDOW = 16;
export const ARRIVAL_WINDOW_BATCHES = 2;

/**
 * Return delays (answer → the client's next request) the returning-rows estimate rests on; it
 * takes the longest of them. Test: adaptive.test.ts "ReturningRows: the return delay is the
 * longest of the last 16".
 */
export const RETURN_DELAYS = 16;

/**
 * Slack on the longest return delay (×, and + ms), so a row due exactly then still counts as
 * expected. Moves: bench:accelerator auto at K = 4..16; test: adaptive.test.ts "ReturningRows".
 */
export const RETURN_SLACK = 1.25;
export const RETURN_SLACK_MS = 0.05;

/**
 * The pace (actual ÷ predicted batch time) is an exponential average over about this many
 * batches, each ratio clamped to PACE_LIMIT× either way, so one pause cannot stop admission.
 * Test: adaptive.test.ts "Pace"; moves: bench:accelerator auto refusals at K = 128.
 */
export const PACE_BATCHES = 8;
export const PACE_LIMIT = 4;

/**
 * The hand-over (a batch's trip to a free worker thread) is averaged over about this many
 * batches; a batch for an instance about to free is sent HANDOVER_LEAD hand-overs before it is
 * expected free, so it starts as the running one ends. Moves: bench:accelerator delay 0 at
 * K = 32..128 on one instance; test: pipelining.test.ts.
 */
export const HANDOVER_BATCHES = 8;
export const HANDOVER_LEAD = 2;

/** Batches the cost line rests on; old ones leave, so the line follows a drifting cost. Test: adaptive.test.ts "OnlineCostFit … follows a drifting cost". */
export const COST_WINDOW = 256;
/** A size's weight in the line is its batches in the window, up to this many. Test: adaptive.test.ts "weights capped at eight batches". */
export const COST_FULL_SAY = 8;
/** Load-time timings kept as the line's prior. Test: adaptive.test.ts "keeps 32 seeds". */
export const COST_SEEDS = 32;
/** Sizes the line must rest on before it steers anything. Test: adaptive.test.ts "says why it is not trusted". */
export const MIN_DISTINCT_SIZES = 3;
/** Below this R² the line explains the timings too poorly to bet latency on. Test: adaptive.test.ts "says why it is not trusted". */
export const MIN_R2 = 0.8;
/** The line is worked out again after this many new batches, or at once for a new size. Test: adaptive.test.ts "refits after 8 batches". */
export const REFIT_EVERY = 8;

/** Shapes of requests whose learning is kept; the least recently used goes past it. Bounds memory only. */
export const LEARNED_SHAPES = 64;
