import ort from 'onnxruntime-node';
import { HandlerInvalidError } from '../core/errors.js';
import type { TensorSpec } from '../core/tensors.js';

/**
 * The tensors of a decoder with a key/value cache, by the names Optimum and onnxruntime-genai
 * export: input_ids, attention_mask, position_ids (optional), past_key_values.{i}.key/value
 * [batch, heads, past, head_dim] in; logits [batch, tokens, vocab] and present.{i}.key/value
 * [batch, heads, past + tokens, head_dim] out; use_cache_branch for merged exports.
 */
export interface DecoderLayout {
  readonly idsType: 'int64' | 'int32';
  readonly hasMask: boolean;
  readonly hasPositions: boolean;
  readonly hasCacheBranch: boolean;
  readonly heads: number;
  readonly headDim: number;
  readonly layers: readonly { past: [string, string]; present: [string, string] }[];
  readonly logits: string;
}

/** One sequence's cache: per layer, keys and values [heads, length, head_dim]. */
export interface SequenceCache {
  readonly length: number;
  readonly keys: readonly Float32Array[];
  readonly values: readonly Float32Array[];
}

export const EMPTY_CACHE = (layers: number): SequenceCache => ({
  length: 0,
  keys: Array.from({ length: layers }, () => new Float32Array(0)),
  values: Array.from({ length: layers }, () => new Float32Array(0)),
});

/** A step's row: the tokens it feeds (its prompt, or its last token) after its cache. */
export interface StepRow {
  readonly ids: readonly number[];
  readonly cache: SequenceCache;
}

export interface StepResult {
  /** Per row: the logits of its last token. */
  readonly logits: Float32Array[];
  /** Per row: its cache with the fed tokens added. */
  readonly caches: SequenceCache[];
}

const PAST = /^past_key_values\.(\d+)\.(key|value)$/;

/** Reads the layout from the model's tensors; what a scheduler cannot feed is refused here. */
export function decoderLayout(inputs: readonly TensorSpec[], outputs: readonly TensorSpec[]): DecoderLayout {
  const problems: string[] = [];
  const byName = new Map(inputs.map((input) => [input.name, input]));
  const ids = byName.get('input_ids');
  if (!ids || (ids.datatype !== 'INT64' && ids.datatype !== 'INT32')) {
    problems.push('needs an INT64 or INT32 input "input_ids" [batch, tokens]');
  }
  const layerCount = inputs.filter((input) => PAST.test(input.name)).length / 2;
  let heads = 0;
  let headDim = 0;
  const layers: DecoderLayout['layers'][number][] = [];
  for (let layer = 0; layer < layerCount; layer++) {
    const names: [string, string] = [`past_key_values.${layer}.key`, `past_key_values.${layer}.value`];
    const present: [string, string] = [`present.${layer}.key`, `present.${layer}.value`];
    for (const name of names) {
      const spec = byName.get(name);
      const [, h, , d] = spec?.shape ?? [];
      if (!spec || spec.datatype !== 'FP32' || spec.shape.length !== 4 || !(h && h > 0) || !(d && d > 0)) {
        problems.push(`needs "${name}" FP32 [batch, heads, past, head_dim] with fixed heads and head_dim`);
        continue;
      }
      heads = h;
      headDim = d;
    }
    for (const name of present) {
      if (!outputs.some((output) => output.name === name)) problems.push(`needs an output "${name}"`);
    }
    layers.push({ past: names, present });
  }
  if (layerCount === 0 || !Number.isInteger(layerCount)) {
    problems.push('needs past_key_values.{layer}.key and .value inputs (a decoder exported with its cache)');
  }
  if (!outputs.some((output) => output.name === 'logits')) problems.push('needs an output "logits"');
  const known = new Set(['input_ids', 'attention_mask', 'position_ids', 'use_cache_branch']);
  for (const input of inputs) {
    if (!known.has(input.name) && !PAST.test(input.name)) problems.push(`cannot feed input "${input.name}"`);
  }
  if (problems.length > 0) throw new HandlerInvalidError(`the text-generation handler: ${problems.join('; ')}`);
  return {
    idsType: ids?.datatype === 'INT32' ? 'int32' : 'int64',
    hasMask: byName.has('attention_mask'),
    hasPositions: byName.has('position_ids'),
    hasCacheBranch: byName.has('use_cache_branch'),
    heads,
    headDim,
    layers,
    logits: 'logits',
  };
}

function integers(type: 'int64' | 'int32', values: ArrayLike<number>, dims: number[]): ort.Tensor {
  return type === 'int64'
    ? new ort.Tensor(
        'int64',
        BigInt64Array.from(values, (value) => BigInt(value)),
        dims,
      )
    : new ort.Tensor('int32', Int32Array.from(values), dims);
}

/**
 * One forward pass over several sequences at once. Each row's cache and its new tokens are
 * laid out left-padded ([cache pad | cache | tokens pad | tokens]) with the attention mask
 * saying which positions are real, so rows of any cache and prompt length share one pass;
 * each row's cache comes back with its real positions only.
 */
export async function runDecoderStep(
  session: ort.InferenceSession,
  layout: DecoderLayout,
  rows: readonly StepRow[],
): Promise<StepResult> {
  const batch = rows.length;
  const past = rows.reduce((most, row) => Math.max(most, row.cache.length), 0);
  const fed = rows.reduce((most, row) => Math.max(most, row.ids.length), 1);
  const total = past + fed;
  const { heads, headDim } = layout;
  const ids = new Float64Array(batch * fed);
  const mask = new Float64Array(batch * total);
  const positions = new Float64Array(batch * fed);
  rows.forEach((row, r) => {
    const { length } = row.cache;
    for (let t = past - length; t < past; t++) mask[r * total + t] = 1;
    row.ids.forEach((id, k) => {
      const at = fed - row.ids.length + k;
      ids[r * fed + at] = id;
      positions[r * fed + at] = length + k;
      mask[r * total + past + at] = 1;
    });
  });
  const feeds: Record<string, ort.Tensor> = { input_ids: integers(layout.idsType, ids, [batch, fed]) };
  if (layout.hasMask) feeds.attention_mask = integers(layout.idsType, mask, [batch, total]);
  if (layout.hasPositions) feeds.position_ids = integers(layout.idsType, positions, [batch, fed]);
  if (layout.hasCacheBranch) feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.of(past > 0 ? 1 : 0), [1]);
  const block = past * headDim;
  layout.layers.forEach((layer, index) => {
    layer.past.forEach((name, which) => {
      const data = new Float32Array(batch * heads * block);
      rows.forEach((row, r) => {
        const cache = (which === 0 ? row.cache.keys : row.cache.values)[index] as Float32Array;
        const rowBlock = row.cache.length * headDim;
        for (let h = 0; h < heads; h++) {
          data.set(cache.subarray(h * rowBlock, (h + 1) * rowBlock), (r * heads + h) * block + block - rowBlock);
        }
      });
      feeds[name] = new ort.Tensor('float32', data, [batch, heads, past, headDim]);
    });
  });
  const outputs = await session.run(feeds, [layout.logits, ...layout.layers.flatMap((layer) => layer.present)]);
  const logitsTensor = outputs[layout.logits] as ort.Tensor;
  const vocab = logitsTensor.dims[2] as number;
  const logitsData = logitsTensor.data as Float32Array;
  const logits = rows.map((_, r) => logitsData.slice((r * fed + fed - 1) * vocab, (r * fed + fed) * vocab));
  const caches = rows.map((row, r): SequenceCache => {
    const length = row.cache.length + row.ids.length;
    const kept = (name: string): Float32Array => {
      const present = outputs[name]?.data as Float32Array;
      const out = new Float32Array(heads * length * headDim);
      const cacheBlock = row.cache.length * headDim;
      const newBlock = row.ids.length * headDim;
      for (let h = 0; h < heads; h++) {
        const base = (r * heads + h) * total * headDim;
        out.set(present.subarray(base + block - cacheBlock, base + block), h * length * headDim);
        out.set(
          present.subarray(base + total * headDim - newBlock, base + total * headDim),
          h * length * headDim + cacheBlock,
        );
      }
      return out;
    };
    return {
      length,
      keys: layout.layers.map((layer) => kept(layer.present[0])),
      values: layout.layers.map((layer) => kept(layer.present[1])),
    };
  });
  return { logits, caches };
}
