// The sweep bench:adaptive runs (adaptive.js), shared with the simulated batcher's own command
// line (simulated-batcher.js) so the quick check simulates what the benchmark measures, and with
// render.js, which labels the control.

/** The fixed delays auto is compared with, µs. */
export const STATIC_DELAYS_US = [0, 1000, 2000, 5000, 10_000];
/** The closed-loop levels, requests in flight. */
export const CONCURRENCY = [1, 4, 16, 64];
/** The open-loop rate, as a share of the best fixed delay's throughput at the highest concurrency. */
export const RATE_SHARE = 0.7;
/**
 * Delay 0 again, as a configuration of its own in every slice of bench:adaptive: its ratios to
 * delay 0 are what the same configuration measures against itself, in the same rounds and order
 * as auto's. At concurrency 1, where auto's line is not trusted and it runs as delay 0, the
 * eleventh pass measured auto at 0.85, 1.01 and 0.95 of delay 0: the aim of 0.95 sits inside
 * that spread.
 */
export const CONTROL = 'control';
/** Both models' `max_latency`, ms. */
export const MAX_LATENCY_MS = 100;
