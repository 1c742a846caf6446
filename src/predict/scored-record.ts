import { InferenceFailedError } from '../core/errors.js';
import { isTensors, type Tensor } from '../core/tensors.js';
import { halfToFloat } from '../protocol/binary-tensor.js';
import type { OutputTensor, ScoredRecord } from './records.js';

/** Who answered: written into every record. */
export interface Scorer {
  readonly name: string;
  readonly version: string;
  /** The model's output names in config order: the order tensors are written in. */
  readonly outputNames: readonly string[];
}

/**
 * A handler's response for one row as a record: tensors become OutputTensors (in the model's
 * output order, or only those the row asked for), anything else is kept as JSON text — the
 * body `POST /predictions` would answer with (bytes as a base64 string).
 */
export function scoredRecord(id: string, scorer: Scorer, response: unknown, keep?: readonly string[]): ScoredRecord {
  const base = { id, model: scorer.name, version: scorer.version };
  if (!isTensors(response)) return { ...base, outputs: undefined, answer: answerText(response) };
  const names = keep ?? [
    ...scorer.outputNames.filter((name) => name in response),
    ...Object.keys(response).filter((name) => !scorer.outputNames.includes(name)),
  ];
  const outputs: Record<string, OutputTensor> = {};
  for (const name of names) {
    const tensor = response[name];
    if (!tensor) throw new InferenceFailedError(`the handler did not return output "${name}"`);
    outputs[name] = outputTensor(tensor);
  }
  return { ...base, outputs, answer: undefined };
}

export function outputTensor(tensor: Tensor): OutputTensor {
  return { datatype: tensor.datatype, shape: [...tensor.dims], data: plainData(tensor) };
}

function plainData(tensor: Tensor): OutputTensor['data'] {
  const { data } = tensor;
  if (Array.isArray(data)) return [...data];
  if (tensor.datatype === 'BOOL') return Array.from(data as Uint8Array, (value) => value !== 0);
  if (tensor.datatype === 'FP16') return Array.from(data as Uint16Array, halfToFloat);
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) return Array.from(data);
  return Array.from(data as Float32Array);
}

function answerText(response: unknown): string {
  if (response instanceof Uint8Array) return JSON.stringify(Buffer.from(response).toString('base64'));
  return (
    JSON.stringify(response, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value)) ?? 'null'
  );
}
