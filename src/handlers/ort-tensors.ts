import ort from 'onnxruntime-node';
import { InferenceFailedError } from '../core/errors.js';
import { datatypeOfOrtType, ortTypeOf } from '../core/datatypes.js';
import type { HandlerRequest } from '../core/request.js';
import {
  splitRows as splitTensorRows,
  stackRows as stackTensorRows,
  syntheticTensors,
  type Tensor,
  type Tensors,
  type TensorSpec,
} from '../core/tensors.js';

/**
 * Where onnxruntime's tensors begin and end: an instance turns a request's plain tensors into
 * `ort.Tensor`s for its handler and session, and the handler's back into plain ones. Both ways
 * the elements are the same typed array, never copied.
 */

/** onnxruntime tensors by name: what handlers take and give (the handler API). */
export type TensorMap = Record<string, ort.Tensor>;

export function toOrtTensor(tensor: Tensor): ort.Tensor {
  return new ort.Tensor(ortTypeOf(tensor.datatype) as 'float32', tensor.data as Float32Array, tensor.dims);
}

/** An onnxruntime tensor as a plain one; one of a type v2 has no datatype for (int4) fails its request. */
export function fromOrtTensor(tensor: ort.Tensor, name: string): Tensor {
  const datatype = datatypeOfOrtType(tensor.type);
  if (datatype === undefined)
    throw new InferenceFailedError(`output "${name}": v2 cannot carry ${tensor.type} tensors`);
  return { datatype, dims: tensor.dims, data: tensor.data };
}

export function toOrtTensors(tensors: Readonly<Tensors>): TensorMap {
  const map: TensorMap = {};
  for (const name in tensors) map[name] = toOrtTensor(tensors[name] as Tensor);
  return map;
}

export function fromOrtTensors(map: Readonly<TensorMap>): Tensors {
  const tensors: Tensors = {};
  for (const name in map) tensors[name] = fromOrtTensor(map[name] as ort.Tensor, name);
  return tensors;
}

/** Whether a handler's answer is onnxruntime tensors by name. */
export function isTensorMap(value: unknown): value is TensorMap {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const values = Object.values(value);
  return values.length > 0 && values.every((item) => item instanceof ort.Tensor);
}

/** The request as the handler takes it: its tensors as onnxruntime's. */
export function handlerRequestOf(request: HandlerRequest): HandlerRequest<ort.Tensor> {
  return request.kind === 'tensors' ? { ...request, inputs: toOrtTensors(request.inputs) } : request;
}

/** A handler's answer as the server's thread takes it: tensors plain, anything else as it is. */
export function answerOf(response: unknown): unknown {
  return isTensorMap(response) ? fromOrtTensors(response) : response;
}

/** Rows of a request's onnxruntime tensor: its first dimension. */
export function ortRowsOf(tensor: ort.Tensor): number {
  return tensor.dims[0] ?? 1;
}

/** core/tensors' stackRows over onnxruntime tensors. */
export function stackRows(tensors: readonly ort.Tensor[]): ort.Tensor {
  if (tensors.length === 1) return tensors[0] as ort.Tensor;
  return toOrtTensor(stackTensorRows(tensors.map((tensor) => fromOrtTensor(tensor, 'stacked'))));
}

/** core/tensors' splitRows over onnxruntime tensors. */
export function splitRows(tensor: ort.Tensor, rowCounts: readonly number[]): ort.Tensor[] {
  if (rowCounts.length === 1) return [tensor];
  return splitTensorRows(fromOrtTensor(tensor, 'split'), rowCounts).map(toOrtTensor);
}

/** core/tensors' syntheticTensors as onnxruntime tensors, for a session fed directly. */
export function syntheticFeeds(inputs: readonly TensorSpec[], batchSize: number | undefined): TensorMap {
  return toOrtTensors(syntheticTensors(inputs, batchSize));
}
