import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { BatchserveError } from '../../src/core/errors.js';
import { DATATYPES, type Datatype } from '../../src/core/datatypes.js';
import type { Tensor, TensorSpec } from '../../src/core/tensors.js';
import { floatToHalf, halfToFloat } from '../../src/protocol/binary-tensor.js';
import { NumericSpan, parseHeaderLiftingData } from '../../src/protocol/json-data-lift.js';
import {
  prepareV2Request,
  type ModelSignature,
  type PreparedRequest,
  type V2Framing,
} from '../../src/protocol/prepared-request.js';
import { decodeInferRequest, type HeaderParser } from '../../src/protocol/v2-codec.js';

/**
 * The differential test of the v2 request decoder: the default header parser lifts long numeric
 * data arrays out of the JSON text and reads them with its own number reader; the reference is
 * plain JSON.parse. Generated bodies vary everything the request's meaning does not depend on
 * (key order, whitespace, number spellings, string escapes, decoy "data" keys, JSON or binary
 * framing), and both paths must agree tensor for tensor, bit for bit, or refuse with the same
 * 4xx code. Truncated and mutated bodies must never get anything but a 4xx BatchserveError.
 */

const plainParse: HeaderParser = (body, length) => JSON.parse(body.toString('utf8', 0, length)) as unknown;

// --- the generated request ----------------------------------------------------------------------

type Value = boolean | number | bigint | string;
type Encoding = 'flat' | 'nested' | 'binary';

interface InputCase {
  readonly name: string;
  readonly datatype: Datatype;
  readonly dims: readonly number[];
  /** The signature's shape: each dimension fixed (as sent) or -1. */
  readonly shape: readonly number[];
  readonly values: readonly Value[];
  readonly encoding: Encoding;
}

interface OutputCase {
  readonly name: string;
  readonly binary: boolean | undefined;
  readonly classification: number | undefined;
}

interface RequestCase {
  readonly batching: boolean;
  /** In the signature's order; the request lists them in an order the layout picks. */
  readonly inputs: readonly InputCase[];
  readonly id: string | undefined;
  readonly priority: number | undefined;
  readonly timeout: number | undefined;
  readonly binaryDataOutput: boolean | undefined;
  readonly outputs: readonly OutputCase[] | undefined;
  /** Drives what the request's meaning does not depend on: whitespace, order, spellings, decoys. */
  readonly layoutSeed: number;
}

const INPUT_NAMES = ['x', 'data', 'input_ids', 'a "quoted" name', 'ünï/cödé'];
const OUTPUT_SPECS: readonly TensorSpec[] = [
  { name: 'out', datatype: 'FP32', shape: [-1, 4] },
  { name: 'data', datatype: 'INT64', shape: [-1] },
];
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

const INTEGER_RANGES = {
  UINT8: [0, 0xff],
  UINT16: [0, 0xffff],
  UINT32: [0, 0xffffffff],
  INT8: [-0x80, 0x7f],
  INT16: [-0x8000, 0x7fff],
  INT32: [-0x80000000, 0x7fffffff],
} as const;

/** Finite halves, or any half (NaN and infinities included) when `special`. */
const halfArb = (special: boolean): fc.Arbitrary<number> =>
  fc
    .integer({ min: 0, max: 0xffff })
    .map((bits) => halfToFloat(special || (bits & 0x7c00) !== 0x7c00 ? bits : bits & ~0x0400));

/**
 * One element of `datatype`. Without `special` every element has a plain numeric spelling, so a
 * long flat array can be lifted; with it, NaN, infinities and 64-bit values beyond 2^53 (which
 * JSON carries as strings) turn up too.
 */
function elementArb(datatype: Datatype, special: boolean): fc.Arbitrary<Value> {
  const finite = { noNaN: true, noDefaultInfinity: true };
  const nonFinite = fc.constantFrom(NaN, Infinity, -Infinity);
  switch (datatype) {
    case 'BOOL':
      return fc.boolean();
    case 'UINT64':
      return fc.bigInt({ min: 0n, max: special ? 2n ** 64n - 1n : MAX_SAFE });
    case 'INT64':
      return special
        ? fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
        : fc.bigInt({ min: -MAX_SAFE, max: MAX_SAFE });
    case 'FP16':
      return halfArb(special);
    case 'FP32': {
      const values = fc.oneof(
        fc.float(finite),
        fc.double(finite),
        fc.integer({ min: -1000, max: 1000 }),
        fc.constantFrom(0, -0, 1.401298464324817e-45, 3.4028234663852886e38, 3.4028235677973366e38, 1e-46),
      );
      return special ? fc.oneof({ weight: 10, arbitrary: values }, { weight: 1, arbitrary: nonFinite }) : values;
    }
    case 'FP64': {
      const values = fc.oneof(fc.double(finite), fc.integer({ min: -100_000, max: 100_000 }));
      return special ? fc.oneof({ weight: 10, arbitrary: values }, { weight: 1, arbitrary: nonFinite }) : values;
    }
    case 'BYTES':
      return fc.string({ unit: 'grapheme', maxLength: 6 });
    default: {
      const [min, max] = INTEGER_RANGES[datatype];
      return fc.integer({ min, max });
    }
  }
}

/** An input whose element count is usually 150-400 (long enough to lift), sometimes 0-4. */
function inputArb(name: string, batching: boolean, rows: number): fc.Arbitrary<InputCase> {
  return fc
    .record({
      // FP32 has the fast path's own number reader: it gets the most runs.
      datatype: fc.oneof(
        { weight: 3, arbitrary: fc.constant<Datatype>('FP32') },
        { weight: 5, arbitrary: fc.constantFrom(...DATATYPES) },
      ),
      // Mostly ranks whose last axis can be long: a batching rank 1 is [rows], a rank 0 one element.
      rank: fc.oneof(
        { weight: 1, arbitrary: fc.constant(batching ? 1 : 0) },
        { weight: batching ? 1 : 3, arbitrary: fc.constant(1) },
        { weight: 4, arbitrary: fc.constant(2) },
        { weight: 1, arbitrary: fc.constant(3) },
      ),
      middle: fc.integer({ min: 1, max: 2 }),
      target: fc.oneof(
        { weight: 4, arbitrary: fc.integer({ min: 150, max: 400 }) },
        // Small, never 0: a zero-size dimension is refused (an empty tensor is no request).
        { weight: 1, arbitrary: fc.integer({ min: 1, max: 4 }) },
      ),
      fixed: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
      encoding: fc.constantFrom<Encoding>('flat', 'flat', 'flat', 'nested', 'binary'),
      special: fc.integer({ min: 0, max: 7 }).map((draw) => draw === 0),
    })
    .chain(({ datatype, rank, middle, target, fixed, encoding, special }) => {
      const dims = Array.from({ length: rank }, (_, axis) => (batching && axis === 0 ? rows : middle));
      if (rank > 0 && !(batching && rank === 1)) {
        const others = dims.slice(0, -1).reduce((a, b) => a * b, 1);
        dims[rank - 1] = target < 5 ? target : Math.max(1, Math.round(target / others));
      }
      const shape = dims.map((dim, axis) => ((batching && axis === 0) || !fixed[axis] ? -1 : dim));
      const count = dims.reduce((a, b) => a * b, 1);
      return fc
        .array(elementArb(datatype, special), { minLength: count, maxLength: count })
        .map((values): InputCase => ({ name, datatype, dims, shape, values, encoding }));
    });
}

const outputsArb: fc.Arbitrary<OutputCase[]> = fc
  .shuffledSubarray(
    OUTPUT_SPECS.map((spec) => spec.name),
    { minLength: 0 },
  )
  .chain((names) =>
    fc.tuple(
      ...names.map((name) =>
        fc.record({
          name: fc.constant(name),
          binary: fc.option(fc.boolean(), { nil: undefined }),
          classification: fc.option(fc.integer({ min: 1, max: 5 }), { nil: undefined, freq: 3 }),
        }),
      ),
    ),
  );

const idArb = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 12 }),
  fc.constantFrom('"data": [1, 2, 3]', 'a \\"data\\": [4] \\', 'C:\\data\\'),
);

const requestArb: fc.Arbitrary<RequestCase> = fc
  .record({
    batching: fc.boolean(),
    rows: fc.integer({ min: 1, max: 3 }),
    names: fc.shuffledSubarray(INPUT_NAMES, { minLength: 1, maxLength: 3 }),
  })
  .chain(({ batching, rows, names }) =>
    fc.record({
      batching: fc.constant(batching),
      inputs: fc.tuple(...names.map((name) => inputArb(name, batching, rows))),
      id: fc.option(idArb, { nil: undefined }),
      priority: fc.option(fc.nat({ max: 10 }), { nil: undefined }),
      timeout: fc.option(fc.nat({ max: 10_000_000 }), { nil: undefined }),
      binaryDataOutput: fc.option(fc.boolean(), { nil: undefined }),
      outputs: fc.option(outputsArb, { nil: undefined }),
      layoutSeed: fc.integer(),
    }),
  );

function signatureOf(request: RequestCase): ModelSignature {
  return {
    inputs: request.inputs.map(({ name, datatype, shape }) => ({ name, datatype, shape })),
    outputs: OUTPUT_SPECS,
    batching: request.batching,
  };
}

// --- writing a body -----------------------------------------------------------------------------

type Random = () => number;

/** A seeded generator (mulberry32): the layout follows from the case's seed alone. */
function seeded(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

function shuffled<T>(random: Random, items: readonly T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

/**
 * `value` exactly, in one of the spellings JSON allows: shortest, exponent (e/E, with or without
 * +), mantissa shifted behind "0." or made an integer, trailing zeros ("1.000e0"), 17-21 digits.
 * Each is the same decimal (or one that rounds to the same double), so JSON.parse gives `value`.
 */
function spellNumber(random: Random, value: number, negativeZero = true): string {
  const [mantissa = '', exponentText = ''] = value.toExponential().split('e');
  const sign = value < 0 || (negativeZero && Object.is(value, -0)) ? '-' : '';
  const digits = mantissa.replace('-', '').replace('.', '');
  const exponent = Number(exponentText);
  const e = (power: number): string =>
    `${random() < 0.5 ? 'e' : 'E'}${power >= 0 && random() < 0.5 ? '+' : ''}${power}`;
  const zeros = (): string => '0'.repeat(1 + Math.floor(random() * 12));
  switch (Math.floor(random() * 8)) {
    case 0:
      return `${sign}${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ''}${e(exponent)}`;
    case 1:
      return `${sign}0.${digits}${e(exponent + 1)}`;
    case 2:
      return `${sign}${digits}${e(exponent - digits.length + 1)}`;
    case 3:
      return `${sign}${digits[0]}.${digits.slice(1)}${zeros()}${e(exponent)}`;
    case 4:
      return `${sign}${Math.abs(value).toPrecision(17 + Math.floor(random() * 5))}`;
    case 5: {
      if (digits === '0') return `${sign}0`;
      const padding = zeros();
      return `${sign}${digits}${padding}${e(exponent - digits.length + 1 - padding.length)}`;
    }
    default:
      return `${sign}${Math.abs(value)}`;
  }
}

const NON_FINITE: Record<string, string> = { NaN: '"NaN"', Infinity: '"Infinity"', '-Infinity': '"-Infinity"' };

/** How a client might write one element of `datatype`. */
function spellValue(random: Random, datatype: Datatype, value: Value): string {
  if (typeof value === 'boolean') {
    return random() < 0.6 ? (value ? '1' : pick(random, ['0', '-0', '0.0e0'])) : String(value);
  }
  if (typeof value === 'string') return writeString(random, value, 0.1);
  if (typeof value === 'bigint') {
    const safe = value <= MAX_SAFE && value >= -MAX_SAFE;
    return safe && random() > 0.001 ? spellNumber(random, Number(value)) : `"${value}"`;
  }
  if (!Number.isFinite(value)) return NON_FINITE[String(value)] as string;
  // Integers may be written -0 too: JSON.parse gives -0, an integer that stores as 0.
  return datatype.startsWith('FP') || value !== 0 || random() < 0.9
    ? spellNumber(random, value)
    : spellNumber(random, -0);
}

/** A JSON string literal with some characters escaped (\uXXXX, \/, short escapes), pairs kept whole. */
function writeString(random: Random, text: string, escapeRate: number): string {
  const unicode = (unit: number): string => {
    const hex = unit.toString(16).padStart(4, '0');
    return `\\u${random() < 0.5 ? hex : hex.toUpperCase()}`;
  };
  const SHORT: Record<number, string> = { 8: '\\b', 9: '\\t', 10: '\\n', 12: '\\f', 13: '\\r' };
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const low = text.charCodeAt(i + 1);
      out += random() < escapeRate ? unicode(unit) + unicode(low) : text.slice(i, i + 2);
      i++;
    } else if (unit === 0x22) out += random() < 0.5 ? '\\"' : unicode(unit);
    else if (unit === 0x5c) out += random() < 0.5 ? '\\\\' : unicode(unit);
    else if (unit < 0x20) out += SHORT[unit] !== undefined && random() < 0.5 ? SHORT[unit] : unicode(unit);
    else if (unit === 0x2f && random() < 0.5) out += '\\/';
    else if (random() < escapeRate) out += unicode(unit);
    else out += text[i];
  }
  return `${out}"`;
}

/** Refusals the writer can build into a body; each must be refused by both paths with `code`. */
const BREAKS = {
  count: 'BS_ERR_INFERENCE_INPUT',
  malformed: 'BS_ERR_INFERENCE_INPUT',
  range: 'BS_ERR_INFERENCE_INPUT',
  datatype: 'BS_ERR_INFERENCE_INPUT',
  shape: 'BS_ERR_INFERENCE_INPUT',
  binarySize: 'BS_ERR_INFERENCE_INPUT',
  missing: 'BS_ERR_INFERENCE_INPUT',
  unknownInput: 'BS_ERR_INFERENCE_INPUT',
  unknownOutput: 'BS_ERR_INFERENCE_INPUT',
  malformedDecoy: 'BS_ERR_INFERENCE_INPUT',
  id: 'BS_ERR_INFERENCE_INPUT',
  priority: 'BS_ERR_USAGE',
  timeout: 'BS_ERR_USAGE',
} as const;
type Break = keyof typeof BREAKS;

/** Numbers (and others) that are not JSON at an array element's place. */
const MALFORMED = ['1.2.3', '01', '-01', '.5', '5.', '1e', '1e+', '+1', '--1', '-', '0x1F', 'NaN', '1 2', 'tru', ''];
const BAD_CONTROLS = ['-1', '1.5', '"1"', 'true', 'null', '1e400', '-0.5', '9007199254740992', '[1]'];

function outOfRange(random: Random, datatype: Datatype): string {
  if (datatype === 'BOOL') return pick(random, ['2', '-1', '0.5', '"true"', 'null']);
  if (datatype === 'INT64' || datatype === 'UINT64') {
    return pick(random, ['0.5', '"18446744073709551616"', '"-9223372036854775809"', '"1.0"', 'null', '1e400']);
  }
  const [min, max] = INTEGER_RANGES[datatype as keyof typeof INTEGER_RANGES];
  return pick(random, [String(max + 1), String(min - 1), '0.5', '1e400', '"1"', 'true']);
}

interface Written {
  readonly body: Buffer;
  readonly framing: V2Framing;
  /** The JSON header's length: the body's when there is no binary data. */
  readonly headerLength: number;
}

/**
 * Writes `request` as a v2 body, laid out by its seed, with `breakWith` built in when given.
 * The text is written here, token by token, not by JSON.stringify.
 */
function writeRequest(request: RequestCase, breakWith?: Break): Written {
  const random = seeded(request.layoutSeed);
  const blankRate = random();
  const ws = (): string => {
    if (random() > blankRate) return '';
    let out = '';
    for (let n = 1 + Math.floor(random() * 3); n > 0; n--) out += pick(random, [' ', ' ', '\n', '\t', '\r', '  ']);
    return out;
  };
  const str = (text: string): string => writeString(random, text, 0.02);
  const list = (items: readonly string[]): string =>
    `[${items.length === 0 ? ws() : items.map((item) => `${ws()}${item}${ws()}`).join(',')}]`;
  const object = (entries: readonly (readonly [string, string])[]): string =>
    `{${entries.length === 0 ? ws() : entries.map(([key, value]) => `${ws()}${str(key)}${ws()}:${ws()}${value}${ws()}`).join(',')}}`;
  const integer = (value: number): string => spellNumber(random, value, false);
  /** A numeric array long enough (> 1 KB) to be lifted wherever its key is "data". */
  const longNumbers = (bad?: string): string => {
    const items = Array.from({ length: 300 }, () => spellNumber(random, Math.round((random() - 0.5) * 1e6) / 100));
    if (bad !== undefined) items[150] = bad;
    return list(items);
  };

  // Which input a break applies to; some breaks need it written a certain way.
  const targetIndex = Math.floor(random() * request.inputs.length);
  const integerTarget = request.inputs.findIndex(
    (input) => input.values.length > 0 && (input.datatype in INTEGER_RANGES || /^(BOOL|U?INT64)$/.test(input.datatype)),
  );
  const kind: Break | undefined = breakWith === 'range' && integerTarget < 0 ? 'malformed' : breakWith;
  const target = kind === 'range' ? integerTarget : targetIndex;
  const forced: Partial<Record<Break, Encoding>> = {
    count: 'flat',
    malformed: 'flat',
    range: 'flat',
    malformedDecoy: 'flat',
    binarySize: 'binary',
  };

  const binaryParts: Buffer[] = [];
  const writeInput = (input: InputCase, index: number): string | undefined => {
    const broken = index === target ? kind : undefined;
    if (broken === 'missing') return undefined;
    const encoding = (broken && forced[broken]) ?? input.encoding;
    const datatype =
      broken === 'datatype'
        ? pick(
            random,
            DATATYPES.filter((other) => other !== input.datatype),
          )
        : input.datatype;
    const dims = broken === 'shape' ? [...input.dims, 1] : input.dims;
    const entries: [string, string][] = [
      ['name', str(input.name)],
      ['datatype', str(datatype)],
      ['shape', list(dims.map(integer))],
    ];
    const parameters: [string, string][] = [];
    if (random() < 0.15) parameters.push(['data', longNumbers()]);
    if (encoding === 'binary') {
      const bytes = binaryBytes(input);
      binaryParts.push(bytes);
      const delta = broken === 'binarySize' ? (bytes.length > 0 && random() < 0.5 ? -1 : 1) : 0;
      parameters.push(['binary_data_size', integer(bytes.length + delta)]);
    } else {
      const items = input.values.map((value) => spellValue(random, input.datatype, value));
      if (broken === 'count') {
        if (items.length > 0 && random() < 0.5) items.pop();
        else items.push(items[0] ?? spellValue(random, input.datatype, input.values[0] ?? 0));
      }
      const at = Math.floor(random() * items.length);
      // An empty token in an empty array would leave "[]": valid, and the count right.
      if (broken === 'malformed') {
        items.splice(at, items.length > 0 ? 1 : 0, pick(random, items.length > 0 ? MALFORMED : MALFORMED.slice(0, -1)));
      }
      if (broken === 'range') items[at] = outOfRange(random, input.datatype);
      entries.push(['data', encoding === 'nested' && input.dims.length > 1 ? nested(items, input.dims) : list(items)]);
    }
    if (parameters.length > 0 || random() < 0.1) entries.push(['parameters', object(shuffled(random, parameters))]);
    const order = shuffled(random, entries);
    // A duplicate "data" key before the real one: JSON.parse keeps the last.
    if (encoding !== 'binary' && (broken === 'malformedDecoy' || random() < 0.1)) {
      const real = order.findIndex(([key]) => key === 'data');
      const decoy = longNumbers(broken === 'malformedDecoy' ? pick(random, MALFORMED) : undefined);
      order.splice(Math.floor(random() * (real + 1)), 0, ['data', decoy]);
    }
    return object(order);
  };
  const nested = (items: readonly string[], dims: readonly number[]): string => {
    const build = (axis: number, start: number): string => {
      const size = dims[axis] as number;
      const stride = dims.slice(axis + 1).reduce((a, b) => a * b, 1);
      return axis === dims.length - 1
        ? list(items.slice(start, start + size))
        : list(Array.from({ length: size }, (_, i) => build(axis + 1, start + i * stride)));
    };
    return build(0, 0);
  };

  const inputs = shuffled(
    random,
    request.inputs.map((input, index) => [input, index] as const),
  ).flatMap(([input, index]) => writeInput(input, index) ?? []);
  if (kind === 'unknownInput') inputs.splice(0, 0, object([['name', str('extra')], ...extraInput()]));

  const control = (value: number | undefined, key: 'priority' | 'timeout'): string | undefined =>
    kind === key ? pick(random, BAD_CONTROLS) : value === undefined ? undefined : integer(value);
  const parameterEntries: [string, string][] = [];
  for (const [key, text] of [
    ['priority', control(request.priority, 'priority')],
    ['timeout', control(request.timeout, 'timeout')],
    ['binary_data_output', request.binaryDataOutput === undefined ? undefined : String(request.binaryDataOutput)],
    ['data', random() < 0.2 ? longNumbers() : undefined],
    ['note', random() < 0.2 ? str('"data": [1, 2]') : undefined],
  ] as const) {
    if (text !== undefined) parameterEntries.push([key, text]);
  }
  const outputs: readonly (OutputCase | { name: string })[] | undefined =
    kind === 'unknownOutput' ? [...(request.outputs ?? []), { name: 'nope' }] : request.outputs;
  const header: [string, string][] = [['inputs', list(inputs)]];
  if (kind === 'id') header.push(['id', integer(7)]);
  else if (request.id !== undefined) header.push(['id', str(request.id)]);
  if (parameterEntries.length > 0 || random() < 0.2)
    header.push(['parameters', object(shuffled(random, parameterEntries))]);
  if (outputs !== undefined) {
    const written = outputs.map((output) => {
      const parameters: [string, string][] = [];
      if ('binary' in output && output.binary !== undefined) parameters.push(['binary_data', String(output.binary)]);
      if ('classification' in output && output.classification !== undefined) {
        parameters.push(['classification', integer(output.classification)]);
      }
      const entries: [string, string][] = [['name', str(output.name)]];
      if (parameters.length > 0 || random() < 0.2) entries.push(['parameters', object(shuffled(random, parameters))]);
      return object(shuffled(random, entries));
    });
    header.push(['outputs', list(written)]);
  }
  const json = Buffer.from(`${ws()}${object(shuffled(random, header))}${ws()}`);
  if (binaryParts.length > 0) {
    const length = String(json.length);
    return {
      body: Buffer.concat([json, ...binaryParts]),
      framing: { headerLength: pick(random, [length, ` ${length} `, `00${length}`]), binaryBody: random() < 0.8 },
      headerLength: json.length,
    };
  }
  const framing: V2Framing =
    random() < 0.7
      ? { headerLength: undefined, binaryBody: false }
      : { headerLength: String(json.length), binaryBody: random() < 0.5 };
  return { body: json, framing, headerLength: json.length };
}

function extraInput(): [string, string][] {
  return [
    ['datatype', '"FP32"'],
    ['shape', '[1]'],
    ['data', '[1]'],
  ];
}

// --- what the request should decode to ------------------------------------------------------------

const TYPED_ARRAYS = {
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
} as const;

function expectedData(input: InputCase): Tensor['data'] {
  const values = input.values;
  switch (input.datatype) {
    case 'BOOL':
      return Uint8Array.from(values, (value) => (value ? 1 : 0));
    case 'UINT64':
      return BigUint64Array.from(values as bigint[]);
    case 'INT64':
      return BigInt64Array.from(values as bigint[]);
    case 'FP16':
      return Uint16Array.from(values as number[], floatToHalf);
    case 'FP32':
      return Float32Array.from(values as number[]);
    case 'FP64':
      return Float64Array.from(values as number[]);
    case 'BYTES':
      return [...(values as string[])];
    default:
      return TYPED_ARRAYS[input.datatype].from(values as number[]);
  }
}

/** The input in Triton's binary layout: little-endian, BYTES as length-prefixed UTF-8. */
function binaryBytes(input: InputCase): Buffer {
  const data = expectedData(input);
  if (Array.isArray(data)) {
    return Buffer.concat(
      data.flatMap((value) => {
        const bytes = Buffer.from(value);
        const length = Buffer.alloc(4);
        length.writeUInt32LE(bytes.length);
        return [length, bytes];
      }),
    );
  }
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

function dataBytes(data: Tensor['data']): Buffer | readonly string[] {
  return Array.isArray(data) ? data : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

// --- running both paths ----------------------------------------------------------------------------

type Outcome = { ok: PreparedRequest } | { error: BatchserveError };

/** Runs one path; anything but a 4xx BatchserveError fails the test on the spot. */
function outcome(written: Written, signature: ModelSignature, parse: HeaderParser | undefined, path: string): Outcome {
  try {
    return { ok: prepareV2Request(written.body, written.framing, signature, parse) };
  } catch (error) {
    if (!(error instanceof BatchserveError)) {
      assert.fail(`the ${path} path threw ${String(error)} (not a BatchserveError)\n${shown(written)}`);
    }
    if (error.httpStatus < 400 || error.httpStatus > 499) {
      assert.fail(`the ${path} path answered ${error.httpStatus} ${error.code}: ${error.message}\n${shown(written)}`);
    }
    return { error };
  }
}

function shown(written: Written): string {
  const text = written.body.toString('utf8', 0, Math.min(written.headerLength, written.body.length));
  return `framing ${JSON.stringify(written.framing)}, body ${JSON.stringify(text.length > 3000 ? `${text.slice(0, 3000)}…` : text)}`;
}

function assertSameTensor(actual: Tensor | undefined, expected: Tensor | undefined, what: string): void {
  assert.ok(actual && expected, `${what}: present in both`);
  assert.equal(actual.datatype, expected.datatype, `${what}: datatype`);
  assert.deepEqual(actual.dims, expected.dims, `${what}: dims`);
  assert.deepEqual(dataBytes(actual.data), dataBytes(expected.data), `${what}: data`);
}

/** Both paths agree: the same request, tensor for tensor and bit for bit, or the same error code. */
function runBoth(written: Written, signature: ModelSignature): Outcome {
  const fast = outcome(written, signature, undefined, 'fast');
  const plain = outcome(written, signature, plainParse, 'JSON.parse');
  if ('error' in fast || 'error' in plain) {
    const describe = (result: Outcome): string =>
      'error' in result ? `${result.error.code} (${result.error.message})` : 'accepted';
    assert.ok(
      'error' in fast && 'error' in plain && fast.error.code === plain.error.code,
      `fast path: ${describe(fast)}; JSON.parse path: ${describe(plain)}\n${shown(written)}`,
    );
    return plain;
  }
  const { inputs: fastInputs, ...fastRest } = fast.ok;
  const { inputs: plainInputs, ...plainRest } = plain.ok;
  assert.deepEqual(fastRest, plainRest, shown(written));
  assert.deepEqual(Object.keys(fastInputs).sort(), Object.keys(plainInputs).sort(), shown(written));
  for (const name of Object.keys(plainInputs)) {
    assertSameTensor(fastInputs[name], plainInputs[name], `input "${name}" (${shown(written)})`);
  }
  return plain;
}

/** How many of the request's inputs the fast parser lifted out of the text, by FP32 and others. */
function lifted(written: Written): { fp32: number; other: number } {
  const header = parseHeaderLiftingData(written.body, written.headerLength) as {
    inputs: { datatype: string; data?: unknown }[];
  };
  let fp32 = 0;
  let other = 0;
  for (const input of header.inputs) {
    if (input.data instanceof NumericSpan) {
      if (input.datatype === 'FP32') fp32++;
      else other++;
    }
  }
  return { fp32, other };
}

// --- the properties ---------------------------------------------------------------------------------

test('valid v2 bodies: the fast path and JSON.parse give the same request, and the one generated', () => {
  const stats = { runs: 0, liftedRuns: 0, fp32: 0, other: 0, binary: 0 };
  fc.assert(
    fc.property(requestArb, (request) => {
      const signature = signatureOf(request);
      const written = writeRequest(request);
      const result = runBoth(written, signature);
      if ('error' in result) assert.fail(`a valid body was refused: ${result.error.message}\n${shown(written)}`);
      const prepared = result.ok;

      // The request generated, not merely the same one twice.
      for (const input of request.inputs) {
        const tensor = prepared.inputs[input.name];
        assert.ok(tensor, `input "${input.name}"`);
        assert.equal(tensor.datatype, input.datatype);
        assert.deepEqual(tensor.dims, input.dims);
        assert.deepEqual(dataBytes(tensor.data), dataBytes(expectedData(input)), `input "${input.name}" data`);
      }
      assert.equal(prepared.id, request.id);
      assert.equal(prepared.rows, request.batching ? (request.inputs[0]?.dims[0] ?? 1) : 1);
      assert.equal(
        prepared.shapeKey,
        request.inputs.map(({ dims }) => (request.batching ? dims.slice(1) : dims).join('x')).join('|'),
      );
      assert.equal(prepared.priority, request.priority || undefined);
      assert.equal(prepared.timeoutUs, request.timeout || undefined);
      const binaryDefault = request.binaryDataOutput ?? false;
      assert.deepEqual(
        prepared.outputs,
        request.outputs?.map(({ name, binary, classification }) => ({
          name,
          binary: binary ?? binaryDefault,
          ...(classification === undefined ? {} : { classification }),
        })) ?? OUTPUT_SPECS.map(({ name }) => ({ name, binary: binaryDefault })),
      );
      // Lifted arrays elsewhere (request or input parameters) come back as ordinary arrays.
      const length = Number(written.framing.headerLength ?? written.body.length);
      assert.deepEqual(
        decodeInferRequest(written.body, length, signature.inputs).parameters,
        decodeInferRequest(written.body, length, signature.inputs, plainParse).parameters,
      );

      const { fp32, other } = lifted(written);
      stats.runs++;
      if (fp32 + other > 0) stats.liftedRuns++;
      stats.fp32 += fp32;
      stats.other += other;
      if (written.framing.headerLength !== undefined && written.headerLength < written.body.length) stats.binary++;
    }),
    { numRuns: 300, includeErrorInReport: true },
  );
  // Without these the fast path could be skipped altogether and every comparison would still pass
  // (300 runs lift in about 45% of them, 50-80 FP32 and 70-110 other arrays).
  assert.ok(
    stats.liftedRuns >= stats.runs * 0.3,
    `the fast path lifted data in only ${stats.liftedRuns}/${stats.runs}`,
  );
  assert.ok(stats.fp32 >= 25 && stats.other >= 25, `lifted ${stats.fp32} FP32 and ${stats.other} other arrays`);
  assert.ok(stats.binary >= 30, `only ${stats.binary} bodies carried binary data`);
});

test('invalid v2 bodies: both paths refuse them, with the same 4xx code', () => {
  fc.assert(
    fc.property(requestArb, fc.constantFrom(...(Object.keys(BREAKS) as Break[])), (request, breakWith) => {
      const written = writeRequest(request, breakWith);
      const result = runBoth(written, signatureOf(request));
      assert.ok('error' in result, `a body broken by "${breakWith}" was accepted\n${shown(written)}`);
      assert.equal(result.error.code, BREAKS[breakWith], `${breakWith}: ${result.error.message}`);
    }),
    { numRuns: 200, includeErrorInReport: true },
  );
});

test('truncated v2 bodies: both paths refuse them, with the same 4xx code', () => {
  fc.assert(
    fc.property(requestArb, fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (request, where) => {
      const written = writeRequest(request);
      // Cutting only blanks off a JSON body leaves it whole: cut at or before its last brace.
      const end = written.headerLength < written.body.length ? written.body.length : written.body.lastIndexOf('}') + 1;
      const cut = Math.floor(where * end);
      const truncated = { ...written, body: written.body.subarray(0, cut) };
      const result = runBoth(truncated, signatureOf(request));
      assert.ok('error' in result, `a body cut at ${cut} of ${written.body.length} was accepted`);
    }),
    { numRuns: 150, includeErrorInReport: true },
  );
});

/** Bytes that make JSON (or a lifted array) go wrong in interesting ways. */
const MUTANT_BYTES = [...'0123456789.eE+-,[]{}":\\ \t\nntfNI']
  .map((char) => char.charCodeAt(0))
  .concat([0, 0x80, 0xc3, 0xff]);

test('mutated v2 bodies: both paths agree, and any refusal is a 4xx', () => {
  const edit = fc.record({
    where: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
    how: fc.constantFrom('replace', 'insert', 'delete'),
    byte: fc.constantFrom(...MUTANT_BYTES),
  });
  let refused = 0;
  let runs = 0;
  fc.assert(
    fc.property(requestArb, fc.array(edit, { minLength: 1, maxLength: 3 }), (request, edits) => {
      const written = writeRequest(request);
      const bytes = [...written.body];
      for (const { where, how, byte } of edits) {
        const at = Math.floor(where * bytes.length);
        if (how === 'replace') bytes[at] = byte;
        else if (how === 'insert') bytes.splice(at, 0, byte);
        else bytes.splice(at, 1);
      }
      const mutated = { ...written, body: Buffer.from(bytes) };
      runs++;
      if ('error' in runBoth(mutated, signatureOf(request))) refused++;
    }),
    { numRuns: 300, includeErrorInReport: true },
  );
  assert.ok(refused >= runs * 0.2, `only ${refused}/${runs} mutants were refused: the edits miss the JSON`);
});

// --- regressions the properties above found, or could not reach -------------------------------------

function both(text: string, inputs: readonly TensorSpec[], batching = false, headerLength?: number): Outcome {
  const body = Buffer.from(text);
  const written: Written = {
    body,
    framing: { headerLength: headerLength === undefined ? undefined : String(headerLength), binaryBody: false },
    headerLength: headerLength ?? body.length,
  };
  return runBoth(written, { inputs, outputs: OUTPUT_SPECS, batching });
}

const counting = (count: number): string[] => Array.from({ length: count }, (_, i) => String(i));

test('a malformed array under a duplicate "data" key is refused, as JSON.parse refuses it', () => {
  // JSON.parse keeps the last "data"; the first was lifted unread, so its bytes went unchecked.
  const numbers = counting(400);
  const bad = [...numbers.slice(0, 200), '1.2.3', ...numbers.slice(200)];
  for (const datatype of ['FP32', 'INT32'] as const) {
    for (const [first, second] of [
      [bad, numbers],
      [numbers, bad],
    ] as const) {
      const text = `{"inputs":[{"name":"x","datatype":"${datatype}","shape":[400],"data":[${first.join(',')}],"data":[${second.join(',')}]}]}`;
      const result = both(text, [{ name: 'x', datatype, shape: [400] }]);
      assert.ok('error' in result && result.error.code === 'BS_ERR_INFERENCE_INPUT', datatype);
    }
  }
  // Well-formed duplicates keep JSON.parse's meaning: the last one counts.
  const last = `{"inputs":[{"name":"x","datatype":"FP32","shape":[2],"data":[${numbers.join(',')}],"data":[7,8]}]}`;
  const result = both(last, [{ name: 'x', datatype: 'FP32', shape: [2] }]);
  assert.ok('ok' in result);
  assert.deepEqual(Array.from(result.ok.inputs.x?.data as Float32Array), [7, 8]);
});

test('an FP32 exponent of 7 digits or more is read whole, however many digits come before it', () => {
  // The exponent used to stop growing at 6 digits: with 100,000 zeros before the 1 that made
  // 0.000…1e1000010 (10^900009, Infinity) read as 1.
  const zeros = '0'.repeat(100_000);
  const cases: [string, number][] = [
    [`0.${zeros}1e1000010`, Infinity],
    [`-0.${zeros}1e1000010`, -Infinity],
    [`1${zeros}e-1000010`, 0],
    [`0.${zeros}1e100010`, Math.fround(1e9)],
    [`1e${'0'.repeat(30)}1`, 10],
  ];
  for (const [number, expected] of cases) {
    const numbers = [number, ...counting(400)];
    const text = `{"inputs":[{"name":"x","datatype":"FP32","shape":[${numbers.length}],"data":[${numbers.join(',')}]}]}`;
    const result = both(text, [{ name: 'x', datatype: 'FP32', shape: [-1] }]);
    assert.ok('ok' in result, number.slice(-12));
    assert.equal(result.ok.inputs.x?.data[0], expected, number.slice(-12));
  }
});

test('data nested as deep as a very long shape is refused as a 400, not a stack overflow', () => {
  for (const datatype of ['FP32', 'INT8', 'BYTES'] as const) {
    const depth = 20_000;
    const element = datatype === 'BYTES' ? '"a"' : '1';
    const text = `{"inputs":[{"name":"x","datatype":"${datatype}","shape":[${Array(depth).fill(1).join(',')}],"data":${'['.repeat(depth)}${element}${']'.repeat(depth)}}]}`;
    const result = both(text, [{ name: 'x', datatype, shape: [-1] }]);
    assert.ok('error' in result && result.error.code === 'BS_ERR_INFERENCE_INPUT', datatype);
  }
  // Nesting as deep as an ordinary shape allows is still read.
  const ok = both('{"inputs":[{"name":"x","datatype":"FP32","shape":[1,1,1,2],"data":[[[[1,2]]]]}]}', [
    { name: 'x', datatype: 'FP32', shape: [1, 1, 1, 2] },
  ]);
  assert.ok('ok' in ok);
});

test('binary BYTES of a shape far larger than the data is refused as a 400', () => {
  for (const count of [2 ** 32, 2 ** 40, Number.MAX_SAFE_INTEGER]) {
    const header = `{"inputs":[{"name":"x","datatype":"BYTES","shape":[${count}],"parameters":{"binary_data_size":4}}]}`;
    const body = Buffer.concat([Buffer.from(header), Buffer.alloc(4)]);
    const written: Written = {
      body,
      framing: { headerLength: String(header.length), binaryBody: true },
      headerLength: header.length,
    };
    const result = runBoth(written, {
      inputs: [{ name: 'x', datatype: 'BYTES', shape: [-1] }],
      outputs: [],
      batching: false,
    });
    assert.ok('error' in result && result.error.code === 'BS_ERR_INFERENCE_INPUT', String(count));
  }
});
