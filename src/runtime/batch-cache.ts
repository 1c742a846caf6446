import ort from 'onnxruntime-node';
import type { DecoderLayout } from './decoder-layout.js';
import type { RowCache } from './prefix-cache.js';

/** What a padded position feeds: any id the model has; its mask says it is not there. */
const PAD_ID = 0;
/** A batch is repacked once what a repack frees passes 1/SLACK_SHARE of its real positions. */
const SLACK_SHARE = 8;

/** One row's part of a step: the tokens it feeds after its cache (its prompt, or its last token). */
export type StepTokens = readonly number[];

/**
 * The key/value cache of one running batch, as the model left it: per layer a key and a value
 * tensor [rows, heads, width, head_dim]. A step's `present.*` outputs become the next step's
 * `past_key_values.*` as they are, with no copy; `pack` copies rows only when the batch's rows
 * change (a sequence joins or leaves).
 *
 * Rows of different lengths share the batch left-padded, and a step whose rows feed different
 * numbers of tokens right-aligns them, which leaves holes after a shorter row's cache; the
 * attention mask says which positions hold real tokens and `position_ids` counts real tokens
 * only, so for a model that takes both, padding changes nothing (padding-probe.ts checks).
 */
export class BatchCache {
  /** Per layer, key then value: the data of [rows, heads, width, head_dim]. */
  #past: Float32Array[];
  /** rows × width: 1 where a position holds a real token. */
  #mask: Uint8Array;
  /** The mask after the step whose feeds were built last. */
  #nextMask: Uint8Array | undefined;
  #fed = 0;

  private constructor(
    readonly layout: DecoderLayout,
    readonly rows: number,
    /** Positions each row holds, padding included. */
    public width: number,
    past: Float32Array[],
    mask: Uint8Array,
    /** Real tokens each row holds. */
    readonly lengths: Int32Array,
  ) {
    this.#past = past;
    this.#mask = mask;
  }

  /** A batch of `rows` sequences that have not run yet. */
  static empty(layout: DecoderLayout, rows: number): BatchCache {
    const past = Array.from({ length: layout.layers.length * 2 }, () => new Float32Array(0));
    return new BatchCache(layout, rows, 0, past, new Uint8Array(0), new Int32Array(rows));
  }

  /** A batch of sequences that start from cached prefixes (a row of length 0 has none), right-aligned. */
  static fromRows(layout: DecoderLayout, rows: readonly RowCache[]): BatchCache {
    const lengths = Int32Array.from(rows, (row) => row.length);
    const width = lengths.reduce((most, length) => Math.max(most, length), 0);
    if (width === 0) return BatchCache.empty(layout, rows.length);
    const { heads, headDim } = layout;
    const past = Array.from(
      { length: layout.layers.length * 2 },
      () => new Float32Array(rows.length * heads * width * headDim),
    );
    const mask = new Uint8Array(rows.length * width);
    rows.forEach(({ length, tensors }, r) => {
      if (length === 0) return;
      mask.fill(1, r * width + width - length, (r + 1) * width);
      past.forEach((target, tensor) => {
        const source = tensors[tensor] as Float32Array;
        for (let h = 0; h < heads; h++) {
          target.set(
            source.subarray(h * length * headDim, (h + 1) * length * headDim),
            ((r * heads + h) * width + width - length) * headDim,
          );
        }
      });
    });
    return new BatchCache(layout, rows.length, width, past, mask, lengths);
  }

  /** Bytes its tensors hold, padding included. */
  get bytes(): number {
    return this.#past.reduce((sum, data) => sum + data.byteLength, 0);
  }

  /**
   * Whether a repack would free more than a share of the positions real tokens hold: holes a
   * shared prompt step left, padding every row has. A step costs more the wider the cache
   * (attention, and the copies the graph makes of it), every step; a repack copies it once.
   */
  get worthRepacking(): boolean {
    let longest = 0;
    let real = 0;
    for (const length of this.lengths) {
      longest = Math.max(longest, length);
      real += length;
    }
    return this.rows * (this.width - longest) * SLACK_SHARE > real;
  }

  /** Every row holds the same tokens at the same positions: no padding, no holes. */
  get dense(): boolean {
    return this.lengths.every((length) => length === this.width);
  }

  /**
   * The inputs of a step in which row r feeds tokens[r], right-aligned in as many columns as
   * the longest feeds; call `advance` with its outputs.
   */
  feeds(tokens: readonly StepTokens[]): Record<string, ort.Tensor> {
    const { layout, rows, width } = this;
    let fed = 1;
    for (const row of tokens) if (row.length > fed) fed = row.length;
    const total = width + fed;
    const ids = new Array<number>(rows * fed).fill(PAD_ID);
    const positions = new Array<number>(rows * fed).fill(0);
    const mask = new Uint8Array(rows * total);
    for (let r = 0; r < rows; r++) {
      mask.set(this.#mask.subarray(r * width, (r + 1) * width), r * total);
      const row = tokens[r] as StepTokens;
      const start = fed - row.length;
      const length = this.lengths[r] as number;
      for (let k = 0; k < row.length; k++) {
        ids[r * fed + start + k] = row[k] as number;
        positions[r * fed + start + k] = length + k;
        mask[r * total + width + start + k] = 1;
      }
    }
    this.#nextMask = mask;
    this.#fed = fed;
    const feeds: Record<string, ort.Tensor> = { input_ids: integers(layout.idsType, ids, [rows, fed]) };
    if (layout.hasMask) feeds.attention_mask = integers(layout.idsType, mask, [rows, total]);
    if (layout.hasPositions) feeds.position_ids = integers(layout.idsType, positions, [rows, fed]);
    if (layout.hasCacheBranch) feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.of(width > 0 ? 1 : 0), [1]);
    const dims = [rows, layout.heads, width, layout.headDim];
    layout.layers.forEach((layer, index) => {
      feeds[layer.past[0]] = new ort.Tensor('float32', this.#past[2 * index] as Float32Array, dims);
      feeds[layer.past[1]] = new ort.Tensor('float32', this.#past[2 * index + 1] as Float32Array, dims);
    });
    return feeds;
  }

  /**
   * A copy of row `row`'s real positions `from` to `to` (counted in real tokens, in order): per
   * layer a key and a value, each [heads, to − from, head_dim].
   */
  slice(row: number, from: number, to: number): Float32Array[] {
    const { heads, headDim } = this.layout;
    const count = to - from;
    const columns: number[] = [];
    for (const [start, run] of realRuns(this.#mask, row, this.width)) {
      for (let t = start; t < start + run; t++) columns.push(t);
    }
    return this.#past.map((source) => {
      const target = new Float32Array(heads * count * headDim);
      for (let h = 0; h < heads; h++) {
        for (let k = 0; k < count; k++) {
          const at = ((row * heads + h) * this.width + (columns[from + k] as number)) * headDim;
          target.set(source.subarray(at, at + headDim), (h * count + k) * headDim);
        }
      }
      return target;
    });
  }

  /** The names a step fetches: the logits and every present. */
  fetches(): string[] {
    return [this.layout.logits, ...this.layout.layers.flatMap((layer) => layer.present)];
  }

  /** Takes the step's presents as the cache (no copy) and counts the tokens each row fed. */
  advance(outputs: ort.InferenceSession.ReturnType, tokens: readonly StepTokens[]): void {
    const { layout, rows } = this;
    const width = this.width + this.#fed;
    const expected = rows * layout.heads * width * layout.headDim;
    layout.layers.forEach((layer, index) => {
      for (const which of [0, 1] as const) {
        const data = outputs[layer.present[which]]?.data;
        if (!(data instanceof Float32Array) || data.length !== expected) {
          throw new Error(
            `${layer.present[which]} is not FP32 [${rows}, ${layout.heads}, ${width}, ${layout.headDim}]`,
          );
        }
        this.#past[2 * index + which] = data;
      }
    });
    this.#mask = this.#nextMask as Uint8Array;
    this.#nextMask = undefined;
    this.width = width;
    for (let r = 0; r < rows; r++) this.lengths[r] = (this.lengths[r] as number) + (tokens[r] as StepTokens).length;
  }

  /**
   * One cache of the chosen rows of several, in order: each row's real positions copied once,
   * right-aligned, so holes and the padding no row needs any more are gone. A row of a batch
   * that has not run yet arrives as padding only, ready to feed its prompt.
   */
  static pack(layout: DecoderLayout, parts: readonly { cache: BatchCache; rows: readonly number[] }[]): BatchCache {
    const rows = parts.reduce((sum, part) => sum + part.rows.length, 0);
    const lengths = new Int32Array(rows);
    let out = 0;
    for (const { cache, rows: picked } of parts)
      for (const row of picked) lengths[out++] = cache.lengths[row] as number;
    const width = lengths.reduce((most, length) => Math.max(most, length), 0);
    const { heads, headDim } = layout;
    const past = Array.from(
      { length: layout.layers.length * 2 },
      () => new Float32Array(rows * heads * width * headDim),
    );
    const mask = new Uint8Array(rows * width);
    out = 0;
    for (const { cache, rows: picked } of parts) {
      for (const row of picked) {
        const length = cache.lengths[row] as number;
        mask.fill(1, out * width + width - length, (out + 1) * width);
        // Runs of real positions in the source row, each copied as one block per head.
        let to = width - length;
        for (const [from, count] of realRuns(cache.#mask, row, cache.width)) {
          for (let tensor = 0; tensor < past.length; tensor++) {
            const source = cache.#past[tensor] as Float32Array;
            const target = past[tensor] as Float32Array;
            for (let h = 0; h < heads; h++) {
              const at = ((row * heads + h) * cache.width + from) * headDim;
              target.set(source.subarray(at, at + count * headDim), ((out * heads + h) * width + to) * headDim);
            }
          }
          to += count;
        }
        out++;
      }
    }
    return new BatchCache(layout, rows, width, past, mask, lengths);
  }
}

/** [start, count] of each run of real positions in one row of a mask. */
function realRuns(mask: Uint8Array, row: number, width: number): [number, number][] {
  const runs: [number, number][] = [];
  let start = -1;
  for (let t = 0; t <= width; t++) {
    const real = t < width && mask[row * width + t] === 1;
    if (real && start < 0) start = t;
    if (!real && start >= 0) {
      runs.push([start, t - start]);
      start = -1;
    }
  }
  return runs;
}

function integers(type: 'int64' | 'int32', values: ArrayLike<number>, dims: number[]): ort.Tensor {
  if (type === 'int32') return new ort.Tensor('int32', Int32Array.from(values), dims);
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i] as number);
  return new ort.Tensor('int64', data, dims);
}
