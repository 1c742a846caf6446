import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { NumericSpan, parseHeaderLiftingData } from '../../src/protocol/json-data-lift.js';
import { decodeInferRequest } from '../../src/protocol/v2-codec.js';
import type { TensorSpec } from '../../src/core/tensors.js';

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

/** A seeded generator (mulberry32), so a failure here fails the same way on every run. */
function seeded(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = Math.imul(state ^ (state >>> 15), state | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}
const random = seeded(20240601);

/** Long enough (> 1 KB) that the fast path takes it. */
const padded = (numbers: readonly string[]): string[] => [
  ...numbers,
  ...Array.from({ length: 400 }, (_, i) => String(i)),
];

test('FP32 data: float32 values, 17-digit doubles and awkward spellings read bit for bit as JSON.parse does', () => {
  const float32s = Array.from(
    new Float32Array(5000).map(() => (random() - 0.5) * 10 ** (random() * 20 - 10)),
    String,
  );
  assertSameBits(decode(float32s), reference(float32s), 'float32 values');
  const doubles = Array.from({ length: 5000 }, () => String((random() - 0.5) * 10 ** (random() * 80 - 40)));
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
    { numRuns: 60, seed: 20240601 },
  );
});

test('other datatypes and other places keep exact JSON.parse values', () => {
  const doubles = Array.from({ length: 300 }, () => String(random() * 1e6));
  assert.deepEqual(Array.from(decode(doubles, 'FP64') as Float64Array), JSON.parse(`[${doubles.join(',')}]`));
  const ints = Array.from({ length: 400 }, (_, i) => String(i * 1000 - 200_000));
  const int32 = decode(ints, 'INT32');
  assert.ok(int32 instanceof Int32Array, 'a lifted INT32 array is read as INT32, not by the FP32 reader');
  assert.deepEqual(Array.from(int32), ints.map(Number));
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

test('a lifted FP32 array is held to the shape like any other: counts, and a shape beyond the body', () => {
  const numbers = padded([]);
  const body = (shape: string): Buffer =>
    Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":${shape},"data":[${numbers.join(',')}]}]}`);
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, -1] };
  for (const [shape, count] of [
    [1, 399],
    [1, 401],
  ]) {
    assert.equal(decodedPath(body(`[${shape},${count}]`)), 'lifted');
    assert.throws(() => decodeInferRequest(body(`[${shape},${count}]`), undefined, [spec]), {
      code: 'BS_ERR_INFERENCE_INPUT',
      message: `input "x": shape [${shape}, ${count}] needs ${count} elements, got 400`,
    });
  }
  // A shape the header's bytes cannot hold is refused without allocating it.
  assert.throws(() => decodeInferRequest(body('[1000000000,1000000]'), undefined, [spec]), {
    code: 'BS_ERR_INFERENCE_INPUT',
    message: 'input "x": shape [1000000000, 1000000] needs 1000000000000000 elements, got 400',
  });
});

test('arrays of 1024 bytes and more are lifted, shorter ones parsed', () => {
  // "[1,1,…,1]" with n ones is 2n + 1 bytes; "[1,…,1,10]" one more.
  const ones = (count: number): string[] => Array.from({ length: count }, () => '1');
  const body = (numbers: readonly string[]): Buffer =>
    Buffer.from(
      `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,${numbers.length}],"data":[${numbers.join(',')}]}]}`,
    );
  assert.equal(`[${ones(512).join(',')}]`.length, 1025);
  assert.equal(decodedPath(body(ones(512))), 'lifted');
  assert.equal(decodedPath(body([...ones(510), '10'])), 'lifted', '1024 bytes');
  assert.equal(decodedPath(body(ones(511))), 'parsed', '1023 bytes');
});

test('no string a client sends poses as a lifted array', () => {
  const long = Array.from({ length: 400 }, (_, i) => i);
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 400] };
  for (const text of ['', '0', '1', '\u0000']) {
    const body = Buffer.from(
      JSON.stringify({
        id: text,
        parameters: { note: text, list: [text] },
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 400], data: long }],
      }),
    );
    assert.equal(decodedPath(body), 'lifted');
    const decoded = decodeInferRequest(body, undefined, [spec]);
    assert.equal(decoded.id, text);
    assert.deepEqual(decoded.parameters, { note: text, list: [text] });
    assert.deepEqual(Array.from(decoded.inputs.x?.data as Float32Array), long);
  }
});

test('a lifted array in a malformed request still gets the malformed request error', () => {
  const long = JSON.stringify(Array.from({ length: 400 }, (_, i) => i));
  const cases: [string, RegExp][] = [
    [`{"parameters":{"data":${long}}}`, /^the request needs an "inputs" array$/],
    [`{"inputs":{"x":{"data":${long}}}}`, /^the request needs an "inputs" array$/],
    [`{"inputs":[null,{"name":"x","datatype":"FP32","shape":[400],"data":${long}}]}`, /^inputs\[0\] must be/],
    [`{"inputs":[7,{"name":"x","datatype":"FP32","shape":[400],"data":${long}}]}`, /^inputs\[0\] must be/],
  ];
  for (const [body, message] of cases) {
    assert.throws(() => decodeInferRequest(Buffer.from(body), undefined, []), {
      code: 'BS_ERR_INFERENCE_INPUT',
      message,
    });
  }
});

test('a malformed number in a lifted array that JSON.parse reads is refused as not JSON, with its place', () => {
  const numbers = padded(['1', '1.2.3', '2']);
  const list = `[${numbers.join(',')}]`;
  for (const body of [
    `{"parameters":{"data":${list}},"inputs":[]}`,
    `{"inputs":[{"name":"x","datatype":"INT32","shape":[${numbers.length}],"data":${list}}]}`,
  ]) {
    const at = body.indexOf(list);
    assert.throws(() => decodeInferRequest(Buffer.from(body), undefined, []), {
      code: 'BS_ERR_INFERENCE_INPUT',
      message: new RegExp(`^the request header is not JSON: [^:]+ in the data array at byte ${at}$`),
    });
  }
});

test('the key search follows JSON strings, escapes included, and lifts only arrays', () => {
  const long = Array.from({ length: 400 }, (_, i) => i);
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 400] };
  // A string ending in an escaped quote, then one in an escaped backslash, before the inputs.
  const body = Buffer.from(
    JSON.stringify({
      id: 'say "',
      parameters: { path: 'C:\\' },
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 400], data: long }],
    }),
  );
  assert.equal(decodedPath(body), 'lifted');
  assert.equal(decodeInferRequest(body, undefined, [spec]).id, 'say "');
  // A number followed by a long run of blanks is not an array, however long.
  const scalar = Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":5${' '.repeat(1100)}}]}`);
  assert.throws(() => decodeInferRequest(scalar, undefined, []), {
    code: 'BS_ERR_INFERENCE_INPUT',
    message: 'input "x": data must be an array',
  });
  // A header cut off inside a long data array is not JSON (and the search ends).
  const cut = Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":[400],"data":[${long.join(',')}`);
  assert.throws(() => decodeInferRequest(cut, undefined, []), {
    code: 'BS_ERR_INFERENCE_INPUT',
    message: /^the request header is not JSON: /,
  });
});
