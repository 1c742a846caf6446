import type ort from 'onnxruntime-node';
import { HandlerInvalidError, InferenceFailedError } from '../core/errors.js';
import type { TextOptions } from '../config/model-config.js';
import { textHandler, textOptions, type TextBatch } from './text-batch.js';
import type { Handler } from './types.js';

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

/**
 * Built-in handler for text encoders (a Hugging Face / Optimum export: input_ids and its
 * attention mask in, token states or a pooled vector out). A body is a text (text/plain), or
 * JSON: a string or an array of strings. Texts are tokenized with the archive's tokenizer.json,
 * the batch padded to its longest, and each text's vector pooled (mean or first token) and
 * normalized as the config's `text` section says. Requests that carry tensors (KServe v2) pass
 * through and get tensors back.
 */
export const textEmbeddingHandler: Handler = textHandler(
  'text-embedding',
  (states, batch, context, name) => pooled(states, batch, textOptions(context), name),
  (embeddings, tokens): EmbeddingAnswer => ({ embeddings, tokens }),
);

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
