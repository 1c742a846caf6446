import { HandlerInvalidError } from '../errors.js';
import { BUILTIN_HANDLERS } from './load.js';
import type { Handler, HandlerContext, HandlerRequest } from './types.js';

export type ContextOptions = Omit<HandlerContext, 'builtins'>;

export function createHandlerContext(options: ContextOptions): HandlerContext {
  return { ...options, builtins: BUILTIN_HANDLERS };
}

/** One batch through the handler's lifecycle; exactly one response per request comes back. */
export async function runBatch(
  handler: Handler,
  requests: readonly HandlerRequest[],
  context: HandlerContext,
): Promise<unknown[]> {
  const inputs = await handler.preprocess(requests, context);
  const outputs = await handler.inference(inputs, context);
  const responses = await handler.postprocess(outputs, requests, context);
  if (!Array.isArray(responses) || responses.length !== requests.length) {
    throw new HandlerInvalidError(
      `postprocess returned ${Array.isArray(responses) ? responses.length : typeof responses} responses for ${requests.length} requests`,
    );
  }
  return responses;
}
