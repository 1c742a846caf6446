import { HandlerInvalidError } from '../core/errors.js';
import { traceNow } from '../core/trace-channels.js';
import { BUILTIN_HANDLERS } from './load.js';
import type { Handler, HandlerContext } from './types.js';
import type ort from 'onnxruntime-node';
import type { BatchTimings, HandlerRequest } from '../core/request.js';

export type ContextOptions = Omit<HandlerContext, 'builtins'>;

export function createHandlerContext(options: ContextOptions): HandlerContext {
  return { ...options, builtins: BUILTIN_HANDLERS };
}

/** One batch through the handler's lifecycle; exactly one response per request comes back. */
export async function runBatch(
  handler: Handler,
  requests: readonly HandlerRequest<ort.Tensor>[],
  context: HandlerContext,
): Promise<unknown[]> {
  return (await runBatchTimed(handler, requests, context)).responses;
}

/** runBatch, with the time each hook took (Triton's compute_input / infer / output). */
export async function runBatchTimed(
  handler: Handler,
  requests: readonly HandlerRequest<ort.Tensor>[],
  context: HandlerContext,
): Promise<{ responses: unknown[]; timings: BatchTimings }> {
  const startedAt = traceNow();
  const start = process.hrtime.bigint();
  const inputs = await handler.preprocess(requests, context);
  const inferStart = process.hrtime.bigint();
  const outputs = await handler.inference(inputs, context);
  const outputStart = process.hrtime.bigint();
  const responses = await handler.postprocess(outputs, requests, context);
  const end = process.hrtime.bigint();
  if (!Array.isArray(responses) || responses.length !== requests.length) {
    throw new HandlerInvalidError(
      `postprocess returned ${Array.isArray(responses) ? responses.length : typeof responses} responses for ${requests.length} requests`,
    );
  }
  return {
    responses,
    timings: {
      computeInputNs: Number(inferStart - start),
      computeInferNs: Number(outputStart - inferStart),
      computeOutputNs: Number(end - outputStart),
      startedAt,
    },
  };
}
