import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { TensorSpec } from '../../src/config/model-config.js';
import { NumericSpan, parseHeaderLiftingData } from '../../src/server/json-data-lift.js';
import { decodeInferRequest } from '../../src/server/v2-codec.js';

/** The long-array fast path must read exactly what JSON.parse then Float32Array would. */
const reference = (numbers: readonly string[]): Float32Array =>
  Float32Array.from(JSON.parse(`[${numbers.join(',')}]`) as number[]);

/** Which way the header parser took the input's data: lifted out as bytes, or parsed by JSON.parse. */
function decodedPath(body: Buffer): 'lifted' | 'parsed' {
  const header = parseHeaderLiftingData(body, body.length) as { inputs: { data: unknown }[] };
  return header.inputs[0]?.data instanceof NumericSpan ? 'lifted' : 'parsed';
}

/**
 * Decodes one input `x` of the given numbers. `expectPath` says which path must have read the
 * data: the JSON.parse fallback gives the same values, so without it a broken fast path that
 * never runs would pass every comparison below.
 */
function decode(
  numbers: readonly string[],
  datatype = 'FP32',
  extra = '',
  expectPath: 'lifted' | 'parsed' = 'lifted',
): ArrayLike<unknown> {
  const spec: TensorSpec = { name: 'x', datatype: datatype as TensorSpec['datatype'], shape: [-1, numbers.length] };
  const body = Buffer.from(
    `{"id": "a \\"data\\": [1, 2] string"${extra}, "inputs": [{"name": "x", "datatype": "${datatype}", "shape": [1, ${numbers.length}], "data": [${numbers.join(', ')}]}]}`,
  );
  assert.equal(decodedPath(body), expectPath, `the ${expectPath} path should read this data`);
  return decodeInferRequest(body, undefined, [spec]).inputs.x?.data as ArrayLike<unknown>;
}

function assertSameBits(actual: ArrayLike<unknown>, expected: Float32Array, context: string): void {
  assert.equal(actual.length, expected.length);
  for (let index = 0; index < expected.length; index++) {
    if (!Object.is(actual[index], expected[index])) {
      assert.fail(`${context}: element ${index} is ${String(actual[index])}, JSON.parse gives ${expected[index]}`);
    }
  }
}

/** Long enough (> 1 KB) that the fast path takes it. */
const padded = (numbers: readonly string[]): string[] => [
  ...numbers,
  ...Array.from({ length: 400 }, (_, i) => String(i)),
];

test('FP32 data: float32 values, 17-digit doubles and awkward spellings read bit for bit as JSON.parse does', () => {
  const float32s = Array.from(
    new Float32Array(5000).map(() => (Math.random() - 0.5) * 10 ** (Math.random() * 20 - 10)),
    String,
  );
  assertSameBits(decode(float32s), reference(float32s), 'float32 values');
  const doubles = Array.from({ length: 5000 }, () => String((Math.random() - 0.5) * 10 ** (Math.random() * 80 - 40)));
  assertSameBits(decode(doubles), reference(doubles), 'doubles');
  const awkward = padded([
    '0',
    '-0',
    '1',
    '-1',
    '0.1',
    '1e-45',
    '1.4e-45',
    '7.006492321624085e-46',
    '3.4028235e38',
    '3.4028236e38',
    '1e39',
    '-1e39',
    '1e-50',
    '1e400',
    '123456789012345678901234567890',
    '0.000000000000000000000000000001',
    '1E+5',
    '2.5e-3',
    '16777217',
    '0.30000001192092896',
    '1.00000005960464477539062500',
    '1.000000059604644775390625000000001',
    '0.99999997019767761230468750',
    '100000000000000000000000',
    '1.17549435082228750797e-38',
    '5e-324',
  ]);
  assertSameBits(decode(awkward), reference(awkward), 'awkward spellings');
});

test('FP32 data: a property over arbitrary doubles and floats', () => {
  fc.assert(
    fc.property(
      fc.array(
        fc.oneof(
          fc.double({ noNaN: true, noDefaultInfinity: true }),
          fc.float({ noNaN: true, noDefaultInfinity: true }),
        ),
        {
          minLength: 300,
          maxLength: 600,
        },
      ),
      (values) => {
        const numbers = values.map((value) => JSON.stringify(value));
        assertSameBits(decode(numbers), reference(numbers), 'property');
      },
    ),
    { numRuns: 60 },
  );
});

test('other datatypes and other places keep exact JSON.parse values', () => {
  const doubles = Array.from({ length: 300 }, () => String(Math.random() * 1e6));
  assert.deepEqual(Array.from(decode(doubles, 'FP64') as Float64Array), JSON.parse(`[${doubles.join(',')}]`));
  const ints = Array.from({ length: 400 }, (_, i) => String(i * 1000 - 200_000));
  assert.deepEqual(Array.from(decode(ints, 'INT32') as Int32Array), ints.map(Number));
  // A long numeric "data" in the request parameters comes back as an ordinary array.
  const long = Array.from({ length: 400 }, (_, i) => i);
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 2] };
  const body = Buffer.from(
    JSON.stringify({
      parameters: { data: long },
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2], data: [1, 2] }],
    }),
  );
  assert.deepEqual(decodeInferRequest(body, undefined, [spec]).parameters.data, long);
});

test('malformed numbers in a long array are refused as not JSON, like JSON.parse would', () => {
  for (const bad of ['1.2.3', '01', '', '-', '1e', '.5', '5.', '1e+', '--1', '1-2', '+1']) {
    const numbers = padded(['1', bad, '2']);
    assert.throws(() => JSON.parse(`[${numbers.join(',')}]`), SyntaxError, `JSON.parse accepts ${bad}?`);
    assert.throws(() => decode(numbers), { code: 'BS_ERR_INFERENCE_INPUT', message: /not JSON/ }, JSON.stringify(bad));
  }
  assert.throws(() => decode([...padded(['1']), '']), { code: 'BS_ERR_INFERENCE_INPUT' }, 'trailing comma');
});

test('short, nested or non-numeric data is left to JSON.parse, with the same values', () => {
  const short = ['1.5', '2', '-3'];
  assertSameBits(decode(short, 'FP32', '', 'parsed'), reference(short), 'short');
  const nestedBody = Buffer.from(
    `{"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 300], "data": [[${padded([]).slice(0, 300).join(',')}], [${padded([]).slice(0, 300).join(',')}]]}]}`,
  );
  assert.equal(decodedPath(nestedBody), 'parsed');
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 300] };
  assert.equal(decodeInferRequest(nestedBody, undefined, [spec]).inputs.x?.data.length, 600);
});

test('a body whose last bytes hold a quote is read, not refused (the key search stays inside the body)', () => {
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 2] };
  for (const body of [
    '{"inputs":[],"id":"42"}',
    '{"id":"4","inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}],"a":""}',
  ]) {
    const bytes = Buffer.from(body);
    assert.deepEqual(parseHeaderLiftingData(bytes, bytes.length), JSON.parse(body), body);
  }
  // The header may be followed by binary data: the search must stop at the header's length.
  const header = '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}],"id":"d"}';
  const withTail = Buffer.concat([Buffer.from(header), Buffer.from('"data": [')]);
  assert.deepEqual(parseHeaderLiftingData(withTail, header.length), JSON.parse(header));
  assert.deepEqual(
    Array.from(decodeInferRequest(Buffer.from(header), undefined, [spec]).inputs.x?.data as Float32Array),
    [1, 2],
  );
});
