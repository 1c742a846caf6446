import { InferenceInputError } from '../core/errors.js';
import { quoted } from '../core/quote.js';
import { formatDims, type Tensor, type TensorData } from '../core/tensors.js';
import type { Datatype } from '../core/datatypes.js';
import { floatToHalf, halfToFloat } from './binary-tensor.js';
import { fillFloat32FromSpan, NumericSpan } from './json-data-lift.js';

/**
 * Tensor data as JSON arrays, both ways. Where JSON has no spelling for a value we follow the
 * proto3 JSON mapping that KServe's gRPC gateway uses:
 * - INT64/UINT64 are numbers while within ±(2^53 - 1) and decimal strings beyond; input takes
 *   either (a number beyond 2^53 has already lost precision in JSON.parse).
 * - Non-finite floats are the strings "NaN", "Infinity" and "-Infinity", both ways. -0 is
 *   written as 0, as JSON.stringify does; binary outputs keep every bit.
 * - BOOL is true/false; input also takes 0/1. FP16 travels as ordinary numbers.
 * Input data may be flat or nested as deep as the shape's rank (at most 64 levels); it is read
 * in row-major order and only the element count is checked against the shape.
 */

export interface JsonInput {
  readonly name: string;
  readonly datatype: Datatype;
  readonly dims: readonly number[];
  readonly count: number;
}

const INTEGER_TYPES = {
  UINT8: [Uint8Array, 0, 0xff],
  UINT16: [Uint16Array, 0, 0xffff],
  UINT32: [Uint32Array, 0, 0xffffffff],
  INT8: [Int8Array, -0x80, 0x7f],
  INT16: [Int16Array, -0x8000, 0x7fff],
  INT32: [Int32Array, -0x80000000, 0x7fffffff],
} as const;

const INT64_RANGE: [bigint, bigint] = [-(2n ** 63n), 2n ** 63n - 1n];
const UINT64_RANGE: [bigint, bigint] = [0n, 2n ** 64n - 1n];

/**
 * Fills one preallocated array by walking the (possibly nested) data: no intermediate arrays.
 * `maxElements` bounds what the JSON text could hold, so a huge shape with little data is
 * refused before anything is allocated.
 */
export function readJsonTensor(input: JsonInput, given: unknown, maxElements: number): Tensor {
  if (given instanceof NumericSpan && input.datatype === 'FP32' && input.count <= maxElements) {
    const values = new Float32Array(input.count);
    const filled = fillFloat32FromSpan(given, values);
    if (filled !== input.count) throw countMismatch(input, filled);
    return { datatype: 'FP32', dims: input.dims, data: values };
  }
  const data = given instanceof NumericSpan ? given.toArray() : given;
  if (!Array.isArray(data)) {
    throw new InferenceInputError(`input ${quoted(input.name)}: data must be an array`);
  }
  const { count, datatype } = input;
  if (count > maxElements) throw countMismatch(input, countElements(data, input));
  let values: TensorData;
  let filled: number;
  switch (datatype) {
    case 'FP32':
    case 'FP64':
      values = datatype === 'FP32' ? new Float32Array(count) : new Float64Array(count);
      filled = fillFloats(data, values, 0, input);
      break;
    case 'FP16':
      values = new Uint16Array(count);
      filled = fillHalves(data, values, 0, input);
      break;
    case 'INT64':
    case 'UINT64':
      values = datatype === 'INT64' ? new BigInt64Array(count) : new BigUint64Array(count);
      filled = fillBigInts(data, values, 0, input, datatype === 'INT64' ? INT64_RANGE : UINT64_RANGE);
      break;
    case 'BOOL':
      values = new Uint8Array(count);
      filled = fillBools(data, values, 0, input);
      break;
    case 'BYTES':
      values = new Array<string>(count);
      filled = fillStrings(data, values, 0, input);
      break;
    default: {
      const [IntegerArray, min, max] = INTEGER_TYPES[datatype];
      values = new IntegerArray(count);
      filled = fillIntegers(data, values, 0, input, min, max);
    }
  }
  if (filled !== count) throw countMismatch(input, filled);
  return { datatype, dims: input.dims, data: values };
}

// Each filler returns how many elements it met. Typed arrays ignore writes past their end,
// so surplus elements are only counted, and reported once the walk is done.

function fillFloats(
  data: unknown[],
  out: Float32Array | Float64Array,
  at: number,
  input: JsonInput,
  depth = 1,
): number {
  for (const value of data) {
    if (typeof value === 'number') out[at++] = value;
    else if (Array.isArray(value)) at = fillFloats(value, out, at, input, deeper(input, depth));
    else {
      out[at] = nonFinite(value, at, input);
      at++;
    }
  }
  return at;
}

function fillHalves(data: unknown[], out: Uint16Array, at: number, input: JsonInput, depth = 1): number {
  for (const value of data) {
    if (typeof value === 'number') out[at++] = floatToHalf(value);
    else if (Array.isArray(value)) at = fillHalves(value, out, at, input, deeper(input, depth));
    else {
      out[at] = floatToHalf(nonFinite(value, at, input));
      at++;
    }
  }
  return at;
}

type IntegerArray = Uint8Array | Uint16Array | Uint32Array | Int8Array | Int16Array | Int32Array;

function fillIntegers(
  data: unknown[],
  out: IntegerArray,
  at: number,
  input: JsonInput,
  min: number,
  max: number,
  depth = 1,
): number {
  for (const value of data) {
    if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) out[at++] = value;
    else if (Array.isArray(value)) at = fillIntegers(value, out, at, input, min, max, deeper(input, depth));
    else throw badElement(input, at, value, `an integer in [${min}, ${max}]`);
  }
  return at;
}

function fillBigInts(
  data: unknown[],
  out: BigInt64Array | BigUint64Array,
  at: number,
  input: JsonInput,
  [min, max]: [bigint, bigint],
  depth = 1,
): number {
  for (const value of data) {
    if (Array.isArray(value)) {
      at = fillBigInts(value, out, at, input, [min, max], deeper(input, depth));
      continue;
    }
    const big =
      typeof value === 'number' && Number.isInteger(value)
        ? BigInt(value)
        : typeof value === 'string' && /^-?\d{1,20}$/.test(value)
          ? BigInt(value)
          : undefined;
    if (big === undefined || big < min || big > max) {
      throw badElement(input, at, value, `an integer in [${min}, ${max}] (a number, or a string beyond 2^53)`);
    }
    out[at++] = big;
  }
  return at;
}

function fillBools(data: unknown[], out: Uint8Array, at: number, input: JsonInput, depth = 1): number {
  for (const value of data) {
    if (value === true || value === 1) out[at++] = 1;
    else if (value === false || value === 0) out[at++] = 0;
    else if (Array.isArray(value)) at = fillBools(value, out, at, input, deeper(input, depth));
    else throw badElement(input, at, value, 'true, false, 0 or 1');
  }
  return at;
}

function fillStrings(data: unknown[], out: string[], at: number, input: JsonInput, depth = 1): number {
  for (const value of data) {
    if (typeof value === 'string') {
      if (at < out.length) out[at] = value;
      at++;
    } else if (Array.isArray(value)) at = fillStrings(value, out, at, input, deeper(input, depth));
    else throw badElement(input, at, value, 'a string');
  }
  return at;
}

function nonFinite(value: unknown, at: number, input: JsonInput): number {
  if (value === 'NaN') return NaN;
  if (value === 'Infinity') return Infinity;
  if (value === '-Infinity') return -Infinity;
  throw badElement(input, at, value, 'a number (or "NaN", "Infinity", "-Infinity")');
}

function countElements(data: unknown[], input: JsonInput, depth = 1): number {
  let count = 0;
  for (const value of data) count += Array.isArray(value) ? countElements(value, input, deeper(input, depth)) : 1;
  return count;
}

/** Nesting refused whatever the shape's rank; flat data of any rank is read. */
const MAX_NESTING = 64;

/**
 * The depth of an array met inside one at `depth`. Data may be flat or nested up to the
 * tensor's rank and no deeper (nor past MAX_NESTING), so the walk's recursion is bounded, never
 * by the request: 50,000 nested brackets are a 400, not a stack overflow.
 */
function deeper(input: JsonInput, depth: number): number {
  // The rank is the client's to choose too: 20,000 ones in the shape overflowed the stack.
  if (depth >= MAX_NESTING) {
    throw new InferenceInputError(`input ${quoted(input.name)}: data is nested deeper than ${MAX_NESTING} levels`);
  }
  if (depth >= Math.max(1, input.dims.length)) {
    throw new InferenceInputError(
      `input ${quoted(input.name)}: data is nested deeper than its shape ${formatDims(input.dims)} allows`,
    );
  }
  return depth + 1;
}

function countMismatch(input: JsonInput, got: number): InferenceInputError {
  return new InferenceInputError(
    `input ${quoted(input.name)}: shape ${formatDims(input.dims)} needs ${input.count} elements, got ${got}`,
  );
}

function badElement(input: JsonInput, at: number, value: unknown, expected: string): InferenceInputError {
  const shown = JSON.stringify(value)?.slice(0, 40) ?? String(value);
  return new InferenceInputError(
    `input ${quoted(input.name)}: element ${at} is ${shown}, ${input.datatype} needs ${expected}`,
  );
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * The tensor's data as a flat JSON array. Copying into a plain array for JSON.stringify is
 * about twice as fast as building the text by concatenation or join, and as fast as
 * Array.from, which cannot map values.
 */
export function jsonTensorData(tensor: Tensor): string {
  const { data, datatype } = tensor;
  if (Array.isArray(data)) return JSON.stringify(data);
  const length = data.length;
  const out = new Array<number | string | boolean>(length);
  if (datatype === 'BOOL') {
    const bools = data as Uint8Array;
    for (let i = 0; i < length; i++) out[i] = bools[i] !== 0;
  } else if (datatype === 'INT64' || datatype === 'UINT64') {
    const bigs = data as BigInt64Array | BigUint64Array;
    for (let i = 0; i < length; i++) {
      const value = bigs[i] as bigint;
      out[i] = value <= MAX_SAFE && value >= -MAX_SAFE ? Number(value) : String(value);
    }
  } else if (datatype === 'FP16') {
    const halves = data as Uint16Array;
    for (let i = 0; i < length; i++) out[i] = finiteOrString(halfToFloat(halves[i] as number));
  } else {
    const numbers = data as Float32Array;
    for (let i = 0; i < length; i++) out[i] = finiteOrString(numbers[i] as number);
  }
  return JSON.stringify(out);
}

function finiteOrString(value: number): number | string {
  return Number.isFinite(value) ? value : String(value);
}
