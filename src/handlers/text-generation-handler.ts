import { loadTokenizer } from './text-tokens.js';
import { tensorHandler } from './tensor-handler.js';
import type { Handler } from './types.js';

/**
 * Built-in handler for decoders with a key/value cache. Generation does not run through the
 * lifecycle: the server's generator (runtime/generator.ts) schedules it a decoding step at a
 * time, behind the OpenAI routes. This handler checks the tokenizer at load and lets KServe v2
 * tensors (one forward pass, the cache passed by the caller) through.
 */
export const textGenerationHandler: Handler = {
  ...tensorHandler,
  initialize(context) {
    loadTokenizer(context.tokenizer, 'text-generation');
  },
};
