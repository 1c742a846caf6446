import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { request } from 'undici';
import { InputFileError, ModelNotFoundError, UsageError } from '../core/errors.js';
import { bytesPerElement, isDatatype, ortTypeOf, type Datatype } from '../core/datatypes.js';
import type { Protocol } from './report-types.js';

/**
 * What every request of a bench run sends. The body is built once and the same Buffer (and
 * headers object) goes out with every request, so the client's hot loop allocates nothing
 * for it.
 */
export interface RequestPayload {
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  /** Items one request carries (its batch dimension), for items per second. */
  readonly rows: number;
}

export interface TensorMetadata {
  name: string;
  datatype: string;
  shape: number[];
}

/** A KServe v2 model metadata answer (GET /v2/models/{model}). */
export interface ModelMetadata {
  name: string;
  versions?: string[];
  platform?: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

export interface RandomPayloadOptions {
  readonly protocol: Protocol;
  /** Rows per request: the batch dimension (a first -1). */
  readonly clientBatch: number;
  /** Same seed, same bytes. */
  readonly seed?: number;
  /**
   * Shapes by input name for the dimensions the metadata leaves variable: the full shape
   * (a first -1 still means `clientBatch`) or, for a batched input, the dimensions after the
   * batch dimension. Variable dimensions not overridden are 1.
   */
  readonly shapeOverrides?: Record<string, number[]>;
}

export async function fetchModelMetadata(inferenceUrl: string, model: string): Promise<ModelMetadata> {
  const url = `${inferenceUrl.replace(/\/+$/, '')}/v2/models/${encodeURIComponent(model)}`;
  let status: number;
  let text: string;
  try {
    const response = await request(url, { headersTimeout: 10_000, bodyTimeout: 10_000 });
    status = response.statusCode;
    text = await response.body.text();
  } catch (error) {
    throw new UsageError(`cannot reach ${url}: ${(error as Error).message}`, { cause: error });
  }
  if (status === 404) {
    throw new ModelNotFoundError(`the server at ${inferenceUrl} has no model "${model}": ${text}`);
  }
  if (status !== 200) throw new UsageError(`GET ${url} answered ${status}: ${text}`);
  let metadata: unknown;
  try {
    metadata = JSON.parse(text);
  } catch {
    throw new UsageError(`GET ${url} did not answer JSON model metadata`);
  }
  if (!isModelMetadata(metadata)) {
    throw new UsageError(`GET ${url} did not answer KServe v2 model metadata (name, inputs, outputs)`);
  }
  return metadata;
}

function isModelMetadata(value: unknown): value is ModelMetadata {
  const isTensors = (tensors: unknown): boolean =>
    Array.isArray(tensors) &&
    tensors.every(
      (tensor: Partial<TensorMetadata> | null) =>
        typeof tensor?.name === 'string' &&
        typeof tensor.datatype === 'string' &&
        Array.isArray(tensor.shape) &&
        tensor.shape.every(Number.isInteger),
    );
  const metadata = value as Partial<ModelMetadata> | null;
  return typeof metadata?.name === 'string' && isTensors(metadata.inputs) && isTensors(metadata.outputs);
}

interface ResolvedInput {
  readonly name: string;
  readonly datatype: Datatype;
  readonly shape: number[];
  readonly count: number;
}

/** A request of random tensors shaped after the metadata. */
export function randomPayload(metadata: ModelMetadata, options: RandomPayloadOptions): RequestPayload {
  const { protocol, clientBatch } = options;
  if (!Number.isSafeInteger(clientBatch) || clientBatch < 1) {
    throw new UsageError(`the client batch must be a positive integer, got ${clientBatch}`);
  }
  const overrides = options.shapeOverrides ?? {};
  const unknown = Object.keys(overrides).filter((name) => !metadata.inputs.some((input) => input.name === name));
  if (unknown.length > 0) {
    throw new UsageError(
      `shape given for unknown input ${unknown.map((name) => `"${name}"`).join(', ')} (the model takes ${inputNames(metadata)})`,
    );
  }
  if (metadata.inputs.length === 0) throw new UsageError(`model ${metadata.name} has no inputs`);
  const inputs = metadata.inputs.map((input) => resolveInput(input, clientBatch, overrides[input.name]));
  const random = mulberry32(options.seed ?? Math.floor(Math.random() * 2 ** 32));
  const values = inputs.map((input) => randomValues(input, random));
  const rows = metadata.inputs[0]?.shape[0] === -1 ? clientBatch : 1;

  if (protocol === 'torchserve') {
    const named: Record<string, unknown> = {};
    inputs.forEach((input, index) => {
      named[input.name] = nest(values[index] as Value[], input.shape);
    });
    return jsonPayload(predictionsPath(metadata.name), Buffer.from(JSON.stringify(named)), rows);
  }
  if (protocol === 'v2-json') {
    const body = {
      inputs: inputs.map((input, index) => ({ ...describe(input), data: values[index] })),
    };
    return jsonPayload(inferPath(metadata.name), Buffer.from(JSON.stringify(body)), rows);
  }
  const parts = inputs.map((input, index) => binaryTensor(input, values[index] as Value[]));
  const header = Buffer.from(
    JSON.stringify({
      inputs: inputs.map((input, index) => ({
        ...describe(input),
        parameters: { binary_data_size: (parts[index] as Buffer).length },
      })),
      parameters: { binary_data_output: true },
    }),
  );
  return {
    path: inferPath(metadata.name),
    headers: {
      'content-type': 'application/octet-stream',
      'inference-header-content-length': String(header.length),
    },
    body: Buffer.concat([header, ...parts]),
    rows,
  };
}

/**
 * A request from a file. `.json`: a v2 JSON infer body (v2-json, v2-binary) or a TorchServe
 * body, sent as it is. Anything else is raw bytes: a TorchServe body (an image, say), or a
 * Triton raw binary request (Inference-Header-Content-Length: 0) for a single-input model.
 */
export async function payloadFromFile(
  file: string,
  metadata: ModelMetadata,
  protocol: Protocol,
): Promise<RequestPayload> {
  let body: Buffer;
  try {
    body = await readFile(file);
  } catch (error) {
    throw new InputFileError(`cannot read the input file ${file}: ${(error as Error).message}`, { cause: error });
  }
  const batched = metadata.inputs[0]?.shape[0] === -1;
  const extension = extname(file).toLowerCase();
  if (extension === '.json') {
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch (error) {
      throw new InputFileError(`${file} is not JSON: ${(error as Error).message}`, { cause: error });
    }
    if (protocol === 'torchserve') {
      return jsonPayload(predictionsPath(metadata.name), body, batched ? torchserveRows(parsed, metadata) : 1);
    }
    const first = (parsed as { inputs?: { shape?: unknown }[] } | null)?.inputs?.[0];
    if (!first || !Array.isArray(first.shape)) {
      throw new InputFileError(`${file} is not a KServe v2 infer request: it needs an "inputs" array with shapes`);
    }
    const rows = batched && typeof first.shape[0] === 'number' ? first.shape[0] : 1;
    return jsonPayload(inferPath(metadata.name), body, rows);
  }
  if (protocol === 'torchserve') {
    const contentType = CONTENT_TYPES[extension] ?? 'application/octet-stream';
    return { path: predictionsPath(metadata.name), headers: { 'content-type': contentType }, body, rows: 1 };
  }
  if (protocol === 'v2-json') {
    throw new UsageError(
      `the v2-json protocol sends a .json infer body; ${file} is not one (use v2-binary for raw bytes)`,
    );
  }
  const [input, ...others] = metadata.inputs;
  if (!input || others.length > 0) {
    throw new UsageError(
      `a raw binary request needs a model with one input; ${metadata.name} takes ${inputNames(metadata)}: give a .json infer body instead`,
    );
  }
  return {
    path: inferPath(metadata.name),
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': '0' },
    body,
    rows: batched ? rawRows(input, body.length, file) : 1,
  };
}

const CONTENT_TYPES: Record<string, string> = { '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg' };

function inferPath(model: string): string {
  return `/v2/models/${encodeURIComponent(model)}/infer`;
}

function predictionsPath(model: string): string {
  return `/predictions/${encodeURIComponent(model)}`;
}

function jsonPayload(path: string, body: Buffer, rows: number): RequestPayload {
  return { path, headers: { 'content-type': 'application/json' }, body, rows };
}

function inputNames(metadata: ModelMetadata): string {
  return metadata.inputs.map((input) => input.name).join(', ') || 'no inputs';
}

function describe(input: ResolvedInput): { name: string; datatype: Datatype; shape: number[] } {
  return { name: input.name, datatype: input.datatype, shape: input.shape };
}

/** Rows of a TorchServe JSON body: the outer length of the first input's nested arrays. */
function torchserveRows(parsed: unknown, metadata: ModelMetadata): number {
  const first = Array.isArray(parsed)
    ? parsed
    : (parsed as Record<string, unknown> | null)?.[metadata.inputs[0]?.name ?? ''];
  return Array.isArray(first) && first.length > 0 ? first.length : 1;
}

function rawRows(input: TensorMetadata, bytes: number, file: string): number {
  if (!isDatatype(input.datatype) || input.datatype === 'BYTES' || input.shape.slice(1).includes(-1)) return 1;
  const rowBytes = input.shape.slice(1).reduce((product, dim) => product * dim, elementBytes(input.datatype));
  if (bytes === 0 || bytes % rowBytes !== 0) {
    throw new UsageError(
      `${file} has ${bytes} bytes, not a whole number of ${rowBytes}-byte rows of input "${input.name}" [${input.shape.join(', ')}] ${input.datatype}`,
    );
  }
  return bytes / rowBytes;
}

function resolveInput(input: TensorMetadata, clientBatch: number, override: number[] | undefined): ResolvedInput {
  if (!isDatatype(input.datatype)) {
    throw new UsageError(`input "${input.name}": datatype ${input.datatype} is not a KServe v2 datatype`);
  }
  const model = input.shape;
  const batched = model[0] === -1;
  let wanted: readonly number[] = model;
  if (override) {
    if (override.length === model.length) wanted = override;
    else if (batched && override.length === model.length - 1) wanted = [-1, ...override];
    else {
      throw new UsageError(
        `input "${input.name}": shape [${override.join(', ')}] does not fit the model's [${model.join(', ')}]`,
      );
    }
  }
  const shape = wanted.map((dim, axis) => {
    const modelDim = model[axis] as number;
    if (axis === 0 && batched) {
      if (dim !== -1 && dim !== clientBatch) {
        throw new UsageError(
          `input "${input.name}": the batch dimension is the client batch (${clientBatch}), the shape gives ${dim}`,
        );
      }
      return clientBatch;
    }
    if (dim === -1) return modelDim === -1 ? 1 : modelDim;
    if (!Number.isSafeInteger(dim) || dim < 1 || (modelDim !== -1 && dim !== modelDim)) {
      throw new UsageError(
        `input "${input.name}": dimension ${axis} of [${wanted.join(', ')}] does not fit the model's [${model.join(', ')}]`,
      );
    }
    return dim;
  });
  if (!batched && clientBatch !== 1) {
    throw new UsageError(
      `input "${input.name}" [${model.join(', ')}] has no batch dimension (a first -1): the client batch must be 1`,
    );
  }
  return { name: input.name, datatype: input.datatype, shape, count: shape.reduce((a, b) => a * b, 1) };
}

type Value = number | boolean | string;

/**
 * Floats are multiples of 1/1024 in [-1, 1], exact in FP16, FP32 and FP64 alike, so the JSON
 * and binary forms carry the same tensor. Integers are small (0–99): valid as token ids or
 * indices for most models. BYTES are 8 lowercase letters.
 */
function randomValues(input: ResolvedInput, random: () => number): Value[] {
  const values = new Array<Value>(input.count);
  for (let i = 0; i < input.count; i++) {
    switch (input.datatype) {
      case 'FP16':
      case 'FP32':
      case 'FP64':
        values[i] = (Math.floor(random() * 2049) - 1024) / 1024;
        break;
      case 'BOOL':
        values[i] = random() < 0.5;
        break;
      case 'BYTES':
        values[i] = String.fromCharCode(...Array.from({ length: 8 }, () => 97 + Math.floor(random() * 26)));
        break;
      default:
        values[i] = Math.floor(random() * 100);
    }
  }
  return values;
}

function elementBytes(datatype: Exclude<Datatype, 'BYTES'>): number {
  return bytesPerElement(ortTypeOf(datatype) as Parameters<typeof bytesPerElement>[0]);
}

/** Triton's binary layout: little-endian, row-major; BOOL a byte; BYTES length-prefixed UTF-8. */
function binaryTensor(input: ResolvedInput, values: readonly Value[]): Buffer {
  const { datatype } = input;
  if (datatype === 'BYTES') {
    return Buffer.concat(
      values.map((value) => {
        const text = Buffer.from(String(value));
        const length = Buffer.alloc(4);
        length.writeUInt32LE(text.length);
        return Buffer.concat([length, text]);
      }),
    );
  }
  const size = elementBytes(datatype);
  const bytes = Buffer.alloc(values.length * size);
  values.forEach((value, index) => {
    const at = index * size;
    const number = Number(value);
    switch (datatype) {
      case 'FP16':
        return bytes.writeUInt16LE(exactHalf(number), at);
      case 'FP32':
        return bytes.writeFloatLE(number, at);
      case 'FP64':
        return bytes.writeDoubleLE(number, at);
      case 'INT64':
        return bytes.writeBigInt64LE(BigInt(number), at);
      case 'UINT64':
        return bytes.writeBigUInt64LE(BigInt(number), at);
      case 'INT8':
      case 'INT16':
      case 'INT32':
        return bytes.writeIntLE(number, at, size);
      default:
        return bytes.writeUIntLE(number, at, size);
    }
  });
  return bytes;
}

/** Half-precision bits of k/1024, |k| ≤ 1024: always a normal half, so no rounding is needed. */
function exactHalf(value: number): number {
  const units = Math.round(Math.abs(value) * 1024);
  if (units === 0) return 0;
  const exponent = 31 - Math.clz32(units);
  const bits = ((exponent + 5) << 10) | ((units - 2 ** exponent) << (10 - exponent));
  return value < 0 ? bits | 0x8000 : bits;
}

/** Flat row-major values as nested arrays of `shape`, for TorchServe JSON bodies. */
function nest(values: readonly Value[], shape: readonly number[]): unknown {
  if (shape.length === 0) return values[0];
  const [outer = 1, ...inner] = shape;
  const stride = inner.reduce((a, b) => a * b, 1);
  return Array.from({ length: outer }, (_, index) => nest(values.slice(index * stride, (index + 1) * stride), inner));
}

/** A small seeded PRNG (mulberry32): uniform in [0, 1). */
function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
