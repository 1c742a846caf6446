import { InferenceInputError } from '../core/errors.js';
import { quoted, shownValue } from '../core/quote.js';
import { formatDims, type Tensor, type TensorData, type Tensors } from '../core/tensors.js';
import { DATATYPES, isDatatype, type Datatype } from '../core/datatypes.js';
import { binaryTensorBytes, readBinaryTensor, type BytesEncoding } from './binary-tensor.js';
import { classify } from './classification.js';
import type { DecodedInferRequest, RequestedOutput, ResponseOutput } from './v2-codec.js';

/**
 * ModelInfer messages of the KServe v2 gRPC protocol ↔ tensors, read and written as Triton's
 * gRPC server does (server src/grpc/infer_handler.cc, infer_handler.h, grpc_utils.cc). The
 * messages are those grpc-messages.ts decodes: snake_case fields, `bytes` as Buffer views of
 * the received message, 64-bit integers as Long objects or numbers. Pure functions, like
 * v2-codec: everything that depends on the model is checked by prepareDecoded.
 */

/** A 64-bit integer as protobufjs gives it: a Long's two's-complement halves, or a number. */
export type Int64 =
  number | { readonly low: number; readonly high: number; readonly unsigned: boolean; toString(): string };

export interface InferParameterMessage {
  /** The oneof's set field: a getter on protobufjs messages, a property with proto-loader's `oneofs`. */
  readonly parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param' | null;
  readonly bool_param?: boolean;
  readonly int64_param?: Int64;
  readonly string_param?: string;
  readonly double_param?: number;
  readonly uint64_param?: Int64;
}

type ParameterMap = Readonly<Record<string, InferParameterMessage>> | null;

export interface InferTensorContentsMessage {
  readonly bool_contents?: readonly boolean[];
  readonly int_contents?: readonly number[];
  readonly int64_contents?: readonly Int64[];
  readonly uint_contents?: readonly number[];
  readonly uint64_contents?: readonly Int64[];
  readonly fp32_contents?: readonly number[];
  readonly fp64_contents?: readonly number[];
  readonly bytes_contents?: readonly Buffer[];
}

export interface InferInputTensorMessage {
  readonly name: string;
  readonly datatype: string;
  readonly shape?: readonly Int64[];
  /** Null or absent when the input's data is in raw_input_contents. */
  readonly contents?: InferTensorContentsMessage | null;
}

/** The fields of a ModelInferRequest this codec reads; absent repeated fields count as empty. */
export interface ModelInferRequestMessage {
  readonly id?: string;
  readonly parameters?: ParameterMap;
  readonly inputs?: readonly InferInputTensorMessage[];
  readonly outputs?: readonly { readonly name: string; readonly parameters?: ParameterMap }[];
  readonly raw_input_contents?: readonly Buffer[];
}

/** A ModelInferResponse as protobufjs encodes it. */
export interface ModelInferResponseMessage {
  readonly model_name: string;
  readonly model_version: string;
  readonly id: string;
  readonly outputs: { readonly name: string; readonly datatype: Datatype; readonly shape: readonly number[] }[];
  /** One per output, in order: views of the tensors' data, copied once by the encoder. */
  readonly raw_output_contents: Uint8Array[];
}

type ContentsField = keyof InferTensorContentsMessage;

const CONTENTS_FIELDS: readonly ContentsField[] = [
  'bool_contents',
  'int_contents',
  'int64_contents',
  'uint_contents',
  'uint64_contents',
  'fp32_contents',
  'fp64_contents',
  'bytes_contents',
];

/** The typed contents field of each datatype; FP16 has none, it travels raw only. */
const CONTENTS_OF: Record<Exclude<Datatype, 'FP16'>, ContentsField> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
};

const INTEGER_TYPES = {
  UINT8: [Uint8Array, 0, 0xff],
  UINT16: [Uint16Array, 0, 0xffff],
  UINT32: [Uint32Array, 0, 0xffffffff],
  INT8: [Int8Array, -0x80, 0x7f],
  INT16: [Int16Array, -0x8000, 0x7fff],
  INT32: [Int32Array, -0x80000000, 0x7fffffff],
} as const;

const NONE: readonly never[] = [];

/**
 * A decoded ModelInferRequest → the request's id, parameters, tensors and requested outputs.
 * Input data is either all in `raw_input_contents`, one entry per input in input order, or
 * each input's in its typed `contents`. Raw numeric data becomes a view of the received
 * message where it sits aligned for its typed array, else a copy.
 */
export function decodeGrpcInferRequest(
  message: ModelInferRequestMessage,
  bytesEncoding: BytesEncoding = 'utf8',
): DecodedInferRequest {
  const given = message.inputs ?? NONE;
  const raw = message.raw_input_contents ?? NONE;
  if (raw.length > 0) {
    const typed = given.find((input) => input.contents);
    if (typed) {
      throw new InferenceInputError(
        `input ${quoted(typed.name)}: contents must not be given when raw_input_contents is used`,
      );
    }
    if (raw.length !== given.length) {
      throw new InferenceInputError(
        `expected ${given.length} raw_input_contents (one per input, in input order), got ${raw.length}`,
      );
    }
  }
  const inputs = Object.create(null) as Tensors;
  given.forEach((input, index) => {
    const { name } = input;
    if (!name) throw new InferenceInputError(`inputs[${index}] needs a name`);
    if (name in inputs) throw new InferenceInputError(`input ${quoted(name)} is given twice`);
    inputs[name] = readInput(input, raw[index], bytesEncoding);
  });
  const outputs = message.outputs ?? NONE;
  return {
    ...(message.id ? { id: message.id } : {}),
    parameters: parameterValues(message.parameters),
    inputs,
    // No requested outputs means every output, as in Triton.
    ...(outputs.length === 0 ? {} : { outputs: requestedOutputs(outputs) }),
    // gRPC answers every output in raw_output_contents.
    binaryDataOutput: true,
  };
}

function readInput(input: InferInputTensorMessage, raw: Buffer | undefined, bytesEncoding: BytesEncoding): Tensor {
  const { name, datatype, contents } = input;
  if (!isDatatype(datatype)) {
    const why = datatype === 'BF16' ? ': onnxruntime-node has no bfloat16 tensors' : '';
    throw new InferenceInputError(
      `input ${quoted(name)}: datatype ${shownValue(datatype)} is not one of ${DATATYPES.join(', ')}${why}`,
    );
  }
  const dims = readShape(name, input.shape ?? NONE);
  const count = dims.reduce((product, dim) => product * dim, 1);
  if (!Number.isSafeInteger(count))
    throw new InferenceInputError(`input ${quoted(name)}: shape ${formatDims(dims)} is too large`);
  if (raw) {
    // Each BYTES element takes 4 bytes or more: a huge shape is refused before its array is made.
    if (datatype === 'BYTES' && count > raw.length) {
      throw new InferenceInputError(
        `input ${quoted(name)}: shape ${formatDims(dims)} of BYTES needs at least ${4 * count} bytes, got ${raw.length}`,
      );
    }
    return readBinaryTensor(name, datatype, dims, count, raw, 0, raw.length, bytesEncoding);
  }
  if (!contents) throw new InferenceInputError(`input ${quoted(name)}: no data in contents or raw_input_contents`);
  return readTypedTensor(name, datatype, dims, count, contents, bytesEncoding);
}

/** Shape dimensions as numbers; each must be a non-negative safe integer. */
function readShape(name: string, shape: readonly Int64[]): number[] {
  const dims = new Array<number>(shape.length);
  for (let axis = 0; axis < shape.length; axis++) {
    const dim = int64Number(shape[axis] as Int64);
    if (!Number.isSafeInteger(dim) || dim < 0) {
      throw new InferenceInputError(
        `input ${quoted(name)}: dimension ${axis} (${String(shape[axis])}) must be a non-negative integer below 2^53`,
      );
    }
    dims[axis] = dim;
  }
  return dims;
}

/** Data in the one typed field that matches the datatype; any other field holding data is refused. */
function readTypedTensor(
  name: string,
  datatype: Datatype,
  dims: number[],
  count: number,
  contents: InferTensorContentsMessage,
  bytesEncoding: BytesEncoding,
): Tensor {
  if (datatype === 'FP16') {
    throw new InferenceInputError(
      `input ${quoted(name)}: FP16 has no typed contents field, send it in raw_input_contents`,
    );
  }
  const field = CONTENTS_OF[datatype];
  for (const other of CONTENTS_FIELDS) {
    if (other !== field && (contents[other]?.length ?? 0) > 0) {
      throw new InferenceInputError(`input ${quoted(name)}: ${datatype} data goes in ${field}, got ${other}`);
    }
  }
  const values = contents[field] ?? NONE;
  if (values.length !== count) {
    throw new InferenceInputError(
      `input ${quoted(name)}: shape ${formatDims(dims)} needs ${count} elements, ${field} has ${values.length}`,
    );
  }
  return { datatype, dims, data: typedTensorData(name, datatype, values, bytesEncoding) };
}

function typedTensorData(
  name: string,
  datatype: Exclude<Datatype, 'FP16'>,
  values: readonly unknown[],
  bytesEncoding: BytesEncoding,
): TensorData {
  switch (datatype) {
    case 'BOOL':
      return Uint8Array.from(values as readonly boolean[], Number);
    case 'FP32':
      return Float32Array.from(values as readonly number[]);
    case 'FP64':
      return Float64Array.from(values as readonly number[]);
    case 'INT64':
      return int64TensorData(values as readonly Int64[], new BigInt64Array(values.length));
    case 'UINT64':
      return int64TensorData(values as readonly Int64[], new BigUint64Array(values.length));
    case 'BYTES':
      return (values as readonly Buffer[]).map((bytes) => bytes.toString(bytesEncoding));
    default:
      return integerTensorData(name, datatype, values as readonly number[]);
  }
}

/**
 * int_contents and uint_contents carry 8- and 16-bit integers as 32-bit ones. Triton keeps the
 * low bytes of each; a value out of range is refused here instead, as in a JSON request.
 */
function integerTensorData(name: string, datatype: keyof typeof INTEGER_TYPES, values: readonly number[]): TensorData {
  const [IntegerArray, min, max] = INTEGER_TYPES[datatype];
  const out = new IntegerArray(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as number;
    if (value < min || value > max) {
      throw new InferenceInputError(
        `input ${quoted(name)}: element ${i} is ${value}, ${datatype} needs [${min}, ${max}]`,
      );
    }
    out[i] = value;
  }
  return out;
}

/** Exact for every 64-bit value: a Long's halves are the element's little-endian 32-bit words. */
function int64TensorData<Out extends BigInt64Array | BigUint64Array>(values: readonly Int64[], out: Out): Out {
  const words = new Int32Array(out.buffer, out.byteOffset, 2 * out.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as Int64;
    if (typeof value === 'number') {
      out[i] = BigInt(value);
    } else {
      words[2 * i] = value.low;
      words[2 * i + 1] = value.high;
    }
  }
  return out;
}

/** The value as a number: exact when it is a safe integer, and never a safe integer when not exact. */
function int64Number(value: Int64): number {
  if (typeof value === 'number') return value;
  return (value.unsigned ? value.high >>> 0 : value.high) * 2 ** 32 + (value.low >>> 0);
}

/** Request parameters as plain values; prepareDecoded reads `priority` and `timeout` from them. */
export function parameterValues(parameters: ParameterMap | undefined): Record<string, unknown> {
  const values = Object.create(null) as Record<string, unknown>;
  if (!parameters) return values;
  for (const key of Object.keys(parameters)) {
    values[key] = parameterValue(key, parameters[key] as InferParameterMessage);
  }
  return values;
}

function parameterValue(key: string, parameter: InferParameterMessage): boolean | number | string {
  const choice = parameter.parameter_choice;
  switch (choice) {
    case 'bool_param':
      return parameter.bool_param === true;
    case 'string_param':
      return parameter.string_param ?? '';
    case 'double_param':
      return parameter.double_param ?? 0;
    case 'int64_param':
    case 'uint64_param': {
      const value = int64Number(parameter[choice] ?? 0);
      if (!Number.isSafeInteger(value)) {
        throw new InferenceInputError(`parameter ${quoted(key)}: ${String(parameter[choice])} is beyond ±(2^53 - 1)`);
      }
      return value;
    }
    default:
      throw new InferenceInputError(`parameter ${quoted(key)} has no value`);
  }
}

function requestedOutputs(outputs: NonNullable<ModelInferRequestMessage['outputs']>): RequestedOutput[] {
  const seen = new Set<string>();
  return outputs.map((output, index) => {
    const { name } = output;
    if (!name) throw new InferenceInputError(`outputs[${index}] needs a name`);
    if (seen.has(name)) throw new InferenceInputError(`output ${quoted(name)} is requested twice`);
    seen.add(name);
    // binary_data has no say: every gRPC output is raw.
    const classification = output.parameters?.classification;
    if (classification === undefined) return { name, binary: true };
    return { name, binary: true, classification: classificationCount(name, classification) };
  });
}

/** Triton's classification parameter: an int64_param above 0. */
function classificationCount(name: string, parameter: InferParameterMessage): number {
  if (parameter.parameter_choice !== 'int64_param') {
    throw new InferenceInputError(`output ${quoted(name)}: classification must be an int64_param`);
  }
  const count = int64Number(parameter.int64_param ?? 0);
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new InferenceInputError(`output ${quoted(name)}: classification must be a positive integer`);
  }
  return count;
}

/**
 * The ModelInferResponse for `outputs`, as Triton's gRPC server sends it: each output's name,
 * datatype and shape in `outputs`, and its data in `raw_output_contents`, never in typed
 * contents. A classification output is Triton's BYTES tensor of top classes, raw as well.
 */
export function encodeGrpcInferResponse(response: {
  model_name: string;
  model_version?: string;
  id?: string;
  outputs: readonly ResponseOutput[];
}): ModelInferResponseMessage {
  const outputs = new Array<ModelInferResponseMessage['outputs'][number]>(response.outputs.length);
  const raw = new Array<Uint8Array>(response.outputs.length);
  response.outputs.forEach((output, index) => {
    const tensor =
      output.classification === undefined
        ? output.tensor
        : classify(output.name, output.tensor, output.classification, output.labels);
    outputs[index] = { name: output.name, datatype: tensor.datatype, shape: tensor.dims };
    raw[index] = binaryTensorBytes(tensor);
  });
  return {
    model_name: response.model_name,
    model_version: response.model_version ?? '',
    id: response.id ?? '',
    outputs,
    raw_output_contents: raw,
  };
}
