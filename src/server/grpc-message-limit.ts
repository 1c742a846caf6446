import type { Datatype } from '../core/datatypes.js';
import type { CompleteModelConfig } from '../config/model-config.js';

/**
 * Bytes an element can take on the wire, in the larger of its two forms: raw (its size) or
 * typed `contents`, where integers are varints (a negative int32 takes 10 bytes, a uint32 up to
 * 5) and floats are packed. BYTES elements have no fixed size.
 */
const WIRE_BYTES: Record<Datatype, number> = {
  BOOL: 1,
  UINT8: 5,
  UINT16: 5,
  UINT32: 5,
  UINT64: 10,
  INT8: 10,
  INT16: 10,
  INT32: 10,
  INT64: 10,
  FP16: 2,
  FP32: 4,
  FP64: 8,
  BYTES: Infinity,
};

/** Room for the request's names, shapes, parameters and framing. */
const MESSAGE_OVERHEAD = 64 * 1024;

/**
 * The largest ModelInferRequest a model can take: its largest batch (max_batch_size rows, or
 * the one request of a model that does not batch) of every input, in the wider of the raw and
 * typed forms. Infinity when an input has a variable dimension besides the batch, or is BYTES:
 * then only `max_request_size` bounds it.
 */
export function largestInferMessage(config: CompleteModelConfig): number {
  const batching = config.max_batch_size > 0;
  let bytes = MESSAGE_OVERHEAD;
  for (const input of config.inputs) {
    const dims = batching ? input.shape.slice(1) : input.shape;
    if (dims.some((dim) => dim < 0)) return Infinity;
    const elements = dims.reduce((product, dim) => product * dim, 1) * Math.max(1, config.max_batch_size);
    bytes += elements * WIRE_BYTES[input.datatype];
  }
  return bytes;
}
