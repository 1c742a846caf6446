import type ort from 'onnxruntime-node';
import type { BatchRunner, BatchTimings } from '../batching/batch-runner.js';
import { runBatchTimed } from '../handlers/pipeline.js';
import type { Handler, HandlerContext, HandlerRequest } from '../handlers/types.js';

/** One onnxruntime session on one device, running one batch at a time through the handler. */
export class ModelInstance implements BatchRunner {
  constructor(
    readonly id: string,
    readonly device: string,
    readonly session: ort.InferenceSession,
    private readonly handler: Handler,
    private readonly context: HandlerContext,
  ) {}

  run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    return runBatchTimed(this.handler, requests, this.context);
  }

  release(): Promise<void> {
    return this.session.release();
  }
}
