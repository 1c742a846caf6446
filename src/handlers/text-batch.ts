import type ort from 'onnxruntime-node';
import { InferenceInputError } from '../core/errors.js';
import { modelConfigSchema, type TextOptions } from '../config/model-config.js';
import { validateField } from '../config/schema-kit.js';
import type { HandlerRequest } from '../core/request.js';
import type { TensorMap } from './ort-tensors.js';
import { checkTextInputs, encodeTexts, loadTokenizer, paddedBatch, type LoadedTokenizer } from './text-tokens.js';
import { tensorHandler } from './tensor-handler.js';
import type { Handler, HandlerContext } from './types.js';

/** The texts a batch held, so postprocess can read each one's rows and answer each request. */
export interface TextBatch {
  readonly textsPerRequest: readonly number[];
  /** Tokens of each text, in batch order. */
  readonly lengths: readonly number[];
}

const tokenizers = new WeakMap<HandlerContext, LoadedTokenizer>();
/** Keyed by the batch's requests array, which runBatch hands to preprocess and postprocess alike. */
const batches = new WeakMap<readonly HandlerRequest<ort.Tensor>[], TextBatch>();

/** The text handlers' initialize: the model's inputs and the tokenizer, checked at load. */
function initializeText(context: HandlerContext, handler: string): void {
  checkTextInputs(context.config.inputs, handler);
  tokenizerOf(context, handler);
}

function tokenizerOf(context: HandlerContext, handler = 'text-embedding'): LoadedTokenizer {
  let loaded = tokenizers.get(context);
  if (!loaded) {
    loaded = loadTokenizer(context.tokenizer, handler);
    tokenizers.set(context, loaded);
  }
  return loaded;
}

let defaultOptions: TextOptions | undefined;

export function textOptions({ config }: HandlerContext): TextOptions {
  defaultOptions ??= validateField(modelConfigSchema.fields.text, {}, 'text', []) as TextOptions;
  return config.text ?? defaultOptions;
}

/**
 * A batch's model inputs: its texts tokenized and padded together (the batch remembered for
 * postprocess), or, when every request carries v2 tensors, those tensors as they are.
 */
function prepareTexts(requests: readonly HandlerRequest<ort.Tensor>[], context: HandlerContext): TensorMap {
  if (requests.every((request) => request.kind === 'tensors')) {
    return tensorHandler.preprocess(requests, context) as TensorMap;
  }
  if (requests.some((request) => request.kind === 'tensors')) {
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
}

/** The batch prepareTexts remembered, once; undefined for a batch of v2 tensors. */
function takeTextBatch(requests: readonly HandlerRequest<ort.Tensor>[]): TextBatch | undefined {
  const batch = batches.get(requests);
  batches.delete(requests);
  return batch;
}

/** Each request's share of a row per text, with its tokens. */
function perRequest<Row>(batch: TextBatch, rows: readonly Row[]): { rows: Row[]; tokens: number }[] {
  let next = 0;
  return batch.textsPerRequest.map((count) => {
    const shared = { rows: rows.slice(next, next + count), tokens: 0 };
    for (let index = next; index < next + count; index++) shared.tokens += batch.lengths[index] as number;
    next += count;
    return shared;
  });
}

/** The tokens a text handler's answer says its texts came to; undefined for other answers. */
export function answeredTokens(response: unknown): number | undefined {
  if (typeof response !== 'object' || response === null) return undefined;
  const { tokens, embeddings, classes } = response as { tokens?: unknown; embeddings?: unknown; classes?: unknown };
  return typeof tokens === 'number' && (Array.isArray(embeddings) || Array.isArray(classes)) ? tokens : undefined;
}

/** The first output, the one the text handlers read, run alone. */
async function firstOutput(inputs: TensorMap, { session, config }: HandlerContext): Promise<TensorMap> {
  return session.run(inputs, [config.outputs[0]?.name as string]);
}

/**
 * A request's texts: those an OpenAI route read already, or a body as UTF-8 text, or JSON (a
 * string or a non-empty array of strings).
 */
function textsOf(request: HandlerRequest<ort.Tensor>): readonly string[] {
  if (request.kind === 'texts') return request.texts;
  if (request.kind !== 'body') throw new InferenceInputError('the request carries no text');
  const text = request.body.toString('utf8');
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

/**
 * A text handler: texts tokenized and padded by batch, the first output run, and `rowsOf`
 * making one row a text of it (`output`: that output, by name), shared out per request by
 * `answer`. A batch of v2 tensors passes through as the tensor handler's.
 */
export function textHandler<Row>(
  name: string,
  rowsOf: (output: ort.Tensor, batch: TextBatch, context: HandlerContext, outputName: string) => Row[],
  answer: (rows: Row[], tokens: number) => unknown,
): Handler {
  return {
    initialize: (context) => initializeText(context, name),
    preprocess: prepareTexts,
    inference: firstOutput,
    postprocess(outputs, requests, context) {
      const batch = takeTextBatch(requests);
      if (!batch) return tensorHandler.postprocess(outputs, requests, context);
      const outputName = context.config.outputs[0]?.name as string;
      const rows = rowsOf(outputs[outputName] as ort.Tensor, batch, context, outputName);
      return perRequest(batch, rows).map((share) => answer(share.rows, share.tokens));
    },
  };
}
