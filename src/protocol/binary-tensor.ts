import { InferenceInputError } from '../core/errors.js';
import { quoted } from '../core/quote.js';
import { formatDims, type NumericData, type Tensor } from '../core/tensors.js';
import { dataFromBytes, datatypeSize, type Datatype } from '../core/datatypes.js';

/**
 * The binary tensor layout of Triton's binary data extension: little-endian, row-major, no
 * padding; BOOL one byte per element; BYTES a 4-byte little-endian length before each
 * element's UTF-8 bytes. Typed arrays are read and written in host byte order, so this
 * assumes a little-endian host, as every platform onnxruntime-node ships for is.
 */

/** Bytes per element; 0 for BYTES, whose elements vary in size. */
export function elementSize(datatype: Datatype): number {
  return datatypeSize(datatype);
}

/**
 * Builds a tensor from `body[start, end)`. Numeric data is a view of the body where it sits at
 * an offset its typed array can start at (the server reads bodies so that the first binary
 * input does), and a copy where it does not.
 */
export function readBinaryTensor(
  name: string,
  datatype: Datatype,
  dims: readonly number[],
  count: number,
  body: Buffer,
  start: number,
  end: number,
  bytesEncoding: BytesEncoding = 'utf8',
): Tensor {
  const size = end - start;
  if (datatype === 'BYTES') return { datatype, dims, data: readStrings(name, count, body, start, end, bytesEncoding) };
  if (size !== count * elementSize(datatype)) {
    throw new InferenceInputError(
      `input ${quoted(name)}: shape ${formatDims(dims)} of ${datatype} needs ${count * elementSize(datatype)} bytes, got ${size}`,
    );
  }
  return { datatype, dims, data: dataFromBytes(datatype, body.subarray(start, end)) };
}

/**
 * How BYTES elements become JS strings: `utf8` text (what an ONNX string input takes), or
 * `latin1`, one character per byte, so binary data such as an image survives exactly
 * (`Buffer.from(element, 'latin1')`); pipelines take their BYTES inputs so.
 */
export type BytesEncoding = 'utf8' | 'latin1';

/** UTF-8 text (a JSON string) as a latin1 byte string of its UTF-8 bytes. */
export function textAsByteString(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

/** Reads exactly `count` length-prefixed strings that fill `body[start, end)`. */
function readStrings(
  name: string,
  count: number,
  body: Buffer,
  start: number,
  end: number,
  encoding: BytesEncoding,
): string[] {
  const strings = new Array<string>(count);
  let at = start;
  for (let i = 0; i < count; i++) {
    if (at + 4 > end) {
      throw new InferenceInputError(`input ${quoted(name)}: BYTES data ends at element ${i} of ${count}`);
    }
    const length = body.readUInt32LE(at);
    at += 4;
    if (at + length > end) {
      throw new InferenceInputError(
        `input ${quoted(name)}: BYTES element ${i} declares ${length} bytes, only ${end - at} remain`,
      );
    }
    strings[i] = body.toString(encoding, at, at + length);
    at += length;
  }
  if (at !== end) {
    throw new InferenceInputError(`input ${quoted(name)}: ${end - at} bytes left over after ${count} BYTES elements`);
  }
  return strings;
}

/** The tensor's binary form: a view of its data for numeric types, no copy. */
export function binaryTensorBytes(tensor: Tensor): Uint8Array {
  if (Array.isArray(tensor.data)) return writeStrings(tensor.data);
  const data: NumericData = tensor.data;
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

function writeStrings(strings: readonly string[]): Buffer {
  let size = 4 * strings.length;
  for (const value of strings) size += Buffer.byteLength(value);
  const bytes = Buffer.allocUnsafe(size);
  let at = 0;
  for (const value of strings) {
    const length = bytes.write(value, at + 4);
    bytes.writeUInt32LE(length, at);
    at += 4 + length;
  }
  return bytes;
}

// --- IEEE 754 half precision -------------------------------------------------

const float64 = new Float64Array(1);
const float64Words = new Uint32Array(float64.buffer);
const HALF_NAN = 0x7e00;
/** Halfway between the largest half (65504) and 65536: from here on, round to infinity. */
const HALF_OVERFLOW = 65520;
const MIN_HALF_NORMAL = 2 ** -14;

/** The half-precision bits nearest to `value`, rounding ties to even, straight from the double. */
export function floatToHalf(value: number): number {
  if (Number.isNaN(value)) return HALF_NAN;
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const magnitude = Math.abs(value);
  if (magnitude >= HALF_OVERFLOW) return sign | 0x7c00;
  // Subnormals count units of 2^-24; a result of 1024 carries into the exponent, as it should.
  if (magnitude < MIN_HALF_NORMAL) return sign | roundHalfToEven(magnitude * 2 ** 24);
  float64[0] = magnitude;
  const exponent = ((float64Words[1] as number) >>> 20) - 1023;
  // 11 significant bits; a mantissa that rounds up to 2048 carries into the exponent.
  const significand = roundHalfToEven(magnitude * 2 ** (10 - exponent));
  return sign | (((exponent + 15) << 10) + significand - 1024);
}

/** Scaling by a power of two is exact, so `value - floor` is the exact fraction. */
function roundHalfToEven(value: number): number {
  const floor = Math.floor(value);
  const fraction = value - floor;
  return fraction > 0.5 || (fraction === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
}

const HALF_SCALE = Float64Array.from({ length: 32 }, (_, exponent) => 2 ** (exponent - 25));

export function halfToFloat(bits: number): number {
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  const sign = bits & 0x8000 ? -1 : 1;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 31) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1024 + mantissa) * (HALF_SCALE[exponent] as number);
}
