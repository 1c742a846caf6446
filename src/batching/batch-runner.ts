import type { BatchTimings, HandlerRequest } from '../core/request.js';

/** One model instance as the batcher sees it: runs one batch at a time. */
export interface BatchRunner {
  readonly id: string;
  readonly device: string;
  run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }>;
}
