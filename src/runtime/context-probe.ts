import ort from 'onnxruntime-node';
import { ModelLoadError } from '../core/errors.js';
import type { DecoderLayout } from './decoder-layout.js';

/** max_context when the config names none and the model holds at least this many positions. */
export const DEFAULT_MAX_CONTEXT = 2048;

/** The max_context a decoder is served with, and when the config asked more, what to say about it. */
export interface ServedContext {
  readonly maxContext: number;
  /** Set when the configured max_context is over what the model holds. */
  readonly over?: string;
}

/**
 * The max_context a decoder is served with, found by running its session (pack and load call
 * this; parsing the graph for its position table would hold a large model's protobuf in
 * memory): the configured one, or what the model holds when that is fewer (`over` says so:
 * pack refuses it, load serves the model's and warns, since archives packed before this check
 * carry the old default of 2048); without one, DEFAULT_MAX_CONTEXT or the positions the model
 * holds, whichever is fewer.
 */
export async function servedMaxContext(
  session: ort.InferenceSession,
  layout: DecoderLayout,
  configured: number | undefined,
): Promise<ServedContext> {
  const limit = configured ?? DEFAULT_MAX_CONTEXT;
  const held = await positionsHeld(session, layout, limit);
  if (configured === undefined || held >= configured) return { maxContext: held };
  return {
    maxContext: held,
    over: `generation.max_context ${configured} is over the ${held} positions this model holds; set it to ${held} or less, or leave it out`,
  };
}

/**
 * Positions the decoder can run, up to `limit`: one step at position limit − 1, and when that
 * fails (a learned position table or a RoPE table too short: onnxruntime's Gather refuses the
 * index) a binary search for the last position that runs, about log2(limit) more steps. A model
 * that computes its positions on the fly runs them all, and this is one step.
 */
async function positionsHeld(session: ort.InferenceSession, layout: DecoderLayout, limit: number): Promise<number> {
  if (await runsAt(session, layout, limit - 1)) return limit;
  // A model that cannot run its first position is broken, not short: onnxruntime's error says why.
  await stepAt(session, layout, 0).catch((error: unknown) => {
    const message = (error as Error).message.split('\n')[0] ?? '';
    throw new ModelLoadError(`the decoder fails a one-token step at its first position: ${message}`, { cause: error });
  });
  let runs = 0;
  let fails = limit - 1;
  while (fails - runs > 1) {
    const middle = Math.floor((runs + fails) / 2);
    if (await runsAt(session, layout, middle)) runs = middle;
    else fails = middle;
  }
  return runs + 1;
}

async function runsAt(session: ort.InferenceSession, layout: DecoderLayout, position: number): Promise<boolean> {
  return stepAt(session, layout, position).then(
    () => true,
    () => false,
  );
}

/**
 * One token at `position`, the mask all ones. A model that takes position_ids is told the
 * position beside a past of one zero token (its merged form then takes its with-past branch,
 * as at that point in a real answer); one that counts positions from its cache gets a past of
 * `position` zeros. Only the logits are fetched.
 */
async function stepAt(session: ort.InferenceSession, layout: DecoderLayout, position: number): Promise<void> {
  const past = layout.hasPositions ? 1 : position;
  const integers = (values: number[], dims: number[]): ort.Tensor =>
    layout.idsType === 'int32'
      ? new ort.Tensor('int32', Int32Array.from(values), dims)
      : new ort.Tensor('int64', BigInt64Array.from(values, BigInt), dims);
  const feeds: Record<string, ort.Tensor> = { input_ids: integers([1], [1, 1]) };
  if (layout.hasMask) feeds.attention_mask = integers(new Array<number>(past + 1).fill(1), [1, past + 1]);
  if (layout.hasPositions) feeds.position_ids = integers([position], [1, 1]);
  if (layout.hasCacheBranch) feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.of(past > 0 ? 1 : 0), [1]);
  // Every past tensor reads the same zeros.
  const zeros = new Float32Array(layout.heads * past * layout.headDim);
  for (const layer of layout.layers) {
    for (const name of layer.past)
      feeds[name] = new ort.Tensor('float32', zeros, [1, layout.heads, past, layout.headDim]);
  }
  await session.run(feeds, [layout.logits]);
}
