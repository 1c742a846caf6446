import { totalmem } from 'node:os';
import { modelConfigSchema, type GenerationOptions } from '../config/model-config.js';
import { validateField } from '../config/schema-kit.js';
import { InferenceInputError } from '../core/errors.js';

/** The generation section with every default decided: the same on the requests' side and the session's. */
export type ServedGenerationOptions = GenerationOptions & {
  readonly kv_cache_bytes: number;
  readonly prefix_cache_bytes: number;
  readonly max_context: number;
};

/** Without kv_cache_bytes, the caches may take this share of the machine's memory. */
const DEFAULT_CACHE_SHARE = 1 / 4;
/** Without prefix_cache_bytes, cached prefixes may take this share of kv_cache_bytes. */
const DEFAULT_PREFIX_SHARE = 1 / 4;

/** `maxContext` is what running the model decided (context-probe.ts servedMaxContext). */
export function servedGenerationOptions(
  generation: GenerationOptions | undefined,
  maxContext: number,
): ServedGenerationOptions {
  const options =
    generation ?? (validateField(modelConfigSchema.fields.generation, {}, 'generation', []) as GenerationOptions);
  const cacheBytes = options.kv_cache_bytes ?? Math.floor(totalmem() * DEFAULT_CACHE_SHARE);
  return {
    ...options,
    kv_cache_bytes: cacheBytes,
    prefix_cache_bytes: options.prefix_cache_bytes ?? Math.floor(cacheBytes * DEFAULT_PREFIX_SHARE),
    max_context: maxContext,
  };
}

/** Why a sequence could never run, whatever else runs: its prompt and max_tokens against the limits. */
export function sequenceRefusal(
  options: ServedGenerationOptions,
  bytesPerToken: number,
  promptTokens: number,
  maxTokens: number,
): InferenceInputError | undefined {
  if (promptTokens === 0) return new InferenceInputError('the prompt has no tokens');
  const reserved = promptTokens + maxTokens;
  if (reserved > options.max_context) {
    return new InferenceInputError(
      `the prompt's ${promptTokens} tokens and max_tokens ${maxTokens} come to ${reserved}, over this model's max_context of ${options.max_context}`,
    );
  }
  if (reserved > options.max_total_tokens) {
    return new InferenceInputError(
      `the prompt and max_tokens come to ${reserved} tokens, over max_total_tokens ${options.max_total_tokens}`,
    );
  }
  const bytes = reserved * bytesPerToken;
  if (bytes > options.kv_cache_bytes) {
    return new InferenceInputError(
      `the prompt and max_tokens come to ${reserved} tokens, ${bytes} bytes of key/value cache, over generation.kv_cache_bytes ${options.kv_cache_bytes}`,
    );
  }
  return undefined;
}
