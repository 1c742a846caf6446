import { InferenceInputError } from '../core/errors.js';
import { quoted, shownValue } from '../core/quote.js';
import { formatDims, type Tensor, type Tensors, type TensorSpec } from '../core/tensors.js';
import { DATATYPES, isDatatype, type Datatype } from '../core/datatypes.js';
import {
  binaryTensorBytes,
  elementSize,
  readBinaryTensor,
  textAsByteString,
  type BytesEncoding,
} from './binary-tensor.js';
import { classify } from './classification.js';
import { jsonTensorData, readJsonTensor } from './json-tensor.js';
import { parseHeaderLiftingData } from './json-data-lift.js';

/**
 * KServe v2 infer bodies ↔ tensors, with Triton's binary data and classification extensions.
 * Pure functions: the HTTP layer passes the body and the Inference-Header-Content-Length
 * header in, and sends back what encodeInferResponse returns.
 */

export interface RequestedOutput {
  name: string;
  binary: boolean;
  classification?: number;
}

export interface DecodedInferRequest {
  id?: string;
  /** Request-level parameters (e.g. timeout, priority) as given. */
  parameters: Record<string, unknown>;
  /** Tensors by input name, in the request's datatype and shape; not yet checked against the model. */
  inputs: Tensors;
  /** Undefined: every output, binary only when `binaryDataOutput`. */
  outputs?: RequestedOutput[];
  binaryDataOutput: boolean;
}

/** Parses the JSON header, `body[0, length)`; may leave numeric data arrays unparsed (NumericSpan). */
export type HeaderParser = (body: Buffer, length: number) => unknown;

export interface ResponseOutput {
  name: string;
  tensor: Tensor;
  binary: boolean;
  /** Return the top `classification` classes per row instead of the tensor. */
  classification?: number;
  labels?: readonly string[];
}

export interface EncodedResponse {
  body: Buffer;
  contentType: string;
  /** Set when binary data follows the JSON header: the Inference-Header-Content-Length value. */
  headerLength?: number;
}

/**
 * `headerLength` is the Inference-Header-Content-Length header: undefined when the whole body
 * is JSON, 0 for a raw binary request (the body is the model's single input; only then is
 * `modelInputs` consulted), otherwise the JSON header's size with binary input data after it.
 */
export function decodeInferRequest(
  body: Buffer,
  headerLength: number | undefined,
  modelInputs: readonly TensorSpec[],
  parse: HeaderParser = parseHeaderLiftingData,
  bytesEncoding: BytesEncoding = 'utf8',
): DecodedInferRequest {
  if (headerLength === 0) return decodeRawRequest(body, modelInputs, bytesEncoding);
  const jsonLength = headerLength ?? body.length;
  if (!Number.isSafeInteger(jsonLength) || jsonLength < 0 || jsonLength > body.length) {
    throw new InferenceInputError(
      `Inference-Header-Content-Length ${jsonLength} does not fit a body of ${body.length} bytes`,
    );
  }
  const header = parseHeader(parse, body, jsonLength);
  if (header.id !== undefined && typeof header.id !== 'string') {
    throw new InferenceInputError('"id" must be a string');
  }
  const parameters = optionalObject(header.parameters, 'request "parameters"');
  const binaryDataOutput = optionalBoolean(parameters.binary_data_output, 'parameters.binary_data_output') ?? false;
  if (!Array.isArray(header.inputs)) throw new InferenceInputError('the request needs an "inputs" array');

  const inputs = Object.create(null) as Tensors;
  let offset = jsonLength;
  header.inputs.forEach((raw: unknown, index) => {
    const input = describeInput(raw, index);
    if (input.name in inputs) throw new InferenceInputError(`input ${quoted(input.name)} is given twice`);
    if (input.binarySize === undefined) {
      if (!('data' in input.raw)) {
        throw new InferenceInputError(`input ${quoted(input.name)}: needs "data" or parameters.binary_data_size`);
      }
      const tensor = readJsonTensor(input, input.raw.data, jsonLength);
      inputs[input.name] =
        bytesEncoding === 'latin1' && Array.isArray(tensor.data)
          ? { ...tensor, data: tensor.data.map(textAsByteString) }
          : tensor;
      return;
    }
    if ('data' in input.raw) {
      throw new InferenceInputError(`input ${quoted(input.name)}: has both "data" and parameters.binary_data_size`);
    }
    const end = offset + input.binarySize;
    if (end > body.length) {
      throw new InferenceInputError(
        `input ${quoted(input.name)}: binary_data_size ${input.binarySize} runs past the end of the body (${body.length - offset} bytes left)`,
      );
    }
    // Each BYTES element takes 4 bytes or more; a shape of 2^32 made its array throw a RangeError.
    if (input.datatype === 'BYTES' && input.count > input.binarySize) {
      throw new InferenceInputError(
        `input ${quoted(input.name)}: shape ${formatDims(input.dims)} of BYTES needs at least ${4 * input.count} bytes, got ${input.binarySize}`,
      );
    }
    inputs[input.name] = readBinaryTensor(
      input.name,
      input.datatype,
      input.dims,
      input.count,
      body,
      offset,
      end,
      bytesEncoding,
    );
    offset = end;
  });
  if (offset !== body.length) {
    throw new InferenceInputError(
      `the body has ${body.length - offset} bytes after the header and the inputs' binary_data_size`,
    );
  }
  return {
    ...(header.id === undefined ? {} : { id: header.id }),
    parameters,
    inputs,
    ...(header.outputs === undefined ? {} : { outputs: requestedOutputs(header.outputs, binaryDataOutput) }),
    binaryDataOutput,
  };
}

function parseHeader(parse: HeaderParser, body: Buffer, length: number): Record<string, unknown> {
  let header: unknown;
  try {
    header = parse(body, length);
  } catch (error) {
    if (error instanceof InferenceInputError) throw error;
    throw new InferenceInputError(`the request header is not JSON: ${(error as Error).message}`, { cause: error });
  }
  if (!isObject(header)) throw new InferenceInputError('the request header must be a JSON object');
  return header;
}

interface InputDescription {
  readonly raw: Record<string, unknown>;
  readonly name: string;
  readonly datatype: Datatype;
  readonly dims: number[];
  readonly count: number;
  readonly binarySize: number | undefined;
}

function describeInput(raw: unknown, index: number): InputDescription {
  if (!isObject(raw) || typeof raw.name !== 'string' || raw.name === '') {
    throw new InferenceInputError(`inputs[${index}] must be an object with a "name"`);
  }
  const { name, datatype, shape } = raw;
  if (!isDatatype(datatype)) {
    throw new InferenceInputError(
      `input ${quoted(name)}: datatype ${shownValue(datatype)} is not one of ${DATATYPES.join(', ')}`,
    );
  }
  if (!Array.isArray(shape) || !shape.every((dim) => Number.isSafeInteger(dim) && (dim as number) >= 0)) {
    throw new InferenceInputError(
      `input ${quoted(name)}: shape ${shownValue(shape)} must be an array of non-negative integers`,
    );
  }
  const dims = shape as number[];
  const count = dims.reduce((product, dim) => product * dim, 1);
  if (!Number.isSafeInteger(count))
    throw new InferenceInputError(`input ${quoted(name)}: shape ${formatDims(dims)} is too large`);
  const parameters = optionalObject(raw.parameters, `input ${quoted(name)}: "parameters"`);
  const binarySize = parameters.binary_data_size;
  if (binarySize !== undefined && !(Number.isSafeInteger(binarySize) && (binarySize as number) >= 0)) {
    throw new InferenceInputError(`input ${quoted(name)}: binary_data_size must be a non-negative integer`);
  }
  return { raw, name, datatype, dims, count, binarySize: binarySize as number | undefined };
}

function requestedOutputs(raw: unknown, binaryDataOutput: boolean): RequestedOutput[] {
  if (!Array.isArray(raw)) throw new InferenceInputError('"outputs" must be an array');
  const seen = new Set<string>();
  return raw.map((output: unknown, index) => {
    if (!isObject(output) || typeof output.name !== 'string' || output.name === '') {
      throw new InferenceInputError(`outputs[${index}] must be an object with a "name"`);
    }
    const name = output.name;
    if (seen.has(name)) throw new InferenceInputError(`output ${quoted(name)} is requested twice`);
    seen.add(name);
    const parameters = optionalObject(output.parameters, `output ${quoted(name)}: "parameters"`);
    const binary = optionalBoolean(parameters.binary_data, `output ${quoted(name)}: binary_data`) ?? binaryDataOutput;
    const classification = parameters.classification;
    if (classification === undefined) return { name, binary };
    if (!Number.isSafeInteger(classification) || (classification as number) < 1) {
      throw new InferenceInputError(`output ${quoted(name)}: classification must be a positive integer`);
    }
    return { name, binary, classification: classification as number };
  });
}

/** Triton's raw binary request: the whole body is the single input; rows follow from its size. */
function decodeRawRequest(
  body: Buffer,
  modelInputs: readonly TensorSpec[],
  bytesEncoding: BytesEncoding,
): DecodedInferRequest {
  const [spec, ...others] = modelInputs;
  if (!spec || others.length > 0) {
    throw new InferenceInputError(
      `a raw binary request (Inference-Header-Content-Length: 0) needs a model with one input, this one has ${modelInputs.length}`,
    );
  }
  const { name, datatype, shape } = spec;
  const batched = shape[0] === -1;
  const rowShape = batched ? shape.slice(1) : shape;
  if (rowShape.includes(-1)) {
    throw new InferenceInputError(
      `input ${quoted(name)}: a raw binary request needs every dimension but the first fixed, the model's shape is [${shape.join(', ')}]`,
    );
  }
  const rowElements = rowShape.reduce((product, dim) => product * dim, 1);
  let tensor: Tensor;
  if (datatype === 'BYTES') {
    // As in Triton: the body is one element, so the input must hold exactly one.
    if (rowElements !== 1) {
      throw new InferenceInputError(
        `input ${quoted(name)}: a raw BYTES request is one element, the model's shape [${shape.join(', ')}] holds more`,
      );
    }
    tensor = { datatype, dims: batched ? [1, ...rowShape] : shape, data: [body.toString(bytesEncoding)] };
  } else {
    const rowBytes = rowElements * elementSize(datatype);
    const rows = batched ? body.length / rowBytes : 1;
    if (!Number.isInteger(rows) || rows === 0) {
      throw new InferenceInputError(
        `input ${quoted(name)}: ${body.length} bytes are not a whole number of ${rowBytes}-byte rows of [${shape.join(', ')}] ${datatype}`,
      );
    }
    const dims = batched ? [rows, ...rowShape] : [...shape];
    tensor = readBinaryTensor(name, datatype, dims, rows * rowElements, body, 0, body.length);
  }
  const inputs = Object.create(null) as Tensors;
  inputs[name] = tensor;
  // Triton returns every output of a raw request as binary data: the client sent no header.
  return { parameters: {}, inputs, binaryDataOutput: true };
}

export function encodeInferResponse(response: {
  model_name: string;
  model_version?: string;
  id?: string;
  parameters?: Record<string, unknown>;
  outputs: ResponseOutput[];
}): EncodedResponse {
  let json = `{"model_name":${JSON.stringify(response.model_name)}`;
  if (response.model_version !== undefined) json += `,"model_version":${JSON.stringify(response.model_version)}`;
  if (response.id !== undefined) json += `,"id":${JSON.stringify(response.id)}`;
  if (response.parameters !== undefined) json += `,"parameters":${JSON.stringify(response.parameters)}`;
  json += ',"outputs":[';
  const binaryParts: Uint8Array[] = [];
  response.outputs.forEach((output, index) => {
    const tensor =
      output.classification === undefined
        ? output.tensor
        : classify(output.name, output.tensor, output.classification, output.labels);
    json += `${index === 0 ? '' : ','}{"name":${JSON.stringify(output.name)},"datatype":"${tensor.datatype}","shape":[${tensor.dims.join(',')}],`;
    if (output.binary) {
      const bytes = binaryTensorBytes(tensor);
      binaryParts.push(bytes);
      json += `"parameters":{"binary_data_size":${bytes.byteLength}}}`;
    } else {
      json += `"data":${jsonTensorData(tensor)}}`;
    }
  });
  json += ']}';
  const header = Buffer.from(json);
  if (binaryParts.length === 0) return { body: header, contentType: 'application/json' };
  return {
    body: Buffer.concat([header, ...binaryParts]),
    contentType: 'application/octet-stream',
    headerLength: header.length,
  };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalObject(value: unknown, what: string): Record<string, unknown> {
  if (value === undefined) return {};
  if (!isObject(value)) throw new InferenceInputError(`${what} must be an object`);
  return value;
}

function optionalBoolean(value: unknown, what: string): boolean | undefined {
  if (value === undefined || typeof value === 'boolean') return value;
  throw new InferenceInputError(`${what} must be true or false`);
}
