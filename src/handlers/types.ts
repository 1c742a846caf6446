import type ort from 'onnxruntime-node';
import type { CompleteModelConfig } from '../config/model-config.js';
import type { HandlerRequest } from '../core/request.js';
import type { TensorMap } from './ort-tensors.js';

export interface HandlerContext {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly config: CompleteModelConfig;
  /** Lines of the config's labels_file, when it names one. */
  readonly labels?: readonly string[];
  /** The text of the config's text.tokenizer_file (a Hugging Face tokenizer.json), when it names one. */
  readonly tokenizer?: string;
  /** The session of the instance running this batch. */
  readonly session: ort.InferenceSession;
  /** The built-in handlers by name, for custom hooks that change one step and delegate the rest. */
  readonly builtins: Readonly<Record<BuiltinHandlerName, Handler>>;
}

/**
 * TorchServe's lifecycle, batched: each hook sees the whole batch. A custom handler module
 * exports any of these by name; the missing ones come from the built-in tensor handler.
 */
export interface Handler {
  /**
   * Set by the built-in text-generation handler: the server's generator drives the model a
   * decoding step at a time, so the instance is not warmed up on zeros (a decoder's cache
   * cannot be made up) nor paced by the simulated device as one pass. Not a hook.
   */
  readonly decodesSteps?: true;
  initialize?(context: HandlerContext): Promise<void> | void;
  preprocess(requests: readonly HandlerRequest<ort.Tensor>[], context: HandlerContext): Promise<TensorMap> | TensorMap;
  inference(inputs: TensorMap, context: HandlerContext): Promise<TensorMap> | TensorMap;
  /** Returns exactly one response per request, in order. */
  postprocess(
    outputs: TensorMap,
    requests: readonly HandlerRequest<ort.Tensor>[],
    context: HandlerContext,
  ): Promise<unknown[]> | unknown[];
}

export type BuiltinHandlerName =
  'tensor' | 'image-classifier' | 'text-embedding' | 'text-classifier' | 'text-generation';

export const HANDLER_HOOKS = ['initialize', 'preprocess', 'inference', 'postprocess'] as const;
