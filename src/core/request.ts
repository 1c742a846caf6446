import type { Tensor } from './tensors.js';

/**
 * One client request as its model's instance gets it, told apart by `kind`: checked tensors
 * (v2 REST, gRPC), a raw body (TorchServe's /predictions) or texts (OpenAI's embeddings). On
 * the server's thread its tensors are plain `Tensor`s; an instance hands its handler the same
 * request with onnxruntime tensors (`HandlerRequest<ort.Tensor>`).
 */
export type HandlerRequest<T = Tensor> = TensorsRequest<T> | BodyRequest | TextsRequest;

/** Set only on a pipeline's requests, which its steps pass on to the models they call. */
interface PipelineScope {
  /** When the request must be answered by (performance.now() milliseconds); undefined = no limit. */
  readonly deadline?: number;
  /** Aborts when the request's client goes away. */
  readonly signal?: AbortSignal;
}

export interface TensorsRequest<T = Tensor> extends PipelineScope {
  readonly kind: 'tensors';
  /** Keyed by input name, checked against the model's inputs once (protocol/prepared-request): trusted after. */
  readonly inputs: Readonly<Record<string, T>>;
  /** Their batch dimension, as the check counted it. */
  readonly rows: number;
  /**
   * True when nothing but this request holds the buffers of its tensors, so an instance in a
   * worker thread may take them (transfer) instead of a copy. False when a shadow version, the
   * prediction log or the response cache reads them after.
   */
  readonly movable: boolean;
}

export interface BodyRequest extends PipelineScope {
  readonly kind: 'body';
  /** As sent: image bytes, JSON, text. */
  readonly body: Buffer;
  readonly contentType: string | undefined;
  /** As for tensors: the body's buffer may be moved into a worker. */
  readonly movable: boolean;
}

export interface TextsRequest extends PipelineScope {
  readonly kind: 'texts';
  /** Texts to encode, one row each, read once by the route that took them. */
  readonly texts: readonly string[];
}

/** Where a batch's time went, Triton's split: preprocess, forward pass, postprocess. */
export interface BatchTimings {
  readonly computeInputNs: number;
  readonly computeInferNs: number;
  readonly computeOutputNs: number;
  /** When the instance began the batch (trace-channels.ts's clock); absent from runners that do not say. */
  readonly startedAt?: number;
}
