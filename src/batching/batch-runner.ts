import type { HandlerRequest } from '../handlers/types.js';

/** Where a batch's time went, Triton's split: preprocess, forward pass, postprocess. */
export interface BatchTimings {
  readonly computeInputNs: number;
  readonly computeInferNs: number;
  readonly computeOutputNs: number;
}

/** One model instance as the batcher sees it: runs one batch at a time. */
export interface BatchRunner {
  readonly id: string;
  readonly device: string;
  run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }>;
}
