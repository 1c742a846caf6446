// The sweep bench:adaptive runs (adaptive.js), shared with the simulated batcher's own command
// line (simulated-batcher.js) so the quick check simulates what the benchmark measures.

/** The fixed delays auto is compared with, µs. */
export const STATIC_DELAYS_US = [0, 1000, 2000, 5000, 10_000];
/** The closed-loop levels, requests in flight. */
export const CONCURRENCY = [1, 4, 16, 64];
/** The open-loop rate, as a share of the best fixed delay's throughput at the highest concurrency. */
export const RATE_SHARE = 0.7;
/** Both models' `max_latency`, ms. */
export const MAX_LATENCY_MS = 100;
