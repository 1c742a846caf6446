import type ort from 'onnxruntime-node';
import { BatchCache, type StepTokens } from './batch-cache.js';
import type { DecoderLayout } from './decoder-layout.js';

/**
 * How a decoder's sequences share a step. `padded`: any rows together, left-padded, with holes
 * where a shorter row fed fewer tokens. `equal-length`: only rows holding the same number of
 * tokens, with no padding at all: a model that takes no position_ids numbers positions from
 * the cache's width, so padding would shift them and change its answers.
 */
export type DecoderBatching = 'padded' | 'equal-length';

export interface PaddingVerdict {
  readonly batching: DecoderBatching;
  /** Why, in a few words, for logs and `inspect`. */
  readonly reason: string;
}

/** How far a padded row's logits may be from the same row alone: float noise, not a shifted position. */
const TOLERANCE = 1e-3;

/**
 * Runs a short sequence alone and the same sequence padded three ways (left padding in a
 * prompt, padding in the cache, a hole between cache and token) and compares the logits: a
 * decoder whose answers padding changes is batched `equal-length`. Run once per load; a few
 * tokens, so it costs a few small passes.
 */
export async function probePadding(session: ort.InferenceSession, layout: DecoderLayout): Promise<PaddingVerdict> {
  if (!layout.hasMask) return { batching: 'equal-length', reason: 'the model takes no attention_mask' };
  if (layout.singleRow) return { batching: 'equal-length', reason: 'the model takes one row a pass' };
  const run = async (cache: BatchCache, tokens: readonly StepTokens[]): Promise<Float32Array[]> => {
    const outputs = await session.run(cache.feeds(tokens), cache.fetches());
    cache.advance(outputs, tokens);
    const logits = outputs[layout.logits] as ort.Tensor;
    const [, fed = 1, vocab = 0] = logits.dims;
    const data = logits.data as Float32Array;
    return tokens.map((_, r) => data.subarray((r * fed + fed - 1) * vocab, (r * fed + fed) * vocab));
  };
  // Token ids 1-5, which every vocabulary has.
  const alone = BatchCache.empty(layout, 1);
  const [prompt] = await run(alone, [[1, 2, 3]]);
  const [next] = await run(alone, [[4]]);
  const [afterHole] = await run(alone, [[5]]);

  const padded = BatchCache.empty(layout, 2);
  // Row 1's prompt is left-padded by the longer row 0.
  const [, promptPadded] = await run(padded, [
    [5, 4, 1, 2, 3],
    [1, 2, 3],
  ]);
  // Row 1 now has padding in its cache.
  const [, nextPadded] = await run(padded, [[1], [4]]);
  // Row 1 decodes beside a joining row's prompt: a hole between its cache and its token.
  const joined = BatchCache.pack(layout, [
    { cache: padded, rows: [1] },
    { cache: BatchCache.empty(layout, 1), rows: [0] },
  ]);
  const [holed] = await run(joined, [[5], [3, 1, 4]]);

  const checks: [string, Float32Array, Float32Array | undefined][] = [
    ['left padding in a prompt', prompt as Float32Array, promptPadded],
    ['padding in the cache', next as Float32Array, nextPadded],
    ['a hole before a token', afterHole as Float32Array, holed],
  ];
  for (const [what, want, got] of checks) {
    if (!got || !close(want, got)) {
      const why = layout.hasPositions ? '' : ' (it takes no position_ids: positions follow the cache width)';
      return { batching: 'equal-length', reason: `${what} changes its logits${why}` };
    }
  }
  return {
    batching: 'padded',
    reason: layout.hasPositions
      ? 'padding leaves its logits unchanged (positions from position_ids, padding masked)'
      : 'padding leaves its logits unchanged (padding masked; it takes no positions)',
  };
}

function close(want: Float32Array, got: Float32Array): boolean {
  let scale = 1;
  for (const value of want) scale = Math.max(scale, Math.abs(value));
  for (let i = 0; i < want.length; i++) {
    const difference = Math.abs((want[i] as number) - (got[i] as number));
    // NaN fails here too: a fully masked row some exports turn into NaN.
    if (!(difference <= TOLERANCE * scale)) return false;
  }
  return want.length === got.length && want.length > 0;
}
