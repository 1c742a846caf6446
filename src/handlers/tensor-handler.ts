import ort from 'onnxruntime-node';
import { InferenceInputError } from '../core/errors.js';
import { ortTypeOf } from '../core/datatypes.js';
import { checkRequestTensors, type TensorSpec } from '../core/tensors.js';
import type { HandlerRequest } from '../core/request.js';
import { fromOrtTensors, splitRows, stackRows, type TensorMap } from './ort-tensors.js';
import type { Handler, HandlerContext } from './types.js';

/**
 * The built-in handler: KServe v2 tensors pass straight through. A JSON body (TorchServe
 * route) may name inputs with nested arrays, or be one nested array when there is one input.
 */
export const tensorHandler: Handler = {
  preprocess(requests, context) {
    return stackRequests(
      requests.map((request) => requestTensors(request, context)),
      context,
    );
  },
  async inference(inputs, { session, config }) {
    const outputs = await session.run(
      reshapeInputs(inputs, config.inputs),
      config.outputs.map((output) => output.name),
    );
    return reshapeOutputs(outputs, config.outputs);
  },
  postprocess(outputs, requests) {
    return splitOutputs(outputs, requests);
  },
};

/**
 * The tensors of one request. Decoded ones were checked by the protocol layer; those read
 * here from a TorchServe JSON body are checked here, the one place they are decoded.
 */
export function requestTensors(request: HandlerRequest<ort.Tensor>, { config }: HandlerContext): TensorMap {
  if (request.kind === 'tensors') return request.inputs;
  if (request.kind !== 'body') throw new InferenceInputError('this model takes tensors, not texts');
  const tensors = tensorsFromJsonBody(request.body, config.inputs);
  checkRequestTensors(fromOrtTensors(tensors), config.inputs);
  return tensors;
}

/** Inputs whose spec has a reshape, given the model's shape (Triton's `reshape`): same data, new dims. */
function reshapeInputs(inputs: TensorMap, specs: readonly TensorSpec[]): TensorMap {
  if (!specs.some((spec) => spec.reshape)) return inputs;
  const reshaped: TensorMap = { ...inputs };
  for (const spec of specs) {
    const tensor = inputs[spec.name];
    if (spec.reshape && tensor) reshaped[spec.name] = withDims(tensor, spec.reshape, spec.shape[0] === -1);
  }
  return reshaped;
}

/** Outputs whose spec has a reshape, given back in the spec's `shape`. */
function reshapeOutputs(outputs: TensorMap, specs: readonly TensorSpec[]): TensorMap {
  if (!specs.some((spec) => spec.reshape)) return outputs;
  const reshaped: TensorMap = { ...outputs };
  for (const spec of specs) {
    const tensor = outputs[spec.name];
    if (spec.reshape && tensor) reshaped[spec.name] = withDims(tensor, spec.shape, spec.shape[0] === -1);
  }
  return reshaped;
}

/** The tensor's data under `shape`: the rows kept when batched, one -1 found from the element count. */
function withDims(tensor: ort.Tensor, shape: readonly number[], batched: boolean): ort.Tensor {
  const dims = shape.map((dim, axis) => (batched && axis === 0 ? (tensor.dims[0] ?? 1) : dim));
  const known = dims.reduce((product, dim) => (dim === -1 ? product : product * dim), 1);
  const free = dims.indexOf(-1);
  if (free !== -1) dims[free] = known === 0 ? 0 : tensor.size / known;
  return new ort.Tensor(tensor.type, tensor.data, dims);
}

export function stackRequests(perRequest: readonly TensorMap[], { config }: HandlerContext): TensorMap {
  if (config.max_batch_size === 0 && perRequest.length > 1) {
    throw new InferenceInputError('this model does not batch: one request per forward pass');
  }
  const batch: TensorMap = {};
  for (const spec of config.inputs) {
    batch[spec.name] = stackRows(perRequest.map((tensors) => tensors[spec.name] as ort.Tensor));
  }
  return batch;
}

/** Splits every output back to the requests by the rows each one sent. */
export function splitOutputs(outputs: TensorMap, requests: readonly HandlerRequest<ort.Tensor>[]): TensorMap[] {
  const rowCounts = requests.map(requestRows);
  const responses: TensorMap[] = requests.map(() => ({}));
  for (const [name, tensor] of Object.entries(outputs)) {
    splitRows(tensor, rowCounts).forEach((part, index) => {
      (responses[index] as TensorMap)[name] = part;
    });
  }
  return responses;
}

/** A decoded request's rows as the protocol layer counted them, a text each; a body is one row. */
export function requestRows(request: HandlerRequest<ort.Tensor>): number {
  return request.kind === 'tensors' ? request.rows : request.kind === 'texts' ? request.texts.length : 1;
}

function tensorsFromJsonBody(body: Buffer, inputs: readonly TensorSpec[]): TensorMap {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new InferenceInputError('the body is not JSON; this model takes tensors as JSON arrays');
  }
  const named =
    inputs.length === 1 && Array.isArray(parsed)
      ? { [(inputs[0] as TensorSpec).name]: parsed }
      : (parsed as Record<string, unknown>);
  if (typeof named !== 'object' || named === null || Array.isArray(named)) {
    throw new InferenceInputError('the JSON body must map input names to nested arrays');
  }
  const tensors: TensorMap = {};
  for (const spec of inputs) {
    const value = named[spec.name];
    if (value === undefined) continue;
    tensors[spec.name] = tensorFromNested(value, spec);
  }
  return tensors;
}

function tensorFromNested(value: unknown, spec: TensorSpec): ort.Tensor {
  const dims: number[] = [];
  for (let level = value; Array.isArray(level); level = level[0]) dims.push(level.length);
  const flat = (value as unknown[]).flat(Infinity);
  if (flat.length !== dims.reduce((a, b) => a * b, 1)) {
    throw new InferenceInputError(`input "${spec.name}": nested arrays are ragged`);
  }
  const type = ortTypeOf(spec.datatype);
  if (type === 'string') return new ort.Tensor('string', flat.map(String), dims);
  if (!flat.every((item) => typeof item === 'number' || typeof item === 'boolean')) {
    throw new InferenceInputError(`input "${spec.name}": expected numbers for ${spec.datatype}`);
  }
  const toBigInt = (item: unknown): bigint => BigInt(Math.trunc(Number(item)));
  if (type === 'int64') return new ort.Tensor(type, BigInt64Array.from(flat, toBigInt), dims);
  if (type === 'uint64') return new ort.Tensor(type, BigUint64Array.from(flat, toBigInt), dims);
  if (type === 'bool')
    return new ort.Tensor(
      type,
      Uint8Array.from(flat, (item) => (item ? 1 : 0)),
      dims,
    );
  return new ort.Tensor(type as 'float32', flat as number[], dims);
}
