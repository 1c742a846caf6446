import type { TensorMap } from './tensors.js';

/** One client request as a handler sees it. */
export interface HandlerRequest {
  /** Tensors decoded by the protocol layer (KServe v2), keyed by input name. */
  readonly inputs?: TensorMap;
  /** The raw body of a TorchServe-style request: image bytes, JSON, text. */
  readonly body?: Buffer;
  readonly contentType?: string;
}

/** Where a batch's time went, Triton's split: preprocess, forward pass, postprocess. */
export interface BatchTimings {
  readonly computeInputNs: number;
  readonly computeInferNs: number;
  readonly computeOutputNs: number;
}
