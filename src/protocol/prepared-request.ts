import { InferenceInputError, UsageError } from '../core/errors.js';
import { quoted, shownValue } from '../core/quote.js';
import { batchPlacement, checkRequestTensors, type Tensors, type TensorSpec } from '../core/tensors.js';
import type { BytesEncoding } from './binary-tensor.js';
import { decodeInferRequest, type DecodedInferRequest, type HeaderParser, type RequestedOutput } from './v2-codec.js';

/**
 * What the protocol layer needs of a model version to check a request against it (the ONNX
 * graph's own inputs and outputs are runtime's `GraphSignature`).
 */
export interface ModelSignature {
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
  /** max_batch_size > 0: every input's first dimension is the batch. */
  readonly batching: boolean;
  /** How BYTES inputs are decoded; default utf8 text, latin1 byte strings for pipelines. */
  readonly bytesEncoding?: BytesEncoding;
}

/**
 * One inference request, decoded and checked against the model version that will run it.
 * The batcher, the handler and the worker trust it: nothing here is checked again. Frozen.
 */
export interface PreparedRequest {
  readonly id: string | undefined;
  /** Every input the model takes, none it does not, each of the right datatype and shape. */
  readonly inputs: Tensors;
  /** Rows the request adds to a batch (its batch dimension; 1 when the model does not batch). */
  readonly rows: number;
  /** Only requests with the same key (their non-batch dimensions) share a batch. */
  readonly shapeKey: string;
  /** The outputs to answer with, each one the model has. */
  readonly outputs: readonly RequestedOutput[];
  /** Triton's `priority` parameter; undefined = the lowest level. */
  readonly priority: number | undefined;
  /** Triton's `timeout` parameter in microseconds; it may only shorten the model's default. */
  readonly timeoutUs: number | undefined;
}

/** How a v2 body is framed, from its headers. */
export interface V2Framing {
  /** The Inference-Header-Content-Length header as sent; undefined when absent. */
  readonly headerLength: string | undefined;
  /** Content-Type application/octet-stream: binary data follows a JSON header. */
  readonly binaryBody: boolean;
}

/**
 * A KServe v2 infer body → a PreparedRequest for `signature`: framing, JSON, tensors,
 * placement, requested outputs and request parameters, each checked here and only here.
 * `parseHeader` is the JSON header parser; the default lifts long numeric arrays out of the
 * text (see json-data-lift), the differential test passes plain JSON.parse.
 */
export function prepareV2Request(
  body: Buffer,
  framing: V2Framing,
  signature: ModelSignature,
  parseHeader?: HeaderParser,
): PreparedRequest {
  const headerLength = framing.headerLength === undefined ? undefined : Number(framing.headerLength);
  if (framing.headerLength !== undefined && !/^\s*\d+\s*$/.test(framing.headerLength)) {
    throw new InferenceInputError(
      `Inference-Header-Content-Length ${quoted(framing.headerLength)} is not a length in bytes`,
    );
  }
  if (headerLength === undefined && framing.binaryBody) {
    throw new InferenceInputError('a binary body needs the Inference-Header-Content-Length header');
  }
  return prepareDecoded(
    decodeInferRequest(body, headerLength, signature.inputs, parseHeader, signature.bytesEncoding),
    signature,
  );
}

/**
 * A decoded request (from any front end: a v2 body here, a gRPC message later) → the checked
 * PreparedRequest for `signature`.
 */
export function prepareDecoded(decoded: DecodedInferRequest, signature: ModelSignature): PreparedRequest {
  checkRequestTensors(decoded.inputs, signature.inputs);
  const outputs =
    decoded.outputs ?? signature.outputs.map((spec) => ({ name: spec.name, binary: decoded.binaryDataOutput }));
  for (const output of outputs) {
    if (!signature.outputs.some((spec) => spec.name === output.name)) {
      throw new InferenceInputError(
        `unknown output ${quoted(output.name)} (the model has ${signature.outputs.map((spec) => spec.name).join(', ')})`,
      );
    }
  }
  const { timeout, priority } = decoded.parameters;
  return Object.freeze({
    id: decoded.id,
    inputs: Object.freeze(decoded.inputs),
    ...batchPlacement(decoded.inputs, signature.inputs, signature.batching),
    outputs: Object.freeze(outputs),
    priority: requestControl('priority', priority),
    timeoutUs: requestControl('timeout', timeout),
  });
}

/**
 * The same request for another version (a shadow): its tensors are checked against that
 * version's inputs, which may differ, and placed in its batches.
 */
export function retarget(request: PreparedRequest, signature: ModelSignature): PreparedRequest {
  checkRequestTensors(request.inputs, signature.inputs);
  return Object.freeze({ ...request, ...batchPlacement(request.inputs, signature.inputs, signature.batching) });
}

/** Triton's request parameters `timeout` and `priority`: non-negative integers, 0 = unset. */
function requestControl(key: 'timeout' | 'priority', value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (!Number.isSafeInteger(value) || (value as number) < 0) {
    throw new UsageError(`parameter "${key}" must be a non-negative integer, got ${shownValue(value)}`);
  }
  return value === 0 ? undefined : (value as number);
}
