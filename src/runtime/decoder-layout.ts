import { HandlerInvalidError } from '../core/errors.js';
import type { TensorSpec } from '../core/tensors.js';

/**
 * The tensors of a decoder with a key/value cache, by the names Optimum and onnxruntime-genai
 * export: input_ids, attention_mask, position_ids (optional), past_key_values.{i}.key/value
 * [batch, kv_heads, past, head_dim] in; logits [batch, tokens, vocab] and present.{i}.key/value
 * [batch, kv_heads, past + tokens, head_dim] out; use_cache_branch for merged exports.
 */
export interface DecoderLayout {
  readonly idsType: 'int64' | 'int32';
  readonly hasMask: boolean;
  readonly hasPositions: boolean;
  readonly hasCacheBranch: boolean;
  /** Key/value heads: fewer than the query heads in a grouped-query (GQA) model. */
  readonly heads: number;
  readonly headDim: number;
  readonly layers: readonly { past: [string, string]; present: [string, string] }[];
  readonly logits: string;
  /** The export fixed its batch at one row: sequences run one at a time. */
  readonly singleRow: boolean;
}

const PAST = /^past_key_values\.(\d+)\.(key|value)$/;

/** Whether a model takes a key/value cache: any past_key_values.* input. */
export function takesCache(inputs: readonly TensorSpec[]): boolean {
  return inputs.some((input) => input.name.startsWith('past_key_values.'));
}

/** Whether an output is cache for the next step (present.*) rather than an answer. */
export function isPresent(output: TensorSpec): boolean {
  return output.name.startsWith('present.');
}

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
      if ((heads > 0 && h !== heads) || (headDim > 0 && d !== headDim)) {
        problems.push(`"${name}" is [batch, ${h}, past, ${d}], unlike the layers before it`);
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
  const batch = ids?.shape[0] ?? -1;
  if (batch > 1) problems.push(`"input_ids" has a fixed batch of ${batch}: export it with a dynamic batch axis`);
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
    singleRow: batch === 1,
  };
}

/** Bytes one token takes in the cache: a key and a value per layer, FP32. */
export function cacheBytesPerToken(layout: DecoderLayout): number {
  return layout.layers.length * 2 * layout.heads * layout.headDim * Float32Array.BYTES_PER_ELEMENT;
}
