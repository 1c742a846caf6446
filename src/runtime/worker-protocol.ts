import type ort from 'onnxruntime-node';
import { BatchserveError, InferenceFailedError, errorClasses } from '../core/errors.js';
import { dataFromBytes, type Datatype } from '../core/datatypes.js';
import type { Tensor, Tensors } from '../core/tensors.js';
import type { HandlerRequest } from '../core/request.js';
import { fromOrtTensors, isTensorMap, toOrtTensor } from '../handlers/ort-tensors.js';

/**
 * What crosses between the main thread and an instance's worker thread. A plain tensor
 * travels as itself, but its numeric data as a Uint8Array over the same bytes: cloning one
 * costs 9 µs for 110 KB where cloning the same Float32Array costs 290 µs (measured, Node 20).
 * On the worker's side a request's tensors become onnxruntime's straight from the wire, and a
 * handler's answer goes back to the wire straight from onnxruntime's: the main thread never
 * builds an `ort.Tensor`.
 */
export interface WireTensor {
  readonly datatype: Datatype;
  readonly dims: readonly number[];
  /** Strings for BYTES; every other datatype as its raw bytes. */
  readonly data: Uint8Array | string[];
}

export type WireRequest =
  | { readonly kind: 'tensors'; readonly inputs: Record<string, WireTensor>; readonly rows: number }
  | { readonly kind: 'body'; readonly body: Uint8Array; readonly contentType: string | undefined }
  | { readonly kind: 'texts'; readonly texts: readonly string[] };

export type WireResponse =
  | { readonly kind: 'tensors'; readonly tensors: Record<string, WireTensor> }
  | { readonly kind: 'bytes'; readonly bytes: Uint8Array }
  | { readonly kind: 'value'; readonly value: unknown };

export interface WireError {
  readonly code: string;
  readonly message: string;
  /** A config error's problems (ConfigInvalidError, ModelSignatureMismatchError). */
  readonly problems?: readonly string[];
}

export function toWireTensor({ datatype, dims, data }: Tensor): WireTensor {
  return {
    datatype,
    dims,
    data: Array.isArray(data) ? data : new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  };
}

export function fromWireTensor({ datatype, dims, data }: WireTensor): Tensor {
  return {
    datatype,
    dims,
    data: Array.isArray(data) ? data : dataFromBytes(datatype as Exclude<Datatype, 'BYTES'>, data),
  };
}

export function toWireTensors(tensors: Readonly<Tensors>): Record<string, WireTensor> {
  const wire: Record<string, WireTensor> = {};
  for (const name in tensors) wire[name] = toWireTensor(tensors[name] as Tensor);
  return wire;
}

export function fromWireTensors(wire: Record<string, WireTensor>): Tensors {
  const tensors: Tensors = {};
  for (const name in wire) tensors[name] = fromWireTensor(wire[name] as WireTensor);
  return tensors;
}

export function toWireRequest(request: HandlerRequest): WireRequest {
  switch (request.kind) {
    case 'tensors':
      return { kind: 'tensors', inputs: toWireTensors(request.inputs), rows: request.rows };
    case 'body':
      return { kind: 'body', body: request.body, contentType: request.contentType };
    case 'texts':
      return { kind: 'texts', texts: request.texts };
  }
}

/** The distinct buffers under a request's numeric tensors and body, for a transfer list. */
export function buffersOf(wire: WireRequest): ArrayBuffer[] {
  if (wire.kind === 'body') return [wire.body.buffer as ArrayBuffer];
  if (wire.kind !== 'tensors') return [];
  const buffers = new Set<ArrayBuffer>();
  for (const name in wire.inputs) {
    const { data } = wire.inputs[name] as WireTensor;
    if (!Array.isArray(data)) buffers.add(data.buffer as ArrayBuffer);
  }
  return [...buffers];
}

/** In the worker: the request as its handler takes it, with onnxruntime tensors over the received bytes. */
export function handlerRequestFromWire(wire: WireRequest): HandlerRequest<ort.Tensor> {
  switch (wire.kind) {
    case 'tensors': {
      const inputs: Record<string, ort.Tensor> = {};
      for (const name in wire.inputs) inputs[name] = toOrtTensor(fromWireTensor(wire.inputs[name] as WireTensor));
      return { kind: 'tensors', inputs, rows: wire.rows, movable: false };
    }
    case 'body': {
      const { body } = wire;
      const buffer = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
      return { kind: 'body', body: buffer, contentType: wire.contentType, movable: false };
    }
    case 'texts':
      return { kind: 'texts', texts: wire.texts };
  }
}

/** In the worker: a handler's answer for the wire; onnxruntime tensors go as their bytes. */
export function wireFromHandlerResponse(response: unknown): WireResponse {
  if (Buffer.isBuffer(response)) return { kind: 'bytes', bytes: response };
  if (isTensorMap(response)) return { kind: 'tensors', tensors: toWireTensors(fromOrtTensors(response)) };
  return { kind: 'value', value: response };
}

/** On the server's thread: the answer as it was given, its tensors plain. */
export function fromWireResponse(wire: WireResponse): unknown {
  switch (wire.kind) {
    case 'tensors':
      return fromWireTensors(wire.tensors);
    case 'bytes':
      return Buffer.from(wire.bytes.buffer, wire.bytes.byteOffset, wire.bytes.byteLength);
    case 'value':
      return wire.value;
  }
}

export function toWireError(error: unknown): WireError {
  if (error instanceof BatchserveError) {
    const { problems } = error as { problems?: readonly string[] };
    return { code: error.code, message: error.message, ...(problems ? { problems } : {}) };
  }
  return { code: InferenceFailedError.code, message: error instanceof Error ? error.message : String(error) };
}

const byCode = new Map<string, (typeof errorClasses)[number]>(
  errorClasses.map((ErrorClass) => [ErrorClass.code, ErrorClass]),
);

/** The worker's error as the same class on this side, so its HTTP status and code hold. */
export function fromWireError(wire: WireError): BatchserveError {
  const ErrorClass = byCode.get(wire.code);
  if (!ErrorClass) return new InferenceFailedError(wire.message);
  if (ErrorClass.length < 2) return new (ErrorClass as new (message: string) => BatchserveError)(wire.message);
  // One that builds its message from parts (a config's source and problems, refused while the
  // instance loads) is rebuilt around the message as sent: the base constructor, run as that class.
  const error = Reflect.construct(BatchserveError, [wire.message], ErrorClass);
  return wire.problems ? Object.assign(error, { problems: wire.problems }) : error;
}
