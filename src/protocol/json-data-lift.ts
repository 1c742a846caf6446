import { randomBytes } from 'node:crypto';
import { InferenceInputError } from '../core/errors.js';

/**
 * A long flat array of numbers left unparsed in the request body, brackets included, so the
 * tensor reader can fill a typed array straight from the bytes instead of JSON.parse
 * building one JavaScript number per element first (5 ms for a 546 KB image row here,
 * against under 1 ms for the scan below).
 */
export class NumericSpan {
  constructor(
    readonly source: Buffer,
    /** The `[`. */
    readonly start: number,
    /** Just after the `]`. */
    readonly end: number,
  ) {}

  /** The values exactly as JSON.parse reads them, for every datatype but FP32. */
  toArray(): unknown[] {
    try {
      return JSON.parse(this.source.toString('latin1', this.start, this.end)) as unknown[];
    } catch (error) {
      throw notJson(`${(error as Error).message} in the data array at byte ${this.start}`);
    }
  }
}

/** Arrays shorter than this go through JSON.parse: the lifting only pays on big tensors. */
const MIN_SPAN_BYTES = 1024;
/** Unguessable, so no string a client sends can pose as a lifted array. */
const PLACEHOLDER = `\u0000batchserve-data:${randomBytes(8).toString('hex')}:`;
const PLACEHOLDER_JSON = JSON.stringify(PLACEHOLDER).slice(0, -1);

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN = 0x5b;
const CLOSE = 0x5d;
const DATA_KEY = Buffer.from('"data"');

/**
 * Parses a v2 JSON header whose `inputs[i].data` arrays may be long: those that are flat
 * arrays of plain numbers become NumericSpans; everything else is exactly what JSON.parse
 * gives (a lifted array anywhere else is put back as an ordinary array).
 */
export function parseHeaderLiftingData(body: Buffer, length: number): unknown {
  const spans = findNumericDataSpans(body, length);
  if (spans.length === 0) return JSON.parse(body.toString('utf8', 0, length));
  let skeleton = '';
  let at = 0;
  spans.forEach((span, index) => {
    skeleton += `${body.toString('utf8', at, span.start)}${PLACEHOLDER_JSON}${index}"`;
    at = span.end;
  });
  skeleton += body.toString('utf8', at, length);
  const header = JSON.parse(skeleton) as unknown;
  const reached = new Array<boolean>(spans.length).fill(false);
  const spanOf = (value: unknown): NumericSpan | undefined => {
    if (typeof value !== 'string' || !value.startsWith(PLACEHOLDER)) return undefined;
    const index = Number(value.slice(PLACEHOLDER.length));
    reached[index] = true;
    return spans[index];
  };
  const inputs = (header as { inputs?: unknown } | null)?.inputs;
  if (Array.isArray(inputs)) {
    for (const input of inputs) {
      const span = spanOf((input as { data?: unknown } | null)?.data);
      if (span) (input as { data: unknown }).data = span;
    }
  }
  restoreOtherSpans(header, spanOf);
  // A span under a duplicate key JSON.parse dropped is read nowhere: it must still be JSON.
  spans.forEach((span, index) => {
    if (!reached[index]) span.toArray();
  });
  return header;
}

/**
 * Puts back, as ordinary arrays, lifted arrays that were not an input's data. A loop over an
 * explicit stack, not recursion: the nesting is the client's to choose.
 */
function restoreOtherSpans(header: unknown, spanOf: (value: unknown) => NumericSpan | undefined): void {
  const pending: unknown[] = [header];
  for (let container = pending.pop(); container !== undefined; container = pending.pop()) {
    if (typeof container !== 'object' || container === null || container instanceof NumericSpan) continue;
    const record = container as Record<string, unknown>;
    for (const key of Object.keys(record)) {
      const value = record[key];
      const span = spanOf(value);
      if (span) record[key] = span.toArray();
      else if (typeof value === 'object' && value !== null) pending.push(value);
    }
  }
}

/** Every `"data": [numbers…]` outside strings that is long enough to lift, in document order. */
function findNumericDataSpans(body: Buffer, length: number): NumericSpan[] {
  const spans: NumericSpan[] = [];
  let at = 0;
  while (at < length) {
    const byte = body[at];
    if (byte !== QUOTE) {
      at++;
      continue;
    }
    // Bounded by the header's length: the key must fit inside it, and bytes past it may be binary tensor data.
    if (at + DATA_KEY.length <= length && body.compare(DATA_KEY, 0, DATA_KEY.length, at, at + DATA_KEY.length) === 0) {
      const span = numericArrayAfterKey(body, at + DATA_KEY.length, length);
      if (span) {
        if (span.end - span.start >= MIN_SPAN_BYTES) spans.push(span);
        at = span.end;
        continue;
      }
    }
    at = endOfString(body, at, length);
  }
  return spans;
}

/**
 * After `"data"`: `: [` and an array with no nested array, object, string or literal in it;
 * else undefined, and JSON.parse decides. Anything else malformed inside is refused later by
 * the strict number reader, as JSON.parse would refuse it. Native byte searches keep this
 * pass far cheaper than the numbers it skips.
 */
function numericArrayAfterKey(body: Buffer, at: number, length: number): NumericSpan | undefined {
  at = skipWhitespace(body, at, length);
  if (body[at] !== 0x3a) return undefined;
  at = skipWhitespace(body, at + 1, length);
  if (body[at] !== OPEN) return undefined;
  const close = body.indexOf(CLOSE, at);
  if (close < 0 || close >= length) return undefined;
  const inside = body.subarray(at + 1, close);
  for (const byte of NOT_NUMERIC) if (inside.includes(byte)) return undefined;
  return new NumericSpan(body, at, close + 1);
}

/** `[`, `{`, `"`, and the first letters of true, false and null. */
const NOT_NUMERIC = [OPEN, 0x7b, QUOTE, 0x74, 0x66, 0x6e];

function skipWhitespace(body: Buffer, at: number, length: number): number {
  while (at < length && (body[at] === 0x20 || body[at] === 0x0a || body[at] === 0x0d || body[at] === 0x09)) at++;
  return at;
}

/** The index just after the string that opens at `at` (a quote). */
function endOfString(body: Buffer, at: number, length: number): number {
  for (at++; at < length; at++) {
    const byte = body[at];
    if (byte === BACKSLASH) at++;
    else if (byte === QUOTE) return at + 1;
  }
  return length;
}

const notJson = (detail: string): InferenceInputError =>
  new InferenceInputError(`the request header is not JSON: ${detail}`);

/** 10^0 … 10^308, each correctly rounded (so exact up to 10^22): parsed, since `**` need not be. */
const POWERS_OF_TEN = Array.from({ length: 309 }, (_, exponent) => Number(`1e${exponent}`));
/** Beyond 2^53 the mantissa is no longer exact in a double. */
const EXACT_DIGITS = 15;
/** Digits kept; the rest only move the decimal point. */
const KEPT_DIGITS = 17;
/** Relative error bound of the approximate path (a few roundings of 1.1e-16 each). */
const APPROXIMATION_ERROR = 4e-15;
const FLOAT32_MIN_NORMAL = 1.1754943508222875e-38;

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

/**
 * Fills `out` from a span as FP32, matching JSON.parse then Math.fround value for value: a
 * number with at most 15 digits and a small exponent is computed exactly (Clinger's fast
 * path); a longer one approximately, and re-read exactly whenever it lies so near a float32
 * rounding midpoint that the approximation could round the other way. Returns the count of
 * numbers; writes past `out`'s end are only counted.
 */
export function fillFloat32FromSpan(span: NumericSpan, out: Float32Array): number {
  const { source: bytes, end } = span;
  let at = skipWhitespace(bytes, span.start + 1, end);
  if (bytes[at] === CLOSE) return 0;
  let count = 0;
  for (;;) {
    const begin = at;
    let negative = false;
    if (bytes[at] === 0x2d) {
      negative = true;
      at++;
    }
    let mantissa = 0;
    let digits = 0;
    let scale = 0;
    let byte = bytes[at] as number;
    if (byte === 0x30) {
      byte = bytes[++at] as number;
    } else if (byte >= 0x31 && byte <= 0x39) {
      do {
        if (digits < KEPT_DIGITS) {
          mantissa = mantissa * 10 + (byte - 0x30);
          digits++;
        } else scale++;
        byte = bytes[++at] as number;
      } while (byte >= 0x30 && byte <= 0x39);
    } else throw badNumber(span, begin);
    if (byte === 0x2e) {
      byte = bytes[++at] as number;
      if (!(byte >= 0x30 && byte <= 0x39)) throw badNumber(span, begin);
      do {
        if (digits < KEPT_DIGITS) {
          mantissa = mantissa * 10 + (byte - 0x30);
          if (mantissa !== 0) digits++;
          scale--;
        }
        byte = bytes[++at] as number;
      } while (byte >= 0x30 && byte <= 0x39);
    }
    if (byte === 0x65 || byte === 0x45) {
      byte = bytes[++at] as number;
      let exponentNegative = false;
      if (byte === 0x2d || byte === 0x2b) {
        exponentNegative = byte === 0x2d;
        byte = bytes[++at] as number;
      }
      if (!(byte >= 0x30 && byte <= 0x39)) throw badNumber(span, begin);
      let exponent = 0;
      do {
        // Saturates only far past the digits a body can hold, so the value stays 0 or Infinity.
        if (exponent < 1e15) exponent = exponent * 10 + (byte - 0x30);
        byte = bytes[++at] as number;
      } while (byte >= 0x30 && byte <= 0x39);
      scale += exponentNegative ? -exponent : exponent;
    }
    const magnitude = float32Of(mantissa, digits, scale, bytes, begin + (negative ? 1 : 0), at);
    out[count++] = negative ? -magnitude : magnitude;
    at = skipWhitespace(bytes, at, end);
    if (bytes[at] === 0x2c) {
      at = skipWhitespace(bytes, at + 1, end);
      continue;
    }
    if (bytes[at] === CLOSE && at === end - 1) return count;
    throw badNumber(span, at);
  }
}

function float32Of(mantissa: number, digits: number, scale: number, bytes: Buffer, from: number, to: number): number {
  if (mantissa === 0) return 0;
  if (digits <= EXACT_DIGITS && scale >= -22 && scale <= 22) {
    return Math.fround(
      scale < 0 ? mantissa / (POWERS_OF_TEN[-scale] as number) : mantissa * (POWERS_OF_TEN[scale] as number),
    );
  }
  const approximate =
    scale < 0
      ? scale >= -308
        ? mantissa / (POWERS_OF_TEN[-scale] as number)
        : 0
      : scale <= 308
        ? mantissa * (POWERS_OF_TEN[scale] as number)
        : Infinity;
  const rounded = Math.fround(approximate);
  if (isSafelyRounded(approximate, rounded)) return rounded;
  return Math.fround(Number(bytes.toString('latin1', from, to)));
}

/** Whether `value` (within APPROXIMATION_ERROR of the truth) is far enough from a float32 midpoint. */
function isSafelyRounded(value: number, rounded: number): boolean {
  if (!Number.isFinite(rounded) || Math.abs(rounded) < FLOAT32_MIN_NORMAL) return false;
  scratch[0] = rounded;
  const bits = scratchBits[0] as number;
  // One step away from zero when the value lies beyond the rounded float, else towards zero.
  scratchBits[0] = Math.abs(value) > Math.abs(rounded) ? bits + 1 : bits - 1;
  // Past the largest float32 the step is to 2^128, not to Infinity: Math.fround overflows halfway there.
  const neighbour = Number.isFinite(scratch[0]) ? scratch[0] : 2 ** 128;
  const halfGap = Math.abs(neighbour - rounded) / 2;
  return Math.abs(Math.abs(value - rounded) - halfGap) > APPROXIMATION_ERROR * Math.abs(value);
}

function badNumber(span: NumericSpan, at: number): InferenceInputError {
  const excerpt = span.source.toString('latin1', at, Math.min(at + 20, span.end));
  return notJson(`a malformed number at byte ${at} of the body: "${excerpt}"`);
}
