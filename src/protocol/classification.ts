import { InferenceInputError } from '../core/errors.js';
import type { Tensor } from '../core/tensors.js';
import { halfToFloat } from './binary-tensor.js';

type Scores = ArrayLike<number | bigint>;

/**
 * Triton's classification extension: the `count` best classes of each row as BYTES elements
 * "value:index" or "value:index:label", best first, in a [rows, count] tensor (rows along the
 * first dimension; a rank 0 or 1 output is one row and gives [count]). Values print as Triton's
 * std::to_string does: floats with six decimals, integers exactly. Equal values rank by lower
 * index, NaN ranks last, and `count` is capped at the classes a row has.
 */
export function classify(name: string, tensor: Tensor, count: number, labels?: readonly string[]): Tensor {
  if (tensor.datatype === 'BYTES' || tensor.datatype === 'BOOL') {
    throw new InferenceInputError(
      `output "${name}": classification needs a numeric output, this one is ${tensor.datatype}`,
    );
  }
  const batched = tensor.dims.length >= 2;
  const rows = batched ? (tensor.dims[0] as number) : 1;
  const classes = batched ? tensor.dims.slice(1).reduce((a, b) => a * b, 1) : tensor.data.length;
  const k = Math.min(count, classes);
  const scores: Scores =
    tensor.datatype === 'FP16' ? Float32Array.from(tensor.data as Uint16Array, halfToFloat) : (tensor.data as Scores);
  const isFloat = tensor.datatype === 'FP16' || tensor.datatype === 'FP32' || tensor.datatype === 'FP64';
  const out = new Array<string>(rows * k);
  for (let row = 0; row < rows; row++) {
    const start = row * classes;
    topIndices(scores, start, classes, k).forEach((at, rank) => {
      const value = scores[at] as number | bigint;
      const index = at - start;
      const label = labels?.[index];
      out[row * k + rank] =
        `${isFloat ? (value as number).toFixed(6) : String(value)}:${index}${label === undefined ? '' : `:${label}`}`;
    });
  }
  return { datatype: 'BYTES', dims: batched ? [rows, k] : [k], data: out };
}

/** The `count` best classes of each row of a float scores tensor ([rows, classes] or [classes]), best first. */
export function topClassesPerRow(tensor: Tensor, count: number): { index: number; score: number }[][] {
  const batched = tensor.dims.length >= 2;
  const rows = batched ? (tensor.dims[0] as number) : 1;
  const classes = batched ? tensor.dims.slice(1).reduce((a, b) => a * b, 1) : tensor.data.length;
  const scores: Scores =
    tensor.datatype === 'FP16' ? Float32Array.from(tensor.data as Uint16Array, halfToFloat) : (tensor.data as Scores);
  const k = Math.min(count, classes);
  return Array.from({ length: rows }, (_, row) =>
    topIndices(scores, row * classes, classes, k).map((at) => ({
      index: at - row * classes,
      score: Number(scores[at]),
    })),
  );
}

/** Whether element `a` ranks before element `b`. */
function ranksBefore(scores: Scores, a: number, b: number): boolean {
  const x = scores[a] as number | bigint;
  const y = scores[b] as number | bigint;
  if (x > y) return true;
  if (x < y) return false;
  const xIsNaN = x !== x;
  const yIsNaN = y !== y;
  return xIsNaN === yIsNaN ? a < b : yIsNaN;
}

/** Absolute positions of the best `k` of `scores[start, start + n)`, best first. */
function topIndices(scores: Scores, start: number, n: number, k: number): number[] {
  if (k * 8 >= n) {
    const all = Array.from({ length: n }, (_, i) => start + i);
    return all.sort((a, b) => (ranksBefore(scores, a, b) ? -1 : 1)).slice(0, k);
  }
  // Few classes out of many (top-5 of 1000): keep a short sorted list instead of sorting all.
  const best: number[] = [];
  for (let i = start; i < start + n; i++) {
    if (best.length === k && !ranksBefore(scores, i, best[k - 1] as number)) continue;
    let slot = Math.min(best.length, k - 1);
    while (slot > 0 && ranksBefore(scores, i, best[slot - 1] as number)) {
      best[slot] = best[slot - 1] as number;
      slot--;
    }
    best[slot] = i;
  }
  return best;
}
