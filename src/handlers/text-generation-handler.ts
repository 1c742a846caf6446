import { tensorHandler } from './tensor-handler.js';
import type { Handler } from './types.js';

/**
 * Built-in handler for decoders with a key/value cache. Generation does not run through the
 * lifecycle: the server's generator (runtime/generator.ts) schedules it a decoding step at a
 * time behind the OpenAI routes, and checks the tokenizer and the cache interface at load
 * (repository/load-archive.ts). Through this handler KServe v2 tensors pass as they are: one
 * forward pass, the cache passed by the caller.
 */
export const textGenerationHandler: Handler = { ...tensorHandler, decodesSteps: true };
