import { HandlerInvalidError } from '../core/errors.js';
import { topKOfRow, type Classification } from './image-classifier-handler.js';
import { textHandler, textOptions } from './text-batch.js';
import type { Handler } from './types.js';

/** What the handler answers a request of texts: the top classes of each text, and their tokens. */
export interface ClassesAnswer {
  readonly classes: Classification[][];
  readonly tokens: number;
}

/**
 * Built-in handler for text classifiers (a sequence-classification export: input_ids and its
 * mask in, logits [batch, classes] out): texts in as the text-embedding handler takes them,
 * each text's top_k `{label, score}` out, labels from labels_file, softmax as the config's
 * `text` section says. Requests that carry tensors (KServe v2) pass through.
 */
export const textClassifierHandler: Handler = textHandler(
  'text-classifier',
  (logits, batch, context, name) => {
    const [texts, classes] = logits.dims;
    if (logits.type !== 'float32' || logits.dims.length !== 2 || texts !== batch.lengths.length || !classes) {
      throw new HandlerInvalidError(
        `output "${name}" is ${logits.type} [${logits.dims.join(', ')}]; the text-classifier handler needs float32 [texts, classes]`,
      );
    }
    const data = logits.data as Float32Array;
    const options = textOptions(context);
    return batch.lengths.map((_, row) =>
      topKOfRow(data.subarray(row * classes, (row + 1) * classes), options, context.labels),
    );
  },
  (classes, tokens): ClassesAnswer => ({ classes, tokens }),
);
