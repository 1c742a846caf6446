import { isDeepStrictEqual } from 'node:util';
import { isTensors, type Tensor } from '../core/tensors.js';

/** How a mirrored copy ended: its answer agreed with the served one, differed, or never came. */
export type ShadowComparison = 'agree' | 'disagree' | 'failed';

/**
 * Whether a shadow version's answer agrees with the serving one's, as a user comparing two
 * versions of a model means it. Tensors agree when they have the same names, types and shapes
 * and every number is within `tolerance` relative (|a − b| ≤ tolerance × max(1, |a|, |b|)).
 * A classification (a list of `{label, score}`, best first, as the image classifier and
 * TorchServe's handlers answer) agrees when the top label is the same: an fp16 candidate's
 * scores move in the fourth digit, its decisions do not. Other JSON agrees when it has the
 * same shape and its numbers are within `tolerance`; text and bytes must be equal.
 */
export function answersAgree(served: unknown, shadow: unknown, tolerance: number): boolean {
  if (isTensors(served) && isTensors(shadow)) {
    const names = Object.keys(served);
    if (names.length !== Object.keys(shadow).length) return false;
    return names.every((name) => {
      const other = shadow[name];
      return other !== undefined && tensorsAgree(served[name] as Tensor, other, tolerance);
    });
  }
  if (isClassification(served) && isClassification(shadow)) return served[0]?.label === shadow[0]?.label;
  if (Buffer.isBuffer(served) || Buffer.isBuffer(shadow)) return isDeepStrictEqual(served, shadow);
  return jsonAgrees(served, shadow, tolerance);
}

type Classified = { label: unknown; score: number };

function isClassification(value: unknown): value is readonly Classified[] {
  return (
    Array.isArray(value) &&
    value.length > 0 &&
    value.every(
      (entry: unknown) =>
        typeof entry === 'object' &&
        entry !== null &&
        'label' in entry &&
        typeof (entry as { score?: unknown }).score === 'number',
    )
  );
}

function jsonAgrees(a: unknown, b: unknown, tolerance: number): boolean {
  if (typeof a === 'number' && typeof b === 'number') return numbersAgree(a, b, tolerance);
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    return a.every((item: unknown, index) => jsonAgrees(item, b[index], tolerance));
  }
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null) {
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    return keys.every(
      (key) =>
        Object.hasOwn(b, key) &&
        jsonAgrees((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], tolerance),
    );
  }
  return isDeepStrictEqual(a, b);
}

function numbersAgree(x: number, y: number, tolerance: number): boolean {
  return Math.abs(x - y) <= tolerance * Math.max(1, Math.abs(x), Math.abs(y)) || (Number.isNaN(x) && Number.isNaN(y));
}

function tensorsAgree(a: Tensor, b: Tensor, tolerance: number): boolean {
  if (
    a.datatype !== b.datatype ||
    a.dims.length !== b.dims.length ||
    a.dims.some((dim, index) => dim !== b.dims[index])
  ) {
    return false;
  }
  const left = a.data;
  const right = b.data;
  if (left.length !== right.length) return false;
  for (let index = 0; index < left.length; index++) {
    const x = left[index];
    const y = right[index];
    if (typeof x === 'number' && typeof y === 'number') {
      if (!numbersAgree(x, y, tolerance)) return false;
    } else if (x !== y) {
      return false;
    }
  }
  return true;
}
