import type ort from 'onnxruntime-node';
import { HandlerInvalidError, InferenceFailedError, InferenceInputError } from '../core/errors.js';
import { modelConfigSchema, type TextOptions } from '../config/model-config.js';
import { validateField } from '../config/schema-kit.js';
import type { HandlerRequest } from '../core/request.js';
import { checkTextInputs, encodeTexts, loadTokenizer, paddedBatch, type LoadedTokenizer } from './text-tokens.js';
import { tensorHandler } from './tensor-handler.js';
import type { Handler, HandlerContext } from './types.js';

/** What the handler answers a request of texts: one vector a text, in order, and their tokens. */
export interface EmbeddingAnswer {
  readonly embeddings: number[][];
  readonly tokens: number;
}

export function isEmbeddingAnswer(response: unknown): response is EmbeddingAnswer {
  return (
    typeof response === 'object' &&
    response !== null &&
    Array.isArray((response as EmbeddingAnswer).embeddings) &&
    typeof (response as EmbeddingAnswer).tokens === 'number'
  );
}

/** The texts a batch held, so postprocess can pool each one's tokens and answer each request. */
interface TextBatch {
  readonly textsPerRequest: readonly number[];
  readonly lengths: readonly number[];
}

const tokenizers = new WeakMap<HandlerContext, LoadedTokenizer>();
/** Keyed by the batch's requests array, which runBatch hands to preprocess and postprocess alike. */
const batches = new WeakMap<readonly HandlerRequest[], TextBatch>();

/**
 * Built-in handler for text encoders (a Hugging Face / Optimum export: input_ids and its
 * attention mask in, token states or a pooled vector out). A body is a text (text/plain), or
 * JSON: a string or an array of strings. Texts are tokenized with the archive's tokenizer.json,
 * the batch padded to its longest, and each text's vector pooled (mean or first token) and
 * normalized as the config's `text` section says. Requests that carry tensors (KServe v2) pass
 * through and get tensors back.
 */
export const textEmbeddingHandler: Handler = {
  initialize(context) {
    checkTextInputs(context.config.inputs);
    tokenizerOf(context);
  },
  preprocess(requests, context) {
    if (requests.every((request) => request.inputs)) return tensorHandler.preprocess(requests, context);
    if (requests.some((request) => request.inputs)) {
      throw new InferenceInputError('a batch cannot mix texts with v2 tensors');
    }
    const options = textOptions(context);
    const loaded = tokenizerOf(context);
    const perRequest = requests.map((request) => encodeTexts(textsOf(request), loaded, options.max_length));
    const rows = perRequest.flat();
    batches.set(requests, {
      textsPerRequest: perRequest.map((texts) => texts.length),
      lengths: rows.map((ids) => ids.length),
    });
    return paddedBatch(rows, loaded.padId, options, context.config.inputs);
  },
  async inference(inputs, { session, config }) {
    return session.run(inputs, [config.outputs[0]?.name as string]);
  },
  postprocess(outputs, requests, context) {
    const batch = batches.get(requests);
    if (!batch) return tensorHandler.postprocess(outputs, requests, context);
    batches.delete(requests);
    const name = context.config.outputs[0]?.name as string;
    const vectors = pooled(outputs[name] as ort.Tensor, batch, textOptions(context), name);
    let next = 0;
    return batch.textsPerRequest.map((count): EmbeddingAnswer => {
      const embeddings = vectors.slice(next, next + count);
      const tokens = batch.lengths.slice(next, next + count).reduce((a, b) => a + b, 0);
      next += count;
      return { embeddings, tokens };
    });
  },
};

function tokenizerOf(context: HandlerContext): LoadedTokenizer {
  let loaded = tokenizers.get(context);
  if (!loaded) {
    loaded = loadTokenizer(context.tokenizer);
    tokenizers.set(context, loaded);
  }
  return loaded;
}

let defaultOptions: TextOptions | undefined;

function textOptions({ config }: HandlerContext): TextOptions {
  defaultOptions ??= validateField(modelConfigSchema.fields.text, {}, 'text', []) as TextOptions;
  return config.text ?? defaultOptions;
}

/** A body's texts: itself as UTF-8 text, or JSON (a string or a non-empty array of strings). */
export function textsOf(request: HandlerRequest): string[] {
  const body = request.body;
  if (!body) throw new InferenceInputError('the request carries no text');
  const text = body.toString('utf8');
  if (request.contentType !== 'application/json') return [text];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new InferenceInputError('the body is not JSON; send a string or an array of strings (or text/plain)');
  }
  if (typeof parsed === 'string') return [parsed];
  if (Array.isArray(parsed) && parsed.length > 0 && parsed.every((item) => typeof item === 'string')) {
    return parsed;
  }
  throw new InferenceInputError('the JSON body must be a string or a non-empty array of strings');
}

/** One vector a text: its tokens' mean or its first token's, unit length when asked. */
function pooled(states: ort.Tensor, batch: TextBatch, options: TextOptions, name: string): number[][] {
  if (states.type !== 'float32') {
    throw new InferenceFailedError(`output "${name}" is ${states.type}; the text-embedding handler needs float32`);
  }
  const rank = options.pooling === 'none' ? 2 : 3;
  if (states.dims.length !== rank || states.dims[0] !== batch.lengths.length) {
    throw new HandlerInvalidError(
      `output "${name}" has dims [${states.dims.join(', ')}]; pooling ${options.pooling} needs [texts${rank === 3 ? ', tokens' : ''}, dim]`,
    );
  }
  const data = states.data as Float32Array;
  const dim = states.dims[rank - 1] as number;
  const width = rank === 3 ? (states.dims[1] as number) : 1;
  return batch.lengths.map((length, row) => {
    const vector = new Float64Array(dim);
    const first = row * width * dim;
    const tokens = options.pooling === 'mean' ? length : 1;
    for (let token = 0; token < tokens; token++) {
      const offset = first + token * dim;
      for (let index = 0; index < dim; index++)
        vector[index] = (vector[index] as number) + (data[offset + index] as number);
    }
    let scale = 1 / tokens;
    if (options.normalize) {
      let squares = 0;
      for (const value of vector) squares += value * value;
      if (squares > 0) scale = 1 / Math.sqrt(squares);
    }
    return Array.from(vector, (value) => Math.fround(value * scale));
  });
}
