import { createReadStream } from 'node:fs';
import { InferenceInputError } from '../core/errors.js';
import type { Tensors } from '../core/tensors.js';
import { readJsonTensor } from '../protocol/json-tensor.js';
import { prepareDecoded, prepareV2Request, type ModelSignature } from '../protocol/prepared-request.js';
import {
  preparedRow,
  rowFailure,
  type Dataset,
  type DatasetRow,
  type InputIdentity,
  type LocatedInput,
} from './dataset.js';

/**
 * JSON Lines: one request a line, in the KServe v2 form (`{"inputs": [{name, datatype, shape,
 * data}]}`, decoded and checked exactly as the v2 route does) or as `{name: nested arrays}`
 * (one row may leave out the batch dimension). Blank lines are not rows; a row's id is its
 * 1-based line number.
 */
export function locateJsonl(identity: InputIdentity): LocatedInput {
  return {
    identity,
    async open(signature) {
      let rowCount = 0;
      const lines = nonBlankLines(identity.path);
      while (!(await lines.next()).done) rowCount++;
      return jsonlDataset(identity.path, rowCount, signature);
    },
  };
}

function jsonlDataset(path: string, rowCount: number, signature: ModelSignature): Dataset {
  return {
    rowCount,
    async *rows(from, to): AsyncGenerator<DatasetRow> {
      let row = 0;
      for await (const line of nonBlankLines(path)) {
        if (row >= to) return;
        if (row >= from) yield jsonlRow(row, line, signature);
        row++;
      }
    },
  };
}

function jsonlRow(row: number, line: Line, signature: ModelSignature): DatasetRow {
  const id = String(line.number);
  try {
    const prepared = isV2Request(line.bytes, signature)
      ? prepareV2Request(line.bytes, { headerLength: undefined, binaryBody: false }, signature)
      : prepareDecoded(
          { parameters: {}, inputs: nestedTensors(line.bytes, signature), binaryDataOutput: false },
          signature,
        );
    return { ...preparedRow(row, id, prepared), outputs: prepared.outputs.map((output) => output.name) };
  } catch (error) {
    return { row, id, failure: rowFailure(error) };
  }
}

/**
 * Whether a line is a v2 request: its object has an `inputs` key (a quoted word followed by a
 * colon is always a key). A model with an input named "inputs" is told apart by the value: v2
 * gives an array of objects.
 */
function isV2Request(bytes: Buffer, signature: ModelSignature): boolean {
  let at = bytes.indexOf('"inputs"');
  let isKey = false;
  while (at !== -1 && !isKey) {
    let next = at + 8;
    while (next < bytes.length && (bytes[next] === 0x20 || bytes[next] === 0x09)) next++;
    isKey = bytes[next] === 0x3a;
    at = bytes.indexOf('"inputs"', at + 1);
  }
  if (!isKey || !signature.inputs.some((spec) => spec.name === 'inputs')) return isKey;
  const value = (parseJson(bytes) as Record<string, unknown>).inputs;
  return Array.isArray(value) && value.every((item) => typeof item === 'object' && item !== null);
}

/** `{name: nested arrays}`, or one nested array for a model with one input, as tensors of the model's datatypes. */
function nestedTensors(bytes: Buffer, signature: ModelSignature): Tensors {
  const parsed = parseJson(bytes);
  const only = signature.inputs.length === 1 ? signature.inputs[0] : undefined;
  const named = Array.isArray(parsed) && only ? { [only.name]: parsed } : parsed;
  if (typeof named !== 'object' || named === null || Array.isArray(named)) {
    throw new InferenceInputError('a line must be a v2 request or map input names to nested arrays');
  }
  const tensors = Object.create(null) as Tensors;
  for (const [name, value] of Object.entries(named as Record<string, unknown>)) {
    const spec = signature.inputs.find((input) => input.name === name);
    if (!spec) {
      throw new InferenceInputError(
        `unknown input "${name}" (the model takes ${signature.inputs.map((input) => input.name).join(', ')})`,
      );
    }
    const dims: number[] = [];
    for (let level = value; Array.isArray(level); level = level[0] as unknown) dims.push(level.length);
    // One row may leave out the batch dimension.
    if (signature.batching && dims.length === spec.shape.length - 1) dims.unshift(1);
    const count = dims.reduce((a, b) => a * b, 1);
    tensors[name] = readJsonTensor({ name, datatype: spec.datatype, dims, count }, value, bytes.length);
  }
  return tensors;
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new InferenceInputError(`the line is not JSON: ${(error as Error).message}`);
  }
}

export interface Line {
  /** 1-based, counting blank lines too, as an editor shows it. */
  readonly number: number;
  readonly bytes: Buffer;
}

/** The file's non-blank lines without their line ends, read in 1 MiB chunks. */
export async function* nonBlankLines(path: string): AsyncGenerator<Line> {
  let number = 0;
  let carry: Buffer[] = [];
  const emit = (bytes: Buffer): Line | undefined => {
    number++;
    const end = bytes.length > 0 && bytes[bytes.length - 1] === 0x0d ? bytes.length - 1 : bytes.length;
    const line = bytes.subarray(0, end);
    return isBlank(line) ? undefined : { number, bytes: line };
  };
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 20 }) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let end = chunk.indexOf(0x0a); end !== -1; end = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, end);
      const line = emit(carry.length > 0 ? Buffer.concat([...carry, piece]) : piece);
      carry = [];
      start = end + 1;
      if (line) yield line;
    }
    if (start < chunk.length) carry.push(chunk.subarray(start));
  }
  if (carry.length > 0) {
    const line = emit(Buffer.concat(carry));
    if (line) yield line;
  }
}

function isBlank(bytes: Buffer): boolean {
  for (const byte of bytes) if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d) return false;
  return true;
}
