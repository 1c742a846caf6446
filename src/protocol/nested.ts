import type { Tensor } from '../core/tensors.js';
import { halfToFloat } from './binary-tensor.js';

/** A tensor as nested JSON arrays (TorchServe-style answers); 64-bit integers as numbers. */
export function tensorToNested(tensor: Tensor): unknown {
  const flat = plainValues(tensor);
  const build = (axis: number, offset: number): unknown => {
    if (axis === tensor.dims.length) return flat[offset];
    const size = tensor.dims[axis] as number;
    const stride = tensor.dims.slice(axis + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: size }, (_, index) => build(axis + 1, offset + index * stride));
  };
  return build(0, 0);
}

/** A tensor's elements as plain JSON values, in order. */
export function plainValues(tensor: Tensor): unknown[] {
  const data = tensor.data;
  if (Array.isArray(data)) return data;
  if (tensor.datatype === 'FP16') return Array.from(data as Uint16Array, halfToFloat);
  if (tensor.datatype === 'BOOL') return Array.from(data as Uint8Array, (value) => value !== 0);
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) return Array.from(data, Number);
  return Array.from(data as Float32Array);
}
