import type { BatchTimings, HandlerRequest } from '../core/request.js';

/** One model instance as the batcher sees it: runs one batch at a time. */
export interface BatchRunner {
  readonly id: string;
  readonly device: string;
  /**
   * True when a second `run` may be called while one runs: the runner holds it and starts it
   * the moment the first ends, without waiting for the caller (a worker thread's message
   * queue). The batcher then hands it the next full batch early, so the instance never waits
   * for the main thread between batches.
   */
  readonly queuesBatches?: boolean;
  run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }>;
}
