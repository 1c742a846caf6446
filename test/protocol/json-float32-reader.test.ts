import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { NumericSpan, parseHeaderLiftingData } from '../../src/protocol/json-data-lift.js';
import { decodeInferRequest } from '../../src/protocol/v2-codec.js';
import type { TensorSpec } from '../../src/core/tensors.js';

/**
 * The FP32 reader of lifted data arrays against its reference, JSON.parse then Float32Array,
 * on the numbers where a hand-written reader goes wrong: decimals within a few double ulps of
 * a float32 rounding midpoint (where JSON.parse's own rounding to a double decides the
 * float32), long mantissas, leading zeros, subnormals, exponents near the limits.
 */

const reference = (numbers: readonly string[]): Float32Array =>
  Float32Array.from(JSON.parse(`[${numbers.join(',')}]`) as number[]);

/** Long enough (> 1 KB) that the header parser lifts the array out for the fast reader. */
const padded = (numbers: readonly string[]): string[] => [
  ...numbers,
  ...Array.from({ length: 400 }, (_, i) => String(i)),
];

function bodyOf(numbers: readonly string[], separator = ', '): Buffer {
  return Buffer.from(
    `{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, ${numbers.length}], "data": [${numbers.join(separator)}]}]}`,
  );
}

/** Decodes one FP32 input of these numbers, checking that the fast reader (not JSON.parse) read them. */
function decodeLifted(numbers: readonly string[], separator = ', '): Float32Array {
  const body = bodyOf(numbers, separator);
  const header = parseHeaderLiftingData(body, body.length) as { inputs: { data: unknown }[] };
  assert.ok(header.inputs[0]?.data instanceof NumericSpan, 'the data array should be lifted');
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, numbers.length] };
  return decodeInferRequest(body, undefined, [spec]).inputs.x?.data as Float32Array;
}

function assertSameBits(numbers: readonly string[], separator = ', '): void {
  const actual = decodeLifted(numbers, separator);
  const expected = reference(numbers);
  assert.equal(actual.length, expected.length);
  for (let index = 0; index < expected.length; index++) {
    if (!Object.is(actual[index], expected[index])) {
      assert.fail(`${numbers[index]} reads as ${actual[index]}, JSON.parse then Float32Array gives ${expected[index]}`);
    }
  }
}

// --- exact decimals of binary values --------------------------------------------------------

const bits64 = new DataView(new ArrayBuffer(8));

/** A positive finite double as M × 2^E with an integer M. */
function binaryOf(value: number): { mantissa: bigint; exponent: number } {
  bits64.setFloat64(0, value);
  const word = bits64.getBigUint64(0);
  const biased = Number((word >> 52n) & 0x7ffn);
  const fraction = word & ((1n << 52n) - 1n);
  return biased === 0
    ? { mantissa: fraction, exponent: -1074 }
    : { mantissa: fraction | (1n << 52n), exponent: biased - 1075 };
}

/** The positive double `steps` doubles away from `value`. */
function doubleStep(value: number, steps: number): number {
  bits64.setFloat64(0, value);
  bits64.setBigUint64(0, bits64.getBigUint64(0) + BigInt(steps));
  return bits64.getFloat64(0);
}

/** A decimal D × 10^X, D a string of digits without leading zeros. */
interface Decimal {
  digits: string;
  exponent: number;
}

/** The exact decimal value of M × 2^E. */
function exactDecimal(mantissa: bigint, exponent: number): Decimal {
  if (exponent >= 0) return { digits: (mantissa << BigInt(exponent)).toString(), exponent: 0 };
  return { digits: (mantissa * 5n ** BigInt(-exponent)).toString(), exponent };
}

/** Keeps the first `kept` digits, rounding down, or up in the last kept digit. */
function truncated({ digits, exponent }: Decimal, kept: number, up: boolean): Decimal {
  if (kept >= digits.length) return { digits, exponent };
  const head = BigInt(digits.slice(0, kept)) + (up ? 1n : 0n);
  return { digits: head.toString(), exponent: exponent + digits.length - kept };
}

type Notation = 'plain' | 'integer-e' | 'scientific' | 'padded';

/** The decimal spelled as JSON allows: plain, D e X, d.ddd e X, or with zeros and signs JSON tolerates. */
function spell({ digits, exponent }: Decimal, notation: Notation, negative: boolean): string {
  const sign = negative ? '-' : '';
  const point = digits.length + exponent; // digits before the decimal point
  switch (notation) {
    case 'integer-e':
      return `${sign}${digits}e${exponent}`;
    case 'scientific':
      return `${sign}${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ''}E${point - 1 >= 0 ? '+' : ''}${point - 1}`;
    case 'padded': {
      // Trailing zeros in the fraction and a zero-padded exponent read the same.
      const scientific = `${digits[0]}.${digits.slice(1)}000`;
      const shift = point - 1;
      return `${sign}${scientific}e${shift < 0 ? '-' : ''}00${Math.abs(shift)}`;
    }
    case 'plain':
      if (exponent >= 0) return `${sign}${digits}${'0'.repeat(exponent)}`;
      if (point > 0) return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
      return `${sign}0.${'0'.repeat(-point)}${digits}`;
  }
}

/**
 * A decimal near the midpoint between the float32 with these bits and the next one up: the
 * midpoint itself, a double a few steps from it, or the exact halfway point between two such
 * doubles (where JSON.parse's rounding to a double ties to even), each kept in full, cut to
 * some digits, or extended by a far-off 1.
 */
const nearMidpoint = fc
  .record({
    bits: fc.oneof(
      fc.integer({ min: 0, max: 0x7f7fffff }),
      fc.integer({ min: 0, max: 0x800000 }), // subnormals and the smallest normals
      fc.integer({ min: 0x7f000000, max: 0x7f7fffff }), // up to the overflow threshold
      fc.integer({ min: 0x4b000000, max: 0x4b800000 }), // integers around 2^23 … 2^24
      // Powers of two, where the gap to the next float32 down is half the gap up.
      fc.integer({ min: 1, max: 254 }).map((exponent) => exponent * 0x800000),
      fc.integer({ min: 1, max: 254 }).map((exponent) => exponent * 0x800000 - 1),
    ),
    steps: fc.integer({ min: -3, max: 3 }),
    halfway: fc.boolean(),
    cut: fc.option(fc.record({ kept: fc.integer({ min: 1, max: 40 }), up: fc.boolean() })),
    tail: fc.option(fc.integer({ min: 0, max: 30 })),
    notation: fc.constantFrom<Notation>('plain', 'integer-e', 'scientific', 'padded'),
    negative: fc.boolean(),
  })
  .map(({ bits, steps, halfway, cut, tail, notation, negative }) => {
    const low = new Float32Array(new Uint32Array([bits]).buffer)[0] as number;
    const high = bits === 0x7f7fffff ? 2 ** 128 : (new Float32Array(new Uint32Array([bits + 1]).buffer)[0] as number);
    const midpoint = (low + high) / 2;
    const near = doubleStep(midpoint, steps);
    const { mantissa, exponent } = binaryOf(near);
    let decimal = halfway ? exactDecimal(2n * mantissa + 1n, exponent - 1) : exactDecimal(mantissa, exponent);
    if (cut !== null) decimal = truncated(decimal, cut.kept, cut.up);
    if (tail !== null) {
      decimal = { digits: `${decimal.digits}${'0'.repeat(tail)}1`, exponent: decimal.exponent - tail - 1 };
    }
    return spell(decimal, notation, negative);
  });

test('FP32 reader: decimals around float32 rounding midpoints read bit for bit as JSON.parse does', () => {
  fc.assert(
    fc.property(fc.array(nearMidpoint, { minLength: 1, maxLength: 40 }), (numbers) => assertSameBits(padded(numbers))),
    { numRuns: 300, seed: 0x5eed },
  );
});

test('FP32 reader: midpoints known to need care', () => {
  const cases = [
    // 1 + 2^-24 lies halfway between 1 and the next float32: ties go to even (1).
    '1.000000059604644775390625',
    '1.0000000596046447753906250000000000000000001',
    '1.0000000596046447753906249999999999999999999',
    '1.00000005960464478',
    '1.0000000596046448',
    '1.0000000596046447',
    '10000000596046447753906250e-25',
    '0.0000000000000000000000000000000000000000000000000000000000000000000000000010000000596046447753906251e75',
    // 2^24 + 1 is the first integer a float32 cannot hold.
    '16777217',
    '16777217.00000000000000000001',
    '16777217.0000000001',
    '16777219',
    '16777218.99999999999999999',
    // The overflow threshold, 2^128 - 2^103, and just around it.
    '340282356779733661637539395458142568448',
    '340282356779733661637539395458142568447.99999',
    '3.4028235677973366e38',
    '3.4028235677973362e38',
    '3.4028235677973370e38',
    // Halfway between the doubles either side of the threshold: JSON.parse ties to the
    // threshold itself, so these overflow, though an approximation lands on the largest float32.
    '340282356779733642748073463979561713664',
    '3.402823567797336428e38',
    '3.4028235677973364274807346397956171366400001e38',
    '340282356779733642748073463979561713663.9',
    '1e38',
    '1e39',
    // 2^-150, halfway between 0 and the smallest subnormal, and its neighbours.
    '7.006492321624085354618647916449580656401309709382578858785341419448955413429303e-46',
    '7.006492321624086e-46',
    '7.006492321624085e-46',
    '1.401298464324817e-45',
    '2.1019476964872256e-45',
    '1.1754942106924411e-38',
    '1.1754943508222875e-38',
    '1.17549428e-38',
    '5.877471754111438e-39',
  ];
  assertSameBits(padded(cases));
  assertSameBits(padded(cases.map((value) => `-${value}`)));
});

test('FP32 reader: long mantissas, leading zeros, zero spellings and exponents at their limits', () => {
  const cases = [
    '0.000000000000000000001',
    '0.0000000000000000000012345678901234567890123',
    '0.12345678901234567890123',
    '0.1234567890123456789012',
    '1234567890123456789012345678901234567890',
    '12345678901234567890.123456789',
    '123456789012345.6',
    '1234567890123456.7',
    '4.3',
    '0.3',
    '7e22',
    '7e23',
    '7e-22',
    '7e-23',
    '123456789012345e22',
    '123456789012345e-22',
    '1234567890123456e-22',
    '0e400',
    '0.000e-400',
    '-0.0',
    '0.0e0',
    '1e-308',
    '1e-309',
    '1e-324',
    '1e-400',
    '123e-310',
    '9e307',
    '1e308',
    '1e309',
    '1e99999',
    '1e100000',
    '1e100001',
    '1e9999999999999999999',
    '1e-9999999999999999999',
    '9999999999999999999999e-9999999999999999',
    `0.${'0'.repeat(99)}1e9`,
    `1${'0'.repeat(60)}e-1`,
    '0.00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001e100',
  ];
  assertSameBits(padded(cases));
});

test('FP32 reader: JSON whitespace anywhere between the tokens of the array', () => {
  const numbers = padded(['1.5', '-2', '3e1']);
  for (const space of [' ', '\t', '\n', '\r', ' \r\n\t ']) {
    const body = Buffer.from(
      `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,${numbers.length}],"data"${space}:${space}[${space}${numbers.join(`${space},${space}`)}${space}]${space}}]}`,
    );
    const header = parseHeaderLiftingData(body, body.length) as { inputs: { data: unknown }[] };
    assert.ok(header.inputs[0]?.data instanceof NumericSpan, JSON.stringify(space));
    const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, numbers.length] };
    assert.deepEqual(
      decodeInferRequest(body, undefined, [spec]).inputs.x?.data,
      reference(numbers),
      JSON.stringify(space),
    );
  }
  assert.deepEqual(decodeLifted(padded([]), ','), reference(padded([])));
  // An empty array, however long its blanks, is zero elements.
  for (const blank of [' ', '\n', '\t\r']) {
    const body = Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":[0],"data":[${blank.repeat(1100)}]}]}`);
    const header = parseHeaderLiftingData(body, body.length) as { inputs: { data: unknown }[] };
    assert.ok(header.inputs[0]?.data instanceof NumericSpan, JSON.stringify(blank));
    assert.equal(decodeInferRequest(body, undefined, []).inputs.x?.data.length, 0, JSON.stringify(blank));
  }
});

test('FP32 reader: what JSON refuses inside a lifted array is refused, with the place it went wrong', () => {
  const bad = [
    '1.2.3',
    '01',
    '00',
    '-01',
    '',
    '-',
    '1e',
    '.5',
    '5.',
    '5.e3',
    '1.-2',
    '1.e',
    '1e+',
    '1e-',
    '1e+-2',
    '1ee2',
    '--1',
    '1-2',
    '+1',
    '1 2',
    '0x10',
    'Infinity',
    'NaN',
    '-Infinity',
    '1\f',
    '\u000b1',
    '1e5.5',
    'e5',
    'x',
    '~',
    '١',
  ];
  for (const value of bad) {
    const numbers = padded(['1', value, '2']);
    assert.throws(
      () => JSON.parse(`[${numbers.join(',')}]`),
      SyntaxError,
      `JSON.parse takes ${JSON.stringify(value)}?`,
    );
    const body = bodyOf(numbers);
    const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, numbers.length] };
    assert.throws(
      () => decodeInferRequest(body, undefined, [spec]),
      { code: 'BS_ERR_INFERENCE_INPUT', message: /not JSON/ },
      JSON.stringify(value),
    );
  }
  // Malformed last elements, just before the bracket.
  for (const last of ['5.', '1e', '-', '1e+']) {
    const numbers = [...padded([]), last];
    const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, numbers.length] };
    assert.throws(
      () => decodeInferRequest(bodyOf(numbers), undefined, [spec]),
      { code: 'BS_ERR_INFERENCE_INPUT' },
      last,
    );
  }
  // The message points at the offending number, with a short excerpt of it.
  const numbers = padded(['1', '2.x5', '3']);
  const body = bodyOf(numbers);
  const at = body.indexOf('2.x5');
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, numbers.length] };
  assert.throws(() => decodeInferRequest(body, undefined, [spec]), {
    code: 'BS_ERR_INFERENCE_INPUT',
    message: `the request header is not JSON: a malformed number at byte ${at} of the body: "2.x5, 3, 0, 1, 2, 3,"`,
  });
  const tail = [...padded([]), '7-'];
  const tailBody = bodyOf(tail);
  const tailAt = tailBody.lastIndexOf('-');
  assert.throws(() => decodeInferRequest(tailBody, undefined, [{ ...spec, shape: [-1, tail.length] }]), {
    message: `the request header is not JSON: a malformed number at byte ${tailAt} of the body: "-]"`,
  });
});
