import type { TensorMap } from './tensors.js';

/** One client request as a handler sees it. */
export interface HandlerRequest {
  /**
   * Tensors decoded by the protocol layer (KServe v2), keyed by input name, already checked
   * against the model's inputs (see protocol/prepared-request): handlers trust them.
   */
  readonly inputs?: TensorMap;
  /** The rows of `inputs` (their batch dimension), as the protocol layer counted them. */
  readonly rows?: number;
  /** The raw body of a TorchServe-style request: image bytes, JSON, text. */
  readonly body?: Buffer;
  readonly contentType?: string;
  /**
   * True when nothing but this request holds the buffers of its inputs and body, so an
   * instance in a worker thread may take them (transfer) instead of a copy. False when a
   * shadow version reads the same tensors.
   */
  readonly movable?: boolean;
  /**
   * Set only for a pipeline's requests (the steps pass them on): when the request must be
   * answered by (performance.now() milliseconds; undefined = no limit), and the signal that
   * aborts when its client goes away.
   */
  readonly deadline?: number;
  readonly signal?: AbortSignal;
}

/** Where a batch's time went, Triton's split: preprocess, forward pass, postprocess. */
export interface BatchTimings {
  readonly computeInputNs: number;
  readonly computeInferNs: number;
  readonly computeOutputNs: number;
  /** When the instance began the batch (trace-channels.ts's clock); absent from runners that do not say. */
  readonly startedAt?: number;
}
