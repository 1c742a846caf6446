import { InferenceInputError } from './errors.js';
import { quoted } from './quote.js';
import { allocateData, isDatatype, type Datatype, type TensorData } from './datatypes.js';

/** One input or output of a model as the config declares it: -1 marks a variable dimension. */
export interface TensorSpec {
  readonly name: string;
  readonly datatype: Datatype;
  readonly shape: readonly number[];
  /**
   * The shape the model itself takes or gives, when it differs from `shape` (what requests send
   * and answers carry): Triton's `reshape`. Same element count; the batch dimension first as in `shape`.
   */
  readonly reshape?: readonly number[];
}

export type { NumericData, TensorData } from './datatypes.js';

/**
 * A tensor as the server's thread holds it, from the decoded request to the encoded answer:
 * its v2 datatype, dimensions and elements, nothing else. onnxruntime's `Tensor` exists only
 * inside an instance, where a session runs (runtime/, handlers/).
 */
export interface Tensor {
  readonly datatype: Datatype;
  readonly dims: readonly number[];
  readonly data: TensorData;
}

/** Tensors by input or output name. */
export type Tensors = Record<string, Tensor>;

/** Whether a value is a tensor: what a handler's tensors are on this side of an instance. */
export function isTensor(value: unknown): value is Tensor {
  if (typeof value !== 'object' || value === null) return false;
  const { datatype, dims, data } = value as Partial<Tensor>;
  return isDatatype(datatype) && Array.isArray(dims) && (Array.isArray(data) || ArrayBuffer.isView(data));
}

/** Whether an answer is tensors by name (what v2 answers carry). */
export function isTensors(value: unknown): value is Tensors {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  let any = false;
  for (const key in value) {
    if (!isTensor((value as Record<string, unknown>)[key])) return false;
    any = true;
  }
  return any;
}

/** Elements a shape holds. */
export function elementCount(dims: readonly number[]): number {
  let count = 1;
  for (const dim of dims) count *= dim;
  return count;
}

/** Rows a request contributes to a batch: its first dimension. */
export function rowsOf(tensor: Tensor): number {
  return tensor.dims[0] ?? 1;
}

/** Dimensions a message shows; a hostile 20,000-dimension shape must not become the answer's size. */
const SHOWN_DIMS = 8;

/** A shape as messages show it: `[1, 3, 48]`, or its first dimensions and the rank. */
export function formatDims(dims: readonly number[]): string {
  if (dims.length <= SHOWN_DIMS) return `[${dims.join(', ')}]`;
  return `[${dims.slice(0, SHOWN_DIMS).join(', ')}, …] (rank ${dims.length})`;
}

/**
 * Checks one request's tensor against the served spec: datatype, rank and every fixed
 * dimension. Variable dimensions may take any size but 0: an empty tensor is no request.
 */
export function checkTensor(tensor: Tensor, spec: TensorSpec): void {
  if (tensor.datatype !== spec.datatype) {
    throw new InferenceInputError(
      `input "${spec.name}": datatype ${tensor.datatype}, the model expects ${spec.datatype}`,
    );
  }
  if (tensor.dims.length !== spec.shape.length) {
    throw new InferenceInputError(
      `input "${spec.name}": shape ${formatDims(tensor.dims)} has rank ${tensor.dims.length}, the model expects rank ${spec.shape.length} [${spec.shape.join(', ')}]`,
    );
  }
  const empty = tensor.dims.indexOf(0);
  if (empty !== -1) {
    throw new InferenceInputError(
      `input "${spec.name}": shape ${formatDims(tensor.dims)} has size 0 at dimension ${empty}; every dimension must be at least 1`,
    );
  }
  spec.shape.forEach((dim, axis) => {
    if (dim !== -1 && tensor.dims[axis] !== dim) {
      throw new InferenceInputError(
        `input "${spec.name}": shape ${formatDims(tensor.dims)} does not match the model's [${spec.shape.join(', ')}] at dimension ${axis}`,
      );
    }
  });
}

/** Checks a request's tensors against every served input: none missing, none unknown. */
export function checkRequestTensors(tensors: Tensors, inputs: readonly TensorSpec[]): void {
  // Unknown names first: an input sent under the wrong name is reported as that, not as the
  // right name missing.
  for (const name of Object.keys(tensors)) {
    if (!inputs.some((spec) => spec.name === name)) {
      throw new InferenceInputError(
        `unknown input ${quoted(name)} (the model takes ${inputs.map((spec) => spec.name).join(', ')})`,
      );
    }
  }
  for (const spec of inputs) {
    const tensor = tensors[spec.name];
    if (!tensor) throw new InferenceInputError(`input "${spec.name}" is missing`);
    checkTensor(tensor, spec);
  }
}

/**
 * How a checked request joins the batcher: the rows it adds (its batch dimension, the same
 * for every input) and a key that only requests with the same non-batch dimensions share.
 */
export function batchPlacement(
  tensors: Tensors,
  inputs: readonly TensorSpec[],
  batching: boolean,
): { rows: number; shapeKey: string } {
  let rows = 1;
  let shapeKey = '';
  inputs.forEach((spec, index) => {
    const dims = (tensors[spec.name] as Tensor).dims;
    if (batching) {
      const inputRows = dims[0] as number;
      if (index > 0 && inputRows !== rows) {
        throw new InferenceInputError(
          `inputs disagree on the batch dimension: "${spec.name}" has ${inputRows} rows, "${inputs[0]?.name}" has ${rows}`,
        );
      }
      rows = inputRows;
    }
    shapeKey += `${index === 0 ? '' : '|'}${(batching ? dims.slice(1) : dims).join('x')}`;
  });
  if (batching && rows < 1) throw new InferenceInputError('the batch dimension must be at least 1');
  return { rows, shapeKey };
}

/**
 * Stacks tensors along the first dimension into one preallocated buffer. All must share
 * datatype and non-batch dimensions; the batcher groups requests so that they do.
 */
export function stackRows(tensors: readonly Tensor[]): Tensor {
  const first = tensors[0];
  if (!first) throw new InferenceInputError('nothing to stack');
  if (tensors.length === 1) return first;
  const rowShape = first.dims.slice(1);
  let rows = 0;
  for (const tensor of tensors) {
    if (tensor.datatype !== first.datatype || !sameDims(tensor.dims, first.dims, 1)) {
      throw new InferenceInputError(
        `cannot stack [${tensor.dims.join(', ')}] ${tensor.datatype} with [${first.dims.join(', ')}] ${first.datatype}`,
      );
    }
    rows += rowsOf(tensor);
  }
  const data = allocateData(first.datatype, rows * elementCount(rowShape));
  let offset = 0;
  for (const tensor of tensors) {
    if (Array.isArray(data)) {
      for (const value of tensor.data as string[]) data[offset++] = value;
    } else {
      (data as Float32Array).set(tensor.data as Float32Array, offset);
      offset += tensor.data.length;
    }
  }
  return { datatype: first.datatype, dims: [rows, ...rowShape], data };
}

/** Splits a batched tensor back into consecutive row blocks, as views where possible. */
export function splitRows(tensor: Tensor, rowCounts: readonly number[]): Tensor[] {
  if (rowCounts.length === 1) return [tensor];
  const rowSize = elementCount(tensor.dims.slice(1));
  const parts: Tensor[] = [];
  let row = 0;
  for (const count of rowCounts) {
    const start = row * rowSize;
    const end = (row + count) * rowSize;
    const data = Array.isArray(tensor.data)
      ? tensor.data.slice(start, end)
      : (tensor.data as Float32Array).subarray(start, end);
    parts.push({ datatype: tensor.datatype, dims: [count, ...tensor.dims.slice(1)], data });
    row += count;
  }
  return parts;
}

function sameDims(a: readonly number[], b: readonly number[], from: number): boolean {
  return a.length === b.length && a.every((dim, axis) => axis < from || dim === b[axis]);
}

/**
 * Zero-filled inputs of the served shapes, for warm-up, calibration and in-process timing: the
 * batch dimension becomes `batchSize` (left as is when undefined), other variable dimensions 1.
 */
export function syntheticTensors(inputs: readonly TensorSpec[], batchSize: number | undefined): Tensors {
  const tensors: Tensors = {};
  for (const input of inputs) {
    const dims = input.shape.map((dim, axis) =>
      axis === 0 && batchSize !== undefined ? batchSize : dim === -1 ? 1 : dim,
    );
    tensors[input.name] = { datatype: input.datatype, dims, data: allocateData(input.datatype, elementCount(dims)) };
  }
  return tensors;
}
