import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { request, type Dispatcher } from 'undici';
import { InputFileError, ModelNotFoundError, UsageError } from '../core/errors.js';
import { isDatatype, type Datatype } from '../core/datatypes.js';
import { grpcInferRequest, type RawInput } from './grpc-payload.js';
import type { Protocol } from './report-types.js';
import { mulberry32 } from '../core/random.js';
import { binaryTensor, elementBytes, randomValues, type Value } from './tensor-values.js';

/**
 * What every request of a bench run sends. The body is built once and the same Buffer (and
 * headers object) goes out with every request, so the client's hot loop allocates nothing
 * for it.
 */
export interface RequestPayload {
  readonly protocol: Protocol;
  /** The HTTP path, or the gRPC method's (`/inference.GRPCInferenceService/ModelInfer`). */
  readonly path: string;
  readonly headers: Record<string, string>;
  /** For gRPC, the serialized ModelInferRequest. */
  readonly body: Buffer;
  /**
   * `--input-pool N`: N distinct bodies (the first is `body`), sent in rotation so a response
   * cache sees N inputs again and again. Every other field holds for all of them.
   */
  readonly bodies?: readonly Buffer[];
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

export async function fetchModelMetadata(
  inferenceUrl: string,
  model: string,
  dispatcher?: Dispatcher,
): Promise<ModelMetadata> {
  const url = `${inferenceUrl.replace(/\/+$/, '')}/v2/models/${encodeURIComponent(model)}`;
  let status: number;
  let text: string;
  try {
    const response = await request(url, {
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
      ...(dispatcher ? { dispatcher } : {}),
    });
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
  const values = inputs.map((input) => randomValues(input.datatype, input.count, random));
  const rows = metadata.inputs[0]?.shape[0] === -1 ? clientBatch : 1;

  if (protocol === 'torchserve') {
    const named: Record<string, unknown> = {};
    inputs.forEach((input, index) => {
      named[input.name] = nest(values[index] as Value[], input.shape);
    });
    return jsonPayload(protocol, predictionsPath(metadata.name), Buffer.from(JSON.stringify(named)), rows);
  }
  if (protocol === 'v2-json') {
    const body = {
      inputs: inputs.map((input, index) => ({ ...describe(input), data: values[index] })),
    };
    return jsonPayload(protocol, inferPath(metadata.name), Buffer.from(JSON.stringify(body)), rows);
  }
  const parts = inputs.map((input, index) => binaryTensor(input.datatype, values[index] as Value[]));
  if (protocol === 'grpc' || protocol === 'grpc-stream') {
    const raw = inputs.map((input, index) => ({ ...describe(input), data: parts[index] as Buffer }));
    return grpcPayload(protocol, metadata.name, raw, rows);
  }
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
    protocol,
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
 * gRPC sends a v2 JSON body's inputs, or raw bytes as a single input's, in raw_input_contents.
 */
export async function payloadFromFile(
  file: string,
  metadata: ModelMetadata,
  protocol: Protocol,
): Promise<RequestPayload> {
  return payloadFromBytes(await readInputFile(file), file, metadata, protocol);
}

export async function readInputFile(file: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (error) {
    throw new InputFileError(`cannot read the input file ${file}: ${(error as Error).message}`, { cause: error });
  }
}

/** payloadFromFile's request from the file's bytes (or a variant of them: `--input-pool`). */
export function payloadFromBytes(
  body: Buffer,
  file: string,
  metadata: ModelMetadata,
  protocol: Protocol,
): RequestPayload {
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
      return jsonPayload(
        protocol,
        predictionsPath(metadata.name),
        body,
        batched ? torchserveRows(parsed, metadata) : 1,
      );
    }
    const first = (parsed as { inputs?: { shape?: unknown }[] } | null)?.inputs?.[0];
    if (!first || !Array.isArray(first.shape)) {
      throw new InputFileError(`${file} is not a KServe v2 infer request: it needs an "inputs" array with shapes`);
    }
    const rows = batched && typeof first.shape[0] === 'number' ? first.shape[0] : 1;
    if (protocol === 'grpc' || protocol === 'grpc-stream') {
      return grpcPayload(protocol, metadata.name, jsonInputs(parsed, file), rows);
    }
    return jsonPayload(protocol, inferPath(metadata.name), body, rows);
  }
  if (protocol === 'torchserve') {
    const contentType = CONTENT_TYPES[extension] ?? 'application/octet-stream';
    return { protocol, path: predictionsPath(metadata.name), headers: { 'content-type': contentType }, body, rows: 1 };
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
  const rows = batched ? rawRows(input, body.length, file) : 1;
  if (protocol === 'grpc' || protocol === 'grpc-stream') {
    const shape = batched ? [rows, ...input.shape.slice(1)] : input.shape;
    if (input.datatype === 'BYTES' || shape.includes(-1)) {
      throw new UsageError(
        `gRPC requests carry a shape, which raw bytes leave open for input "${input.name}" [${input.shape.join(', ')}] ${input.datatype}: give a .json infer body instead`,
      );
    }
    return grpcPayload(
      protocol,
      metadata.name,
      [{ name: input.name, datatype: input.datatype, shape, data: body }],
      rows,
    );
  }
  return {
    protocol,
    path: inferPath(metadata.name),
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': '0' },
    body,
    rows,
  };
}

function grpcPayload(
  protocol: 'grpc' | 'grpc-stream',
  model: string,
  inputs: readonly RawInput[],
  rows: number,
): RequestPayload {
  return { protocol, headers: {}, ...grpcInferRequest(model, inputs, protocol === 'grpc-stream'), rows };
}

/** A v2 JSON infer body's inputs, their `data` in Triton's binary layout. */
function jsonInputs(parsed: unknown, file: string): RawInput[] {
  const inputs = (parsed as { inputs: { name?: unknown; datatype?: unknown; shape?: unknown; data?: unknown }[] })
    .inputs;
  return inputs.map((input, index) => {
    const { name, datatype, shape, data } = input;
    const what = typeof name === 'string' ? `input "${name}"` : `inputs[${index}]`;
    if (typeof name !== 'string' || typeof datatype !== 'string' || !isDatatype(datatype)) {
      throw new InputFileError(`${file}: ${what} needs a name and a KServe v2 datatype`);
    }
    if (!Array.isArray(data) || !Array.isArray(shape) || !shape.every(Number.isSafeInteger)) {
      throw new InputFileError(`${file}: ${what} needs a shape of integers and its values in "data"`);
    }
    return { name, datatype, shape, data: binaryTensor(datatype, data.flat(Infinity) as Value[]) };
  });
}

const CONTENT_TYPES: Record<string, string> = { '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg' };

function inferPath(model: string): string {
  return `/v2/models/${encodeURIComponent(model)}/infer`;
}

function predictionsPath(model: string): string {
  return `/predictions/${encodeURIComponent(model)}`;
}

function jsonPayload(protocol: Protocol, path: string, body: Buffer, rows: number): RequestPayload {
  return { protocol, path, headers: { 'content-type': 'application/json' }, body, rows };
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

/** Flat row-major values as nested arrays of `shape`, for TorchServe JSON bodies. */
function nest(values: readonly Value[], shape: readonly number[]): unknown {
  if (shape.length === 0) return values[0];
  const [outer = 1, ...inner] = shape;
  const stride = inner.reduce((a, b) => a * b, 1);
  return Array.from({ length: outer }, (_, index) => nest(values.slice(index * stride, (index + 1) * stride), inner));
}
