import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Tensor } from '../../src/core/tensors.js';
import { tensorOf } from '../fixtures/tensors.js';
import type { BatchserveError } from '../../src/core/errors.js';
import { DATATYPES, datatypeOfOrtType, ortTypeOf, type Datatype } from '../../src/core/datatypes.js';
import type { Tensors as TensorMap, TensorSpec } from '../../src/core/tensors.js';
import { floatToHalf, halfToFloat } from '../../src/protocol/binary-tensor.js';
import {
  decodeInferRequest,
  encodeInferResponse,
  type EncodedResponse,
  type ResponseOutput,
} from '../../src/protocol/v2-codec.js';

// --- helpers ------------------------------------------------------------------

type Values = Tensor['data'];
type NumericArray = Exclude<Values, string[]>;
type Json = Record<string, unknown>;

const ARRAY_OF = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP16: Uint16Array,
  FP32: Float32Array,
  FP64: Float64Array,
} as const;

function makeTensor(datatype: Datatype, values: readonly unknown[], dims: readonly number[]): Tensor {
  if (datatype === 'BYTES') return tensorOf('string', values as string[], dims);
  const Array_ = ARRAY_OF[datatype] as unknown as { from(values: readonly unknown[]): NumericArray };
  return tensorOf(ortTypeOf(datatype), Array_.from(values), dims);
}

const jsonBody = (header: unknown): Buffer => Buffer.from(JSON.stringify(header));

/** A JSON header followed by binary parts; the whole body sits at an odd offset of a larger buffer. */
function binaryBody(header: unknown, parts: readonly Uint8Array[]): { body: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header) + ' ');
  const whole = Buffer.concat([Buffer.alloc(1), json, ...parts]);
  return { body: whole.subarray(1), headerLength: json.length };
}

function bytesOf(data: NumericArray): Buffer {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

function bytesElements(strings: readonly string[]): Buffer {
  return Buffer.concat(
    strings.flatMap((value) => {
      const bytes = Buffer.from(value);
      const length = Buffer.alloc(4);
      length.writeUInt32LE(bytes.length);
      return [length, bytes];
    }),
  );
}

function binaryBytes(tensor: Tensor): Buffer {
  return ortTypeOf(tensor.datatype) === 'string'
    ? bytesElements(tensor.data as string[])
    : bytesOf(tensor.data as NumericArray);
}

const dataOf = (tensor: Tensor | undefined): Values => {
  assert.ok(tensor, 'tensor is present');
  return tensor.data;
};

/** Exact equality: datatype, dims and every bit of the data. */
function assertSameTensor(actual: Tensor | undefined, expected: Tensor): void {
  assert.ok(actual, 'tensor is present');
  assert.equal(ortTypeOf(actual.datatype), ortTypeOf(expected.datatype));
  assert.deepEqual(actual.dims, expected.dims);
  if (ortTypeOf(expected.datatype) === 'string') assert.deepEqual(actual.data, expected.data);
  else assert.deepEqual(binaryBytes(actual), binaryBytes(expected));
}

/** What JSON can carry: -0 becomes 0 and FP16 NaNs lose their payload. */
function jsonNormalized(tensor: Tensor): Tensor {
  if (ortTypeOf(tensor.datatype) === 'float32' || ortTypeOf(tensor.datatype) === 'float64') {
    const data = (tensor.data as Float32Array).map((value) => (value === 0 ? 0 : value));
    return tensorOf(ortTypeOf(tensor.datatype), data, tensor.dims);
  }
  if (ortTypeOf(tensor.datatype) === 'float16') {
    const data = (tensor.data as Uint16Array).map((bits) =>
      floatToHalf(halfToFloat(bits) === 0 ? 0 : halfToFloat(bits)),
    );
    return tensorOf('float16', data, tensor.dims);
  }
  return tensor;
}

/** JSON data as a client would write it, flat or nested along the shape. */
function jsonData(tensor: Tensor, nested: boolean): unknown[] {
  const values = Array.from(tensor.data as ArrayLike<unknown>, (value): unknown => {
    if (ortTypeOf(tensor.datatype) === 'bool') return value === 1;
    if (ortTypeOf(tensor.datatype) === 'float16') value = halfToFloat(value as number);
    if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : String(value);
    if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
    return value;
  });
  if (!nested || tensor.dims.length < 2) return values;
  const nest = (start: number, axis: number): unknown[] => {
    const size = tensor.dims.slice(axis + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: tensor.dims[axis] as number }, (_, i) =>
      axis === tensor.dims.length - 1 ? values[start + i] : nest(start + i * size, axis + 1),
    );
  };
  return nest(0, 0);
}

/** The test's own reading of a response body: header JSON, binary parts, JSON data. */
function parseResponse(encoded: EncodedResponse): { header: Json; tensors: TensorMap } {
  const headerLength = encoded.headerLength ?? encoded.body.length;
  const header = JSON.parse(encoded.body.toString('utf8', 0, headerLength)) as Json;
  const tensors: TensorMap = {};
  let offset = headerLength;
  for (const output of header.outputs as Json[]) {
    const datatype = output.datatype as Datatype;
    const dims = output.shape as number[];
    const size = (output.parameters as Json | undefined)?.binary_data_size as number | undefined;
    let values: unknown[];
    if (size === undefined) {
      values = (output.data as unknown[]).map((value) => {
        if (datatype === 'BOOL') return value ? 1 : 0;
        if (datatype === 'INT64' || datatype === 'UINT64') return BigInt(value as number | string);
        if (datatype === 'BYTES') return value;
        const number = Number(value); // "NaN", "Infinity", "-Infinity" read as numbers
        return datatype === 'FP16' ? floatToHalf(number) : number;
      });
    } else {
      const bytes = encoded.body.subarray(offset, (offset += size));
      if (datatype === 'BYTES') {
        values = [];
        for (let at = 0; at < bytes.length;) {
          const length = bytes.readUInt32LE(at);
          values.push(bytes.toString('utf8', at + 4, (at += 4 + length)));
        }
      } else {
        values = Array.from(new ARRAY_OF[datatype](new Uint8Array(bytes).buffer) as ArrayLike<unknown>);
      }
    }
    tensors[output.name as string] = makeTensor(datatype, values, dims);
  }
  assert.equal(offset, encoded.body.length, 'the binary parts fill the body');
  return { header, tensors };
}

/** A 400 for the client: the stable code, and a message that says what to fix when a pattern is given. */
function assertInputError(run: () => unknown, label: string, message?: RegExp): void {
  assert.throws(
    run,
    (error: BatchserveError) => {
      assert.equal(error.code, 'BS_ERR_INFERENCE_INPUT', label);
      if (message) assert.match(error.message, message, label);
      return true;
    },
    label,
  );
}

// --- arbitraries -----------------------------------------------------------------

const elementOf: Record<Datatype, fc.Arbitrary<unknown>> = {
  BOOL: fc.integer({ min: 0, max: 1 }),
  UINT8: fc.integer({ min: 0, max: 0xff }),
  UINT16: fc.integer({ min: 0, max: 0xffff }),
  UINT32: fc.integer({ min: 0, max: 0xffffffff }),
  UINT64: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
  INT8: fc.integer({ min: -0x80, max: 0x7f }),
  INT16: fc.integer({ min: -0x8000, max: 0x7fff }),
  INT32: fc.integer({ min: -0x80000000, max: 0x7fffffff }),
  INT64: fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
  FP16: fc.integer({ min: 0, max: 0xffff }),
  FP32: fc.float(),
  FP64: fc.double(),
  BYTES: fc.string({ unit: 'grapheme', maxLength: 6 }),
};

const tensorArbitrary: fc.Arbitrary<Tensor> = fc
  .record({
    datatype: fc.constantFrom(...DATATYPES),
    dims: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
  })
  .chain(({ datatype, dims }) => {
    const count = dims.reduce((a, b) => a * b, 1);
    return fc
      .array(elementOf[datatype], { minLength: count, maxLength: count })
      .map((values) => makeTensor(datatype, values, dims));
  });

const outputsArbitrary = fc.uniqueArray(
  fc.record({ name: fc.string({ minLength: 1, maxLength: 8 }), tensor: tensorArbitrary, binary: fc.boolean() }),
  { minLength: 1, maxLength: 4, selector: (output) => output.name },
);

// --- JSON requests -------------------------------------------------------------------

test('a JSON request decodes flat and nested data into the same typed array', () => {
  const input = { name: 'x', shape: [2, 3], datatype: 'FP32' };
  const flat = decodeInferRequest(jsonBody({ inputs: [{ ...input, data: [1, 2, 3, 4, 5, 6] }] }), undefined, []);
  const nested = decodeInferRequest(
    jsonBody({ inputs: [{ ...input, data: [[1, 2, 3], [4, 5, 6]] }] }), // prettier-ignore
    undefined,
    [],
  );
  const expected = tensorOf('float32', Float32Array.of(1, 2, 3, 4, 5, 6), [2, 3]);
  assertSameTensor(flat.inputs.x, expected);
  assertSameTensor(nested.inputs.x, expected);
  assert.ok(dataOf(flat.inputs.x) instanceof Float32Array);
});

test('a JSON request keeps id and parameters and reads the requested outputs', () => {
  const decoded = decodeInferRequest(
    jsonBody({
      id: '42',
      parameters: { priority: 2, timeout: 500, binary_data_output: true },
      inputs: [{ name: 'x', shape: [1], datatype: 'INT32', data: [7] }],
      outputs: [
        { name: 'scores', parameters: { classification: 3 } },
        { name: 'logits', parameters: { binary_data: false } },
        { name: 'features' },
      ],
    }),
    undefined,
    [],
  );
  assert.equal(decoded.id, '42');
  assert.deepEqual(decoded.parameters, { priority: 2, timeout: 500, binary_data_output: true });
  assert.equal(decoded.binaryDataOutput, true);
  assert.deepEqual(decoded.outputs, [
    { name: 'scores', binary: true, classification: 3 },
    { name: 'logits', binary: false },
    { name: 'features', binary: true },
  ]);

  const plain = decodeInferRequest(jsonBody({ inputs: [] }), undefined, []);
  assert.equal(plain.outputs, undefined);
  assert.equal(plain.binaryDataOutput, false);
  assert.deepEqual(plain.parameters, {});
});

test('JSON spellings: int64 as numbers or strings, non-finite floats as strings, bool as 0/1, FP16 as numbers', () => {
  const decoded = decodeInferRequest(
    jsonBody({
      inputs: [
        { name: 'i', shape: [3], datatype: 'INT64', data: [-5, '9223372036854775807', '-9223372036854775808'] },
        { name: 'u', shape: [2], datatype: 'UINT64', data: [0, '18446744073709551615'] },
        { name: 'f', shape: [4], datatype: 'FP64', data: ['NaN', 'Infinity', '-Infinity', -0.5] },
        { name: 'b', shape: [4], datatype: 'BOOL', data: [true, false, 1, 0] },
        { name: 'h', shape: [4], datatype: 'FP16', data: [1, -2, 0.1, 65504] },
        { name: 's', shape: [2], datatype: 'BYTES', data: ['héllo', ''] },
      ],
    }),
    undefined,
    [],
  );
  assert.deepEqual(dataOf(decoded.inputs.i), BigInt64Array.of(-5n, 2n ** 63n - 1n, -(2n ** 63n)));
  assert.deepEqual(dataOf(decoded.inputs.u), BigUint64Array.of(0n, 2n ** 64n - 1n));
  assert.deepEqual(dataOf(decoded.inputs.f), Float64Array.of(NaN, Infinity, -Infinity, -0.5));
  assert.deepEqual(dataOf(decoded.inputs.b), Uint8Array.of(1, 0, 1, 0));
  assert.deepEqual(dataOf(decoded.inputs.h), Uint16Array.of(0x3c00, 0xc000, 0x2e66, 0x7bff));
  assert.deepEqual(dataOf(decoded.inputs.s), ['héllo', '']);
});

// --- binary requests -----------------------------------------------------------------

test('binary requests decode FP32, INT64, BOOL, BYTES and FP16 into aligned typed arrays', () => {
  const fp32 = Float32Array.of(1.5, -2, 3.25);
  const int64 = BigInt64Array.of(1n, -(2n ** 62n));
  const bool = Uint8Array.of(1, 0, 1, 1);
  const fp16 = Uint16Array.of(0x3c00, 0x8001, 0x7c00);
  const strings = ['a', '', 'ünïcødé ✓'];
  const inputs = [
    { name: 'fp32', datatype: 'FP32', shape: [3], bytes: bytesOf(fp32) },
    { name: 'int64', datatype: 'INT64', shape: [1, 2], bytes: bytesOf(int64) },
    { name: 'bool', datatype: 'BOOL', shape: [2, 2], bytes: bytesOf(bool) },
    { name: 'bytes', datatype: 'BYTES', shape: [3], bytes: bytesElements(strings) },
    { name: 'fp16', datatype: 'FP16', shape: [3], bytes: bytesOf(fp16) },
  ];
  const { body, headerLength } = binaryBody(
    {
      inputs: inputs.map(({ name, datatype, shape, bytes }) => ({
        name,
        datatype,
        shape,
        parameters: { binary_data_size: bytes.length },
      })),
    },
    inputs.map((input) => input.bytes),
  );
  const decoded = decodeInferRequest(body, headerLength, []).inputs;
  assertSameTensor(decoded.fp32, tensorOf('float32', fp32, [3]));
  assertSameTensor(decoded.int64, tensorOf('int64', int64, [1, 2]));
  assertSameTensor(decoded.bool, tensorOf('bool', bool, [2, 2]));
  assertSameTensor(decoded.bytes, tensorOf('string', strings, [3]));
  assertSameTensor(decoded.fp16, tensorOf('float16', fp16, [3]));
  assert.ok(dataOf(decoded.fp32) instanceof Float32Array);
  assert.ok(dataOf(decoded.int64) instanceof BigInt64Array);
  assert.ok(dataOf(decoded.fp16) instanceof Uint16Array);
});

test('binary and JSON inputs mix in one request; binary parts follow in input order', () => {
  const { body, headerLength } = binaryBody(
    {
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [2], parameters: { binary_data_size: 8 } },
        { name: 'b', datatype: 'INT32', shape: [3], data: [1, 2, 3] },
        { name: 'c', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: 11 } },
      ],
    },
    [bytesOf(Float32Array.of(0.5, -0.25)), bytesElements(['xyz', ''])],
  );
  const { inputs } = decodeInferRequest(body, headerLength, []);
  assert.deepEqual(Object.keys(inputs), ['a', 'b', 'c']);
  assertSameTensor(inputs.a, tensorOf('float32', Float32Array.of(0.5, -0.25), [2]));
  assertSameTensor(inputs.b, tensorOf('int32', Int32Array.of(1, 2, 3), [3]));
  assertSameTensor(inputs.c, tensorOf('string', ['xyz', ''], [2]));
});

test('property: a JSON request and a binary request for the same tensor decode to identical tensors', () => {
  fc.assert(
    fc.property(tensorArbitrary, fc.boolean(), (original, nested) => {
      const tensor = jsonNormalized(original);
      const datatype = datatypeOfOrtType(ortTypeOf(tensor.datatype));
      const input = { name: 'x', datatype, shape: tensor.dims };
      const fromJson = decodeInferRequest(
        jsonBody({ inputs: [{ ...input, data: jsonData(tensor, nested) }] }),
        undefined,
        [],
      ).inputs.x;
      const bytes = binaryBytes(tensor);
      const { body, headerLength } = binaryBody(
        { inputs: [{ ...input, parameters: { binary_data_size: bytes.length } }] },
        [bytes],
      );
      const fromBinary = decodeInferRequest(body, headerLength, []).inputs.x;
      assertSameTensor(fromJson, tensor);
      assertSameTensor(fromBinary, tensor);
    }),
    { numRuns: 300 },
  );
});

// --- raw binary requests (Inference-Header-Content-Length: 0) ------------------------

test('a raw binary request is the single input, rows from the byte length, outputs binary', () => {
  const model: TensorSpec[] = [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }];
  const values = Float32Array.of(1, 2, 3, 4, 5, 6);
  const decoded = decodeInferRequest(bytesOf(values), 0, model);
  assertSameTensor(decoded.inputs.x, tensorOf('float32', values, [2, 3]));
  assert.equal(decoded.binaryDataOutput, true);
  assert.equal(decoded.outputs, undefined);

  const fixed: TensorSpec[] = [{ name: 'y', datatype: 'INT32', shape: [2, 2] }];
  const ints = Int32Array.of(1, -2, 3, -4);
  assertSameTensor(decodeInferRequest(bytesOf(ints), 0, fixed).inputs.y, tensorOf('int32', ints, [2, 2]));

  const text: TensorSpec[] = [{ name: 's', datatype: 'BYTES', shape: [-1, 1] }];
  assertSameTensor(
    decodeInferRequest(Buffer.from('raw text ✓'), 0, text).inputs.s,
    tensorOf('string', ['raw text ✓'], [1, 1]),
  );
});

// --- malformed requests --------------------------------------------------------------

test('every malformed request is BS_ERR_INFERENCE_INPUT, with a message that names what is wrong', () => {
  const fp32 = (data: unknown, shape: unknown = [2, 3]) => ({ inputs: [{ name: 'x', datatype: 'FP32', shape, data }] });
  const one = (datatype: string, data: unknown[]) => ({ inputs: [{ name: 'x', datatype, shape: [1], data }] });
  const withParameters = (parameters: unknown) => ({
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1], parameters }],
  });
  const jsonCases: Record<string, [unknown, RegExp]> = {
    'header is an array': [[], /^the request header must be a JSON object$/],
    'header is a string': ['inputs', /^the request header must be a JSON object$/],
    'header is null': [null, /^the request header must be a JSON object$/],
    'inputs missing': [{}, /^the request needs an "inputs" array$/],
    'inputs not an array': [{ inputs: {} }, /^the request needs an "inputs" array$/],
    'input without a name': [
      { inputs: [{ datatype: 'FP32', shape: [1], data: [1] }] },
      /^inputs\[0\] must be an object with a "name"$/,
    ],
    'input with an empty name': [
      { inputs: [{ name: '', datatype: 'FP32', shape: [1], data: [1] }] },
      /^inputs\[0\] must be an object with a "name"$/,
    ],
    'input not an object': [{ inputs: [one('FP32', [1]).inputs[0], 'x'] }, /^inputs\[1\] must be an object/],
    'unknown datatype': [
      one('FLOAT32', [1]),
      new RegExp(`^input "x": datatype "FLOAT32" is not one of ${DATATYPES.join(', ')}$`),
    ],
    'negative dimension': [fp32([1], [-1]), /^input "x": shape \[-1\] must be an array of non-negative integers$/],
    'fractional dimension': [fp32([1], [0.5]), /^input "x": shape \[0\.5\] must be/],
    'shape not an array': [fp32([1], 3), /^input "x": shape 3 must be/],
    'a shape past 2^53 elements': [
      fp32([1], [2 ** 30, 2 ** 30]),
      /^input "x": shape \[1073741824, 1073741824\] is too large$/,
    ],
    'too few elements': [fp32([1, 2, 3, 4, 5]), /^input "x": shape \[2, 3\] needs 6 elements, got 5$/],
    'too many elements': [fp32([[1, 2, 3], [4, 5, 6], [7]]), /^input "x": shape \[2, 3\] needs 6 elements, got 7$/], // prettier-ignore
    'a huge shape with little data': [fp32([1], [1e9, 1e6]), /needs 1000000000000000 elements, got 1$/],
    'data not an array': [fp32(5, []), /^input "x": data must be an array$/],
    'data missing': [
      { inputs: [{ name: 'x', datatype: 'FP32', shape: [1] }] },
      /^input "x": needs "data" or parameters\.binary_data_size$/,
    ],
    'duplicate input names': [
      { inputs: [one('FP32', [1]).inputs[0], one('FP32', [2]).inputs[0]] },
      /^input "x" is given twice$/,
    ],
    'a string for FP32': [one('FP32', ['abc']), /^input "x": element 0 is "abc", FP32 needs a number/],
    'null for FP32': [one('FP32', [null]), /^input "x": element 0 is null, FP32 needs a number/],
    '300 for INT8': [one('INT8', [300]), /^input "x": element 0 is 300, INT8 needs an integer in \[-128, 127\]$/],
    '1.5 for INT32': [one('INT32', [1.5]), /element 0 is 1\.5, INT32 needs an integer/],
    '-1 for UINT8': [one('UINT8', [-1]), /element 0 is -1, UINT8 needs an integer in \[0, 255\]$/],
    '2 for BOOL': [one('BOOL', [2]), /^input "x": element 0 is 2, BOOL needs true, false, 0 or 1$/],
    'a number for BYTES': [one('BYTES', [5]), /^input "x": element 0 is 5, BYTES needs a string$/],
    'not a number string for INT64': [one('INT64', ['12a']), /element 0 is "12a", INT64 needs an integer/],
    '2^63 for INT64': [one('INT64', ['9223372036854775808']), /needs an integer in \[-9223372036854775808, /],
    '-1 for UINT64': [one('UINT64', [-1]), /needs an integer in \[0, 18446744073709551615\]/],
    'id not a string': [{ id: 42, inputs: [] }, /^"id" must be a string$/],
    'parameters an array': [{ parameters: [], inputs: [] }, /^request "parameters" must be an object$/],
    'parameters a string': [{ parameters: 'abc', inputs: [] }, /^request "parameters" must be an object$/],
    'parameters null': [{ parameters: null, inputs: [] }, /^request "parameters" must be an object$/],
    'binary_data_output not a boolean': [
      { parameters: { binary_data_output: 'yes' }, inputs: [] },
      /^parameters\.binary_data_output must be true or false$/,
    ],
    'input parameters not an object': [withParameters(7), /^input "x": "parameters" must be an object$/],
    'outputs not an array': [{ inputs: [], outputs: {} }, /^"outputs" must be an array$/],
    'output without a name': [{ inputs: [], outputs: [{}] }, /^outputs\[0\] must be an object with a "name"$/],
    'output with an empty name': [
      { inputs: [], outputs: [{ name: 'y' }, { name: '' }] },
      /^outputs\[1\] must be an object with a "name"$/,
    ],
    'duplicate outputs': [{ inputs: [], outputs: [{ name: 'y' }, { name: 'y' }] }, /^output "y" is requested twice$/],
    'output parameters not an object': [
      { inputs: [], outputs: [{ name: 'y', parameters: [] }] },
      /^output "y": "parameters" must be an object$/,
    ],
    'classification 0': [
      { inputs: [], outputs: [{ name: 'y', parameters: { classification: 0 } }] },
      /^output "y": classification must be a positive integer$/,
    ],
    'classification 1.5': [
      { inputs: [], outputs: [{ name: 'y', parameters: { classification: 1.5 } }] },
      /classification must be a positive integer/,
    ],
    'binary_data not a boolean': [
      { inputs: [], outputs: [{ name: 'y', parameters: { binary_data: 1 } }] },
      /^output "y": binary_data must be true or false$/,
    ],
    'binary_data_size with data': [
      { inputs: [{ name: 'x', datatype: 'FP32', shape: [1], data: [1], parameters: { binary_data_size: 4 } }] },
      /^input "x": has both "data" and parameters\.binary_data_size$/,
    ],
    'binary_data_size negative': [
      withParameters({ binary_data_size: -4 }),
      /^input "x": binary_data_size must be a non-negative integer$/,
    ],
    'binary_data_size fractional': [
      withParameters({ binary_data_size: 1.5 }),
      /binary_data_size must be a non-negative/,
    ],
    'binary_data_size a string': [withParameters({ binary_data_size: '4' }), /binary_data_size must be a non-negative/],
    'binary_data_size without binary data': [
      withParameters({ binary_data_size: 4 }),
      /^input "x": binary_data_size 4 runs past the end of the body \(0 bytes left\)$/,
    ],
  };
  for (const [label, [header, message]] of Object.entries(jsonCases)) {
    assertInputError(() => decodeInferRequest(jsonBody(header), undefined, []), label, message);
  }
  assert.throws(
    () => decodeInferRequest(Buffer.from('{"inputs": ['), undefined, []),
    (error: BatchserveError) => {
      assert.equal(error.code, 'BS_ERR_INFERENCE_INPUT');
      assert.match(error.message, /^the request header is not JSON: /);
      assert.ok(error.cause instanceof SyntaxError, 'the JSON error is kept as the cause');
      return true;
    },
  );

  const binary = (name: string, datatype: string, shape: number[], size: number) => ({
    name,
    datatype,
    shape,
    parameters: { binary_data_size: size },
  });
  const binaryCases: Record<string, [Json[], Uint8Array[], RegExp]> = {
    'sizes run past the body': [
      [binary('x', 'FP32', [1], 4), binary('y', 'FP32', [2], 8)],
      [new Uint8Array(4), new Uint8Array(6)],
      /^input "y": binary_data_size 8 runs past the end of the body \(6 bytes left\)$/,
    ],
    'bytes left after the inputs': [
      [binary('x', 'FP32', [1], 4)],
      [new Uint8Array(8)],
      /^the body has 4 bytes after the header and the inputs' binary_data_size$/,
    ],
    'byte count not elements × size': [
      [binary('x', 'FP32', [2], 7)],
      [new Uint8Array(7)],
      /^input "x": shape \[2\] of FP32 needs 8 bytes, got 7$/,
    ],
    'INT64 short by a byte': [
      [binary('x', 'INT64', [1, 3], 23)],
      [new Uint8Array(23)],
      /^input "x": shape \[1, 3\] of INT64 needs 24 bytes, got 23$/,
    ],
    'BYTES length prefix cut off': [
      [binary('x', 'BYTES', [2], 6)],
      [bytesElements(['ab']).subarray(0, 6)],
      /^input "x": BYTES data ends at element 1 of 2$/,
    ],
    'BYTES element longer than the data': [
      [binary('x', 'BYTES', [1], 5), binary('y', 'FP32', [1], 4)],
      [bytesElements(['abc']).subarray(0, 5), new Uint8Array(4)],
      /^input "x": BYTES element 0 declares 3 bytes, only 1 remain$/,
    ],
    'BYTES bytes left over': [
      [binary('x', 'BYTES', [1], 9)],
      [bytesElements(['a', 'b']).subarray(0, 9)],
      /^input "x": 4 bytes left over after 1 BYTES elements$/,
    ],
  };
  for (const [label, [inputs, parts, message]] of Object.entries(binaryCases)) {
    const { body, headerLength } = binaryBody({ inputs }, parts);
    assertInputError(() => decodeInferRequest(body, headerLength, []), label, message);
  }
  assertInputError(
    () => decodeInferRequest(Buffer.alloc(0), undefined, []),
    'empty body',
    /^the request header is not JSON: /,
  );
  const small = jsonBody({ inputs: [] });
  for (const length of [1000, 1.5, -1, small.length + 1]) {
    assertInputError(
      () => decodeInferRequest(small, length, []),
      `header length ${length}`,
      new RegExp(`^Inference-Header-Content-Length ${length} does not fit a body of ${small.length} bytes$`),
    );
  }

  const raw = (shape: number[], datatype: Datatype = 'FP32'): TensorSpec[] => [{ name: 'x', datatype, shape }];
  const rawCases: Record<string, [Buffer, TensorSpec[], RegExp]> = {
    'two model inputs': [
      Buffer.alloc(8),
      [...raw([-1]), { name: 'y', datatype: 'FP32', shape: [-1] }],
      /needs a model with one input, this one has 2$/,
    ],
    'no model inputs': [Buffer.alloc(8), [], /needs a model with one input, this one has 0$/],
    'a variable dimension after the batch': [
      Buffer.alloc(8),
      raw([-1, -1]),
      /^input "x": a raw binary request needs every dimension but the first fixed, the model's shape is \[-1, -1\]$/,
    ],
    'not a whole number of rows': [
      Buffer.alloc(10),
      raw([-1, 2]),
      /^input "x": 10 bytes are not a whole number of 8-byte rows of \[-1, 2\] FP32$/,
    ],
    'an empty body': [Buffer.alloc(0), raw([-1, 2]), /^input "x": 0 bytes are not a whole number/],
    'wrong size for a fixed shape': [
      Buffer.alloc(12),
      raw([2, 2]),
      /^input "x": shape \[2, 2\] of FP32 needs 16 bytes, got 12$/,
    ],
    'a whole number of rows but not the fixed shape': [
      Buffer.alloc(32),
      raw([2, 2]),
      /^input "x": shape \[2, 2\] of FP32 needs 16 bytes, got 32$/,
    ],
    'BYTES input holding more than one element': [
      Buffer.from('abc'),
      raw([-1, 2], 'BYTES'),
      /^input "x": a raw BYTES request is one element, the model's shape \[-1, 2\] holds more$/,
    ],
  };
  for (const [label, [body, model, message]] of Object.entries(rawCases)) {
    assertInputError(() => decodeInferRequest(body, 0, model), label, message);
  }
});

test('the smallest valid values are accepted: classification 1, binary_data_size 0, an empty shape', () => {
  const decoded = decodeInferRequest(
    jsonBody({
      inputs: [
        { name: 'e', datatype: 'FP32', shape: [0, 3], parameters: { binary_data_size: 0 } },
        { name: 's', datatype: 'INT8', shape: [], data: [-3] },
      ],
      outputs: [{ name: 'y', parameters: { classification: 1, binary_data: true } }],
    }),
    undefined,
    [],
  );
  assert.deepEqual(decoded.outputs, [{ name: 'y', binary: true, classification: 1 }]);
  assertSameTensor(decoded.inputs.e, tensorOf('float32', new Float32Array(0), [0, 3]));
  assertSameTensor(decoded.inputs.s, tensorOf('int8', Int8Array.of(-3), []));
  // A request without id or outputs has no such keys at all, not keys holding undefined.
  assert.deepEqual(Object.keys(decodeInferRequest(jsonBody({ inputs: [] }), undefined, [])).sort(), [
    'binaryDataOutput',
    'inputs',
    'parameters',
  ]);
});

// --- responses -------------------------------------------------------------------------

test('a JSON response carries every field and spells special values as documented', () => {
  const encoded = encodeInferResponse({
    model_name: 'm',
    model_version: '3',
    id: 'req-1',
    parameters: { sequence_id: 7 },
    outputs: [
      { name: 'f', tensor: tensorOf('float32', Float32Array.of(NaN, Infinity, -1.5, -0), [2, 2]), binary: false },
      { name: 'i', tensor: tensorOf('int64', BigInt64Array.of(1n, 2n ** 60n), [2]), binary: false },
      { name: 'b', tensor: tensorOf('bool', Uint8Array.of(1, 0), [2]), binary: false },
      { name: 'h', tensor: tensorOf('float16', Uint16Array.of(0x3c00, 0xfc00), [2]), binary: false },
    ],
  });
  assert.equal(encoded.contentType, 'application/json');
  assert.equal(encoded.headerLength, undefined);
  assert.deepEqual(JSON.parse(encoded.body.toString()), {
    model_name: 'm',
    model_version: '3',
    id: 'req-1',
    parameters: { sequence_id: 7 },
    outputs: [
      { name: 'f', datatype: 'FP32', shape: [2, 2], data: ['NaN', 'Infinity', -1.5, 0] },
      { name: 'i', datatype: 'INT64', shape: [2], data: [1, '1152921504606846976'] },
      { name: 'b', datatype: 'BOOL', shape: [2], data: [true, false] },
      { name: 'h', datatype: 'FP16', shape: [2], data: [1, '-Infinity'] },
    ],
  });
});

test('a binary response puts the raw bytes after the header, in output order', () => {
  const scores = Float32Array.of(0.25, -1, 8);
  const encoded = encodeInferResponse({
    model_name: 'm',
    outputs: [
      { name: 'scores', tensor: tensorOf('float32', scores, [1, 3]), binary: true },
      { name: 'ids', tensor: tensorOf('int32', Int32Array.of(4, 5), [2]), binary: false },
      { name: 'names', tensor: tensorOf('string', ['ab', 'ç'], [2]), binary: true },
    ],
  });
  assert.equal(encoded.contentType, 'application/octet-stream');
  const headerLength = encoded.headerLength as number;
  assert.deepEqual(JSON.parse(encoded.body.toString('utf8', 0, headerLength)), {
    model_name: 'm',
    outputs: [
      { name: 'scores', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } },
      { name: 'ids', datatype: 'INT32', shape: [2], data: [4, 5] },
      { name: 'names', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: 12 } },
    ],
  });
  assert.deepEqual(encoded.body.subarray(headerLength), Buffer.concat([bytesOf(scores), bytesElements(['ab', 'ç'])]));
});

test('every datatype survives encode → parse, as JSON and as binary', () => {
  const examples: Record<Datatype, unknown[]> = {
    BOOL: [1, 0, 1],
    UINT8: [0, 128, 255],
    UINT16: [0, 1, 65535],
    UINT32: [0, 2 ** 31, 2 ** 32 - 1],
    UINT64: [0n, 2n ** 53n + 1n, 2n ** 64n - 1n],
    INT8: [-128, 0, 127],
    INT16: [-32768, -1, 32767],
    INT32: [-(2 ** 31), 0, 2 ** 31 - 1],
    INT64: [-(2n ** 63n), -(2n ** 53n - 1n), 2n ** 63n - 1n],
    FP16: [0x0001, 0x3555, 0xfbff],
    FP32: [Math.fround(0.1), 3.4028234663852886e38, NaN],
    FP64: [Number.MIN_VALUE, -Infinity, 0.1 + 0.2],
    BYTES: ['', 'plain', '日本語 ✓'],
  };
  for (const datatype of DATATYPES) {
    const tensor = makeTensor(datatype, examples[datatype], [3]);
    for (const binary of [false, true]) {
      const { tensors } = parseResponse(
        encodeInferResponse({ model_name: 'm', outputs: [{ name: 'y', tensor, binary }] }),
      );
      assertSameTensor(tensors.y, tensor);
    }
  }
});

test('property: response encode → parse is identity (JSON modulo -0 and FP16 NaN payloads)', () => {
  fc.assert(
    fc.property(outputsArbitrary, fc.option(fc.string()), (outputs, id) => {
      const encoded = encodeInferResponse({ model_name: 'model', ...(id === null ? {} : { id }), outputs });
      const { header, tensors } = parseResponse(encoded);
      assert.equal(header.model_name, 'model');
      assert.equal(header.id, id ?? undefined);
      assert.equal(encoded.headerLength === undefined, !outputs.some((output) => output.binary));
      assert.deepEqual(
        (header.outputs as Json[]).map((output) => output.name),
        outputs.map((output) => output.name),
      );
      for (const output of outputs) {
        assertSameTensor(tensors[output.name], output.binary ? output.tensor : jsonNormalized(output.tensor));
      }
    }),
    { numRuns: 300 },
  );
});

// --- classification --------------------------------------------------------------------

const classifyOne = (output: Omit<ResponseOutput, 'name'>): Tensor | undefined =>
  parseResponse(encodeInferResponse({ model_name: 'm', outputs: [{ name: 'y', ...output }] })).tensors.y;

test('classification returns the top k per row as "value:index", with ":label" when labels are given', () => {
  const scores = tensorOf('float32', Float32Array.of(1.1, 3.3, 0.5, 2.4, 0, -1, 7, 0.25), [2, 4]);
  assertSameTensor(
    classifyOne({ tensor: scores, binary: false, classification: 2 }),
    tensorOf('string', ['3.300000:1', '2.400000:3', '7.000000:2', '0.250000:3'], [2, 2]),
  );
  assertSameTensor(
    classifyOne({ tensor: scores, binary: true, classification: 1, labels: ['cat', 'dog', 'fish', 'bird'] }),
    tensorOf('string', ['3.300000:1:dog', '7.000000:2:fish'], [2, 1]),
  );
});

test('classification: integer values print exactly, ties keep index order, NaN last, k capped, rank 1 gives [k]', () => {
  assertSameTensor(
    classifyOne({ tensor: tensorOf('int32', Int32Array.of(5, 9, 9, 1), [4]), binary: false, classification: 3 }),
    tensorOf('string', ['9:1', '9:2', '5:0'], [3]),
  );
  assertSameTensor(
    classifyOne({
      tensor: tensorOf('float64', Float64Array.of(NaN, -Infinity, 0.5), [1, 3]),
      binary: false,
      classification: 10,
      labels: ['a'],
    }),
    tensorOf('string', ['0.500000:2', '-Infinity:1', 'NaN:0:a'], [1, 3]),
  );
  assertSameTensor(
    classifyOne({
      tensor: tensorOf('int64', BigInt64Array.of(2n ** 62n, 3n), [1, 2]),
      binary: false,
      classification: 1,
    }),
    tensorOf('string', ['4611686018427387904:0'], [1, 1]),
  );
  assertInputError(
    () => classifyOne({ tensor: tensorOf('bool', Uint8Array.of(1), [1]), binary: false, classification: 1 }),
    'BOOL output',
  );
});

test('property: classification of many classes matches a full sort', () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: -50, max: 50 }), { minLength: 1, maxLength: 300 }),
      fc.integer({ min: 1, max: 40 }),
      (values, k) => {
        const expected = values
          .map((value, index) => ({ value, index }))
          .sort((a, b) => b.value - a.value || a.index - b.index)
          .slice(0, k)
          .map(({ value, index }) => `${value}:${index}`);
        const tensor = tensorOf('int16', Int16Array.from(values), [1, values.length]);
        assert.deepEqual(dataOf(classifyOne({ tensor, binary: false, classification: k })), expected);
      },
    ),
  );
});

// --- half precision ----------------------------------------------------------------------

test('FP16: every half survives half → float → half, and exact midpoints round to even', () => {
  for (let bits = 0; bits <= 0xffff; bits++) {
    const value = halfToFloat(bits);
    assert.equal(floatToHalf(value), Number.isNaN(value) ? 0x7e00 : bits);
  }
  for (let bits = 0; bits < 0x7bff; bits++) {
    const low = halfToFloat(bits);
    const midpoint = (low + halfToFloat(bits + 1)) / 2;
    assert.equal(floatToHalf(midpoint), bits % 2 === 0 ? bits : bits + 1);
    assert.equal(floatToHalf(midpoint * (1 + 2 ** -40)), bits + 1);
    assert.equal(floatToHalf(midpoint * (1 - 2 ** -40)), bits);
  }
  const cases: [number, number][] = [
    [1, 0x3c00],
    [-2, 0xc000],
    [0.1, 0x2e66],
    [1 / 3, 0x3555],
    [-0, 0x8000],
    [65504, 0x7bff],
    [65519.99, 0x7bff],
    [65520, 0x7c00],
    [1e10, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -25, 0x0000],
    [1e-10, 0x0000],
    [2 ** -24, 0x0001],
  ];
  for (const [value, bits] of cases) assert.equal(floatToHalf(value), bits, `${value}`);
});

test('data nested deeper than the shape is refused as a 400 without recursion the request drives', () => {
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 2] };
  const deep = `${'['.repeat(50_000)}1${']'.repeat(50_000)}`;
  for (const datatype of ['FP32', 'FP16', 'INT32', 'INT64', 'BOOL', 'BYTES'] as const) {
    const first = datatype === 'BYTES' ? '"a"' : '1';
    const body = Buffer.from(
      `{"inputs":[{"name":"x","datatype":"${datatype}","shape":[1,2],"data":[${first},${deep}]}]}`,
    );
    assert.throws(
      () => decodeInferRequest(body, undefined, [{ ...spec, datatype }]),
      { code: 'BS_ERR_INFERENCE_INPUT', message: /nested deeper than its shape \[1, 2\]/ },
      datatype,
    );
  }
  // One level per axis is fine, flat is fine, one level more is not.
  const header = (data: string): Buffer =>
    Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":${data}}]}`);
  assert.deepEqual(
    Array.from(decodeInferRequest(header('[[1,2]]'), undefined, [spec]).inputs.x?.data as Float32Array),
    [1, 2],
  );
  assert.deepEqual(
    Array.from(decodeInferRequest(header('[1,2]'), undefined, [spec]).inputs.x?.data as Float32Array),
    [1, 2],
  );
  assert.throws(() => decodeInferRequest(header('[[[1,2]]]'), undefined, [spec]), { code: 'BS_ERR_INFERENCE_INPUT' });
  // The element count walk on an oversized shape is bounded the same way.
  const huge = Buffer.from(`{"inputs":[{"name":"x","datatype":"FP32","shape":[1000000,2],"data":[${deep}]}]}`);
  assert.throws(() => decodeInferRequest(huge, undefined, [spec]), { code: 'BS_ERR_INFERENCE_INPUT' });
});

test('deep nesting elsewhere in a body with a lifted data array is read, not a stack overflow', () => {
  const spec: TensorSpec = { name: 'x', datatype: 'FP32', shape: [-1, 400] };
  const row = Array.from({ length: 400 }, (_, i) => i / 8);
  const deepParameter = `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
  const body = Buffer.from(
    `{"parameters":{"deep":${deepParameter}},"inputs":[{"name":"x","datatype":"FP32","shape":[1,400],"data":${JSON.stringify(row)}}]}`,
  );
  const decoded = decodeInferRequest(body, undefined, [spec]);
  assert.deepEqual(Array.from(decoded.inputs.x?.data as Float32Array), row);
});
