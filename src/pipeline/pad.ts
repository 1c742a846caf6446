import ort from 'onnxruntime-node';
import { InferenceInputError } from '../core/errors.js';
import { allocateTensorData, ortTypeOf } from '../core/datatypes.js';
import type { TensorSpec } from '../core/tensors.js';
import type { PadSpec } from '../config/pipeline-config.js';

/**
 * Pads `tensor` along `pad.axis` up to the next multiple of `pad.multiple`, no further than
 * `pad.max`, so that requests of nearby widths share a shape (and so a batch). Wider than
 * `max` is the request's bad input.
 */
export function padToBucket(tensor: ort.Tensor, pad: PadSpec, name: string): ort.Tensor {
  const { dims } = tensor;
  const size = dims[pad.axis];
  if (size === undefined) {
    throw new InferenceInputError(`input "${name}" has rank ${dims.length}, no axis ${pad.axis} to pad`);
  }
  if (pad.max !== undefined && size > pad.max) {
    throw new InferenceInputError(
      `input "${name}" is ${size} long on axis ${pad.axis}, over the padding max ${pad.max}`,
    );
  }
  const rounded = Math.ceil(size / pad.multiple) * pad.multiple;
  const target = pad.max === undefined ? rounded : Math.min(rounded, pad.max);
  if (target === size) return tensor;
  if (tensor.type === 'string') throw new InferenceInputError(`input "${name}": string tensors cannot be padded`);
  const outer = dims.slice(0, pad.axis).reduce((a, b) => a * b, 1);
  const inner = dims.slice(pad.axis + 1).reduce((a, b) => a * b, 1);
  const source = tensor.data as Float32Array;
  const data = allocateTensorData(tensor.type, outer * target * inner) as Float32Array;
  if (pad.value !== 0) {
    const wide = tensor.type === 'int64' || tensor.type === 'uint64';
    (data as unknown as { fill(value: number | bigint): void }).fill(wide ? BigInt(Math.trunc(pad.value)) : pad.value);
  }
  const block = size * inner;
  for (let index = 0; index < outer; index++) {
    data.set(source.subarray(index * block, (index + 1) * block), index * target * inner);
  }
  const padded = [...dims];
  padded[pad.axis] = target;
  return new ort.Tensor(tensor.type, data, padded);
}

/** A tensor with no rows, of an output's datatype and its other dimensions (variable ones 0). */
export function emptyRows(spec: TensorSpec): ort.Tensor {
  const type = ortTypeOf(spec.datatype);
  const dims = [0, ...spec.shape.slice(1).map((dim) => (dim === -1 ? 0 : dim))];
  return new ort.Tensor(type, allocateTensorData(type, 0), dims);
}
