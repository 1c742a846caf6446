import { channel } from 'node:diagnostics_channel';

// node:diagnostics_channel channels for tracing a request through the batcher (undici's
// lib/core/diagnostics.js is the model): publishing costs a `hasSubscribers` check when nobody
// listens. Times are wall-clock milliseconds with a fraction (performance.timeOrigin +
// performance.now()), comparable across the main thread and the instances' worker threads.
// benchmarks/trace-batches.js subscribes to them to trace batch cycles.

/** A request joined the queue: `{ rows, at }`. */
export const requestQueued = channel('batchserve:request:queued');
/** A batch left for an instance: `{ instance, rows, at, queuedBehind }` (true: sent while another runs there). */
export const batchDispatched = channel('batchserve:batch:dispatched');
/** An instance answered a batch: `{ instance, rows, at, startedAt, computeMs }` (startedAt: when the instance began it). */
export const batchAnswered = channel('batchserve:batch:answered');
/** A v2 answer was handed to its socket: `{ at }`. */
export const responseWritten = channel('batchserve:response:written');

/** The clock every channel's `at` uses. */
export function traceNow(): number {
  return performance.timeOrigin + performance.now();
}
