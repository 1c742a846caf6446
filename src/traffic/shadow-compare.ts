import { isDeepStrictEqual } from 'node:util';
import type * as ort from 'onnxruntime-node';
import { isTensorMap } from '../core/tensors.js';

/** How a mirrored copy ended: its answer agreed with the served one, differed, or never came. */
export type ShadowComparison = 'agree' | 'disagree' | 'failed';

/**
 * Whether a shadow version's answer agrees with the serving one's. Tensors agree when they
 * have the same names, types and shapes and every number is within `tolerance` relative
 * (|a − b| ≤ tolerance × max(1, |a|, |b|)); other answers (a handler's JSON, text, bytes)
 * must be equal.
 */
export function answersAgree(served: unknown, shadow: unknown, tolerance: number): boolean {
  if (isTensorMap(served) && isTensorMap(shadow)) {
    const names = Object.keys(served);
    if (names.length !== Object.keys(shadow).length) return false;
    return names.every((name) => {
      const other = shadow[name];
      return other !== undefined && tensorsAgree(served[name] as ort.Tensor, other, tolerance);
    });
  }
  return isDeepStrictEqual(served, shadow);
}

function tensorsAgree(a: ort.Tensor, b: ort.Tensor, tolerance: number): boolean {
  if (a.type !== b.type || a.dims.length !== b.dims.length || a.dims.some((dim, index) => dim !== b.dims[index])) {
    return false;
  }
  const left = a.data;
  const right = b.data;
  if (left.length !== right.length) return false;
  for (let index = 0; index < left.length; index++) {
    const x = left[index];
    const y = right[index];
    if (typeof x === 'number' && typeof y === 'number') {
      if (
        !(Math.abs(x - y) <= tolerance * Math.max(1, Math.abs(x), Math.abs(y))) &&
        !(Number.isNaN(x) && Number.isNaN(y))
      )
        return false;
    } else if (x !== y) {
      return false;
    }
  }
  return true;
}
