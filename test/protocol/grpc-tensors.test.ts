import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { MethodDefinition } from '@grpc/grpc-js';
import fc from 'fast-check';
import type { Tensor } from '../../src/core/tensors.js';
import { tensorOf } from '../fixtures/tensors.js';
import { DATATYPES, ortTypeOf, type Datatype } from '../../src/core/datatypes.js';
import { binaryTensorBytes, floatToHalf, halfToFloat, readBinaryTensor } from '../../src/protocol/binary-tensor.js';
import { classify } from '../../src/protocol/classification.js';
import { inferenceProtocol, toSafeNumber } from '../../src/protocol/grpc-messages.js';
import {
  decodeGrpcInferRequest,
  encodeGrpcInferResponse,
  type ModelInferRequestMessage,
} from '../../src/protocol/grpc-tensors.js';
import { prepareDecoded, type ModelSignature } from '../../src/protocol/prepared-request.js';
import { decodeInferRequest, type ResponseOutput } from '../../src/protocol/v2-codec.js';

// --- helpers ------------------------------------------------------------------------------------

const ModelInfer = inferenceProtocol().service.ModelInfer as MethodDefinition<object, object>;

/** A request as a client sends it, decoded as the server receives it. */
function received(request: object): ModelInferRequestMessage {
  return ModelInfer.requestDeserialize(ModelInfer.requestSerialize(request));
}

const decodeReceived = (request: object) => decodeGrpcInferRequest(received(request));

type Value = boolean | number | bigint | string;

/** Each datatype's typed contents field (grpc_service.proto, InferTensorContents). */
const FIELD_OF: Record<Exclude<Datatype, 'FP16'>, string> = {
  BOOL: 'bool_contents',
  UINT8: 'uint_contents',
  UINT16: 'uint_contents',
  UINT32: 'uint_contents',
  UINT64: 'uint64_contents',
  INT8: 'int_contents',
  INT16: 'int_contents',
  INT32: 'int_contents',
  INT64: 'int64_contents',
  FP32: 'fp32_contents',
  FP64: 'fp64_contents',
  BYTES: 'bytes_contents',
};
const TYPED_DATATYPES = DATATYPES.filter((datatype): datatype is Exclude<Datatype, 'FP16'> => datatype !== 'FP16');

/** Four elements of each datatype, its extremes among them. */
const SAMPLES: Record<Datatype, readonly Value[]> = {
  BOOL: [true, false, false, true],
  UINT8: [0, 255, 7, 128],
  UINT16: [0, 65535, 1, 300],
  UINT32: [0, 4294967295, 1, 65536],
  UINT64: [0n, 2n ** 64n - 1n, 2n ** 53n + 1n, 5n],
  INT8: [-128, 127, 0, -1],
  INT16: [-32768, 32767, 0, -1],
  INT32: [-2147483648, 2147483647, 0, -1],
  INT64: [-(2n ** 63n), 2n ** 63n - 1n, 2n ** 53n + 1n, -(2n ** 53n) - 1n],
  FP16: [1.5, -0, 65504, Infinity],
  FP32: [1.5, -0, 3.4028234663852886e38, NaN],
  FP64: [Math.PI, -0, Number.MAX_VALUE, -Infinity],
  BYTES: ['', 'héllo', '日本語', '🙂'],
};

const ARRAY_OF = {
  UINT8: Uint8Array,
  UINT16: Uint16Array,
  UINT32: Uint32Array,
  UINT64: BigUint64Array,
  INT8: Int8Array,
  INT16: Int16Array,
  INT32: Int32Array,
  INT64: BigInt64Array,
  FP32: Float32Array,
  FP64: Float64Array,
} as const;

function makeTensor(datatype: Datatype, values: readonly Value[], dims: readonly number[]): Tensor {
  if (datatype === 'BYTES') return tensorOf('string', values as string[], dims);
  if (datatype === 'BOOL') return tensorOf('bool', Uint8Array.from(values as boolean[], Number), dims);
  if (datatype === 'FP16') return tensorOf('float16', Uint16Array.from(values as number[], floatToHalf), dims);
  const TypedArray = ARRAY_OF[datatype] as unknown as { from(values: readonly Value[]): Float32Array };
  return tensorOf(ortTypeOf(datatype), TypedArray.from(values), dims);
}

/** The typed contents a client sends: 64-bit integers as decimal strings, BYTES as bytes. */
function contentsOf(datatype: Exclude<Datatype, 'FP16'>, values: readonly Value[]): Record<string, unknown[]> {
  const wire = values.map((value) =>
    typeof value === 'bigint' ? value.toString() : typeof value === 'string' ? Buffer.from(value) : value,
  );
  return { [FIELD_OF[datatype]]: wire };
}

/** Same type, dims and elements, bit for bit (NaN and -0 included). */
function assertSameTensor(actual: Tensor | undefined, expected: Tensor): void {
  assert.ok(actual);
  assert.equal(ortTypeOf(actual.datatype), ortTypeOf(expected.datatype));
  assert.deepEqual(actual.dims, expected.dims);
  if (ortTypeOf(expected.datatype) === 'string') assert.deepEqual(actual.data, expected.data);
  else assert.deepEqual(Buffer.from(binaryTensorBytes(actual)), Buffer.from(binaryTensorBytes(expected)));
}

const refused = (message: RegExp) => ({ name: 'InferenceInputError', code: 'BS_ERR_INFERENCE_INPUT', message });

// --- tensors ----------------------------------------------------------------------------------

test('every datatype round-trips through the protobuf codec raw, and typed where it has a field', () => {
  const dims = [2, 2];
  const raw = decodeReceived({
    inputs: DATATYPES.map((datatype) => ({ name: datatype, datatype, shape: dims })),
    raw_input_contents: DATATYPES.map((datatype) => binaryTensorBytes(makeTensor(datatype, SAMPLES[datatype], dims))),
  });
  const typed = decodeReceived({
    inputs: TYPED_DATATYPES.map((datatype) => ({
      name: datatype,
      datatype,
      shape: dims,
      contents: contentsOf(datatype, SAMPLES[datatype]),
    })),
  });
  assert.deepEqual(Object.keys(raw.inputs), DATATYPES);
  assert.deepEqual(Object.keys(typed.inputs), TYPED_DATATYPES);
  for (const datatype of DATATYPES) {
    const expected = makeTensor(datatype, SAMPLES[datatype], dims);
    assertSameTensor(raw.inputs[datatype], expected);
    if (datatype !== 'FP16') assertSameTensor(typed.inputs[datatype], expected);
  }
});

test('64-bit integers beyond 2^53 stay exact, typed and raw', () => {
  const int64 = [-(2n ** 63n), 2n ** 53n + 1n, -(2n ** 53n) - 3n, 2n ** 63n - 1n];
  const uint64 = [2n ** 64n - 1n, 2n ** 53n + 1n, 2n ** 63n, 0n];
  const inputs = [
    { name: 'i', datatype: 'INT64', shape: [4] },
    { name: 'u', datatype: 'UINT64', shape: [4] },
  ];
  const typed = decodeReceived({
    inputs: [
      { ...inputs[0], contents: contentsOf('INT64', int64) },
      { ...inputs[1], contents: contentsOf('UINT64', uint64) },
    ],
  });
  const raw = decodeReceived({
    inputs,
    raw_input_contents: [
      binaryTensorBytes(makeTensor('INT64', int64, [4])),
      binaryTensorBytes(makeTensor('UINT64', uint64, [4])),
    ],
  });
  for (const decoded of [typed, raw]) {
    assert.ok(decoded.inputs.i?.data instanceof BigInt64Array);
    assert.ok(decoded.inputs.u?.data instanceof BigUint64Array);
    assert.deepEqual([...decoded.inputs.i.data], int64);
    assert.deepEqual([...decoded.inputs.u.data], uint64);
  }
});

test('BYTES: empty and multi-byte UTF-8 strings, typed and raw (4-byte little-endian lengths)', () => {
  const strings = ['', 'a', 'héllo wörld', '日本語', '🙂🙃', '', 'nul\u0000inside'];
  const dims = [strings.length];
  const typed = decodeReceived({
    inputs: [{ name: 's', datatype: 'BYTES', shape: dims, contents: contentsOf('BYTES', strings) }],
  });
  const raw = decodeReceived({
    inputs: [{ name: 's', datatype: 'BYTES', shape: dims }],
    raw_input_contents: [binaryTensorBytes(makeTensor('BYTES', strings, dims))],
  });
  assert.deepEqual(typed.inputs.s?.data, strings);
  assert.deepEqual(raw.inputs.s?.data, strings);
});

test('shapes: int64 dimensions become numbers; a scalar and a zero-element tensor are fine', () => {
  const decoded = decodeReceived({
    inputs: [
      { name: 'scalar', datatype: 'FP32', shape: [], contents: { fp32_contents: [2.5] } },
      { name: 'empty', datatype: 'INT32', shape: [0, 3], contents: {} },
    ],
  });
  assertSameTensor(decoded.inputs.scalar, makeTensor('FP32', [2.5], []));
  assertSameTensor(decoded.inputs.empty, makeTensor('INT32', [], [0, 3]));
});

test('raw numeric data is a view of the received message where aligned for its type, a copy where not', () => {
  // The demo model's input: [1, 3, 48, 192] FP32, 110,592 bytes; and an 8-byte type.
  const cases: [Datatype, number[], Value[]][] = [
    ['FP32', [1, 3, 48, 192], Array.from({ length: 3 * 48 * 192 }, (_, i) => i / 7)],
    ['INT64', [5], [1n, -2n, 2n ** 62n, 3n, 2n ** 53n + 1n]],
  ];
  for (const [datatype, dims, values] of cases) {
    const expected = makeTensor(datatype, values, dims);
    const size = (expected.data as Float32Array).BYTES_PER_ELEMENT;
    const bytes = ModelInfer.requestSerialize({
      model_name: 'm',
      inputs: [{ name: 'x', datatype, shape: dims }],
      raw_input_contents: [binaryTensorBytes(expected)],
    });
    const alignments = new Set<boolean>();
    for (let shift = 0; shift < size; shift++) {
      // The message `shift` bytes into a buffer of its own, as a socket read may leave it.
      const whole = Buffer.alloc(shift + bytes.length);
      bytes.copy(whole, shift);
      const message = ModelInfer.requestDeserialize(whole.subarray(shift)) as ModelInferRequestMessage;
      const raw = message.raw_input_contents?.[0];
      assert.equal(raw?.buffer, whole.buffer, 'protobufjs keeps bytes fields as views');
      const data = decodeGrpcInferRequest(message).inputs.x?.data as Float32Array;
      const aligned = raw.byteOffset % size === 0;
      alignments.add(aligned);
      if (aligned) {
        assert.equal(data.buffer, whole.buffer, `${datatype} at shift ${shift}: a view`);
        assert.equal(data.byteOffset, raw.byteOffset);
      } else {
        assert.notEqual(data.buffer, whole.buffer, `${datatype} at shift ${shift}: a copy`);
      }
      assert.deepEqual(
        Buffer.from(data.buffer, data.byteOffset, data.byteLength),
        Buffer.from(binaryTensorBytes(expected)),
      );
    }
    assert.deepEqual([...alignments].sort(), [false, true], `${datatype}: both an aligned and an unaligned offset`);
  }
});

// --- refusals -----------------------------------------------------------------------------------

test('raw_input_contents: all inputs or none, one entry per input', () => {
  const four = Buffer.alloc(4);
  const x = { name: 'x', datatype: 'FP32', shape: [1] };
  const y = { name: 'y', datatype: 'FP32', shape: [1] };
  // Some inputs raw, one typed: Triton's "contents field must not be specified when using raw_input_contents".
  assert.throws(
    () => decodeReceived({ inputs: [x, { ...y, contents: { fp32_contents: [1] } }], raw_input_contents: [four] }),
    refused(/^input "y": contents must not be given when raw_input_contents is used$/),
  );
  assert.throws(
    () => decodeReceived({ inputs: [x, y], raw_input_contents: [four] }),
    refused(/^expected 2 raw_input_contents \(one per input, in input order\), got 1$/),
  );
  assert.throws(
    () => decodeReceived({ inputs: [x], raw_input_contents: [four, four] }),
    refused(/^expected 1 raw_input_contents .*, got 2$/),
  );
  // Neither: Triton's "unable to find data for input tensor".
  assert.throws(
    () => decodeReceived({ inputs: [x] }),
    refused(/^input "x": no data in contents or raw_input_contents$/),
  );
});

test("typed contents: only the datatype's own field, exactly as many elements as the shape holds", () => {
  const input = (datatype: string, contents: object, shape = [2]) => ({
    inputs: [{ name: 'x', datatype, shape, contents }],
  });
  const cases: [object, RegExp][] = [
    [input('FP32', { int_contents: [1, 2] }), /^input "x": FP32 data goes in fp32_contents, got int_contents$/],
    [input('INT64', { int_contents: [1, 2] }), /^input "x": INT64 data goes in int64_contents, got int_contents$/],
    [input('UINT8', { int_contents: [1, 2] }), /UINT8 data goes in uint_contents, got int_contents/],
    [input('BYTES', { fp32_contents: [1, 2] }), /BYTES data goes in bytes_contents, got fp32_contents/],
    // Data in two fields: one of them is not the datatype's.
    [
      input('FP32', { fp32_contents: [1, 2], fp64_contents: [1, 2] }),
      /FP32 data goes in fp32_contents, got fp64_contents/,
    ],
    [
      input('FP16', { fp32_contents: [1, 2] }),
      /^input "x": FP16 has no typed contents field, send it in raw_input_contents$/,
    ],
    [input('FP16', { uint_contents: [15360, 15360] }), /FP16 has no typed contents field/],
    [
      input('FP32', { fp32_contents: [1, 2, 3] }, [2, 2]),
      /^input "x": shape \[2, 2\] needs 4 elements, fp32_contents has 3$/,
    ],
    [input('BOOL', {}, [1]), /^input "x": shape \[1\] needs 1 elements, bool_contents has 0$/],
    // Triton keeps the low bytes of an 8- or 16-bit value; we refuse it, as a JSON request does.
    [input('INT8', { int_contents: [1, 200] }), /^input "x": element 1 is 200, INT8 needs \[-128, 127\]$/],
    [input('UINT16', { uint_contents: [70000, 1] }), /^input "x": element 0 is 70000, UINT16 needs \[0, 65535\]$/],
  ];
  for (const [request, message] of cases) assert.throws(() => decodeReceived(request), refused(message));
});

test('raw contents: the byte size the shape and datatype need; BYTES well formed', () => {
  const raw = (datatype: string, shape: number[], bytes: Buffer) => ({
    inputs: [{ name: 'x', datatype, shape }],
    raw_input_contents: [bytes],
  });
  const cases: [object, RegExp][] = [
    [raw('FP32', [2], Buffer.alloc(4)), /^input "x": shape \[2\] of FP32 needs 8 bytes, got 4$/],
    [raw('FP16', [3], Buffer.alloc(8)), /needs 6 bytes, got 8/],
    [raw('BYTES', [1000], Buffer.alloc(8)), /^input "x": shape \[1000\] of BYTES needs at least 4000 bytes, got 8$/],
    [raw('BYTES', [1], Buffer.from([9, 0, 0, 0, 97])), /BYTES element 0 declares 9 bytes, only 1 remain/],
    [raw('BYTES', [1], Buffer.from([1, 0, 0, 0, 97, 98])), /1 bytes left over after 1 BYTES elements/],
  ];
  for (const [request, message] of cases) assert.throws(() => decodeReceived(request), refused(message));
});

test('datatypes, names and shapes are checked', () => {
  const one = (input: object) => ({ inputs: [input], raw_input_contents: [Buffer.alloc(8)] });
  const cases: [object, RegExp][] = [
    [one({ name: 'x', datatype: 'FLOAT', shape: [2] }), /^input "x": datatype "FLOAT" is not one of BOOL, .*, BYTES$/],
    [
      one({ name: 'x', datatype: 'BF16', shape: [4] }),
      /datatype "BF16" is not one of .*: onnxruntime-node has no bfloat16 tensors$/,
    ],
    [one({ name: 'x', datatype: '', shape: [2] }), /datatype "" is not one of/],
    [
      one({ name: 'x', datatype: 'FP32', shape: [-1, 2] }),
      /^input "x": dimension 0 \(-1\) must be a non-negative integer below 2\^53$/,
    ],
    [
      one({ name: 'x', datatype: 'FP32', shape: ['9007199254740993'] }),
      /dimension 0 \(9007199254740993\) must be a non-negative/,
    ],
    [
      one({ name: 'x', datatype: 'FP32', shape: [2 ** 30, 2 ** 30, 2 ** 30] }),
      /^input "x": shape \[.*\] is too large$/,
    ],
    [one({ name: '', datatype: 'FP32', shape: [2] }), /^inputs\[0\] needs a name$/],
    [
      {
        inputs: [
          { name: 'x', datatype: 'FP32', shape: [1] },
          { name: 'x', datatype: 'FP32', shape: [1] },
        ],
        raw_input_contents: [Buffer.alloc(4), Buffer.alloc(4)],
      },
      /^input "x" is given twice$/,
    ],
  ];
  for (const [request, message] of cases) assert.throws(() => decodeReceived(request), refused(message));
});

// --- parameters, id and requested outputs --------------------------------------------------------

const SIGNATURE: ModelSignature = {
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 2] }],
  outputs: [
    { name: 'probs', datatype: 'FP32', shape: [-1, 3] },
    { name: 'logits', datatype: 'FP32', shape: [-1, 3] },
  ],
  batching: true,
};
const X = { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2], contents: { fp32_contents: [1, 2] } }] };

test('request parameters become plain values; priority and timeout reach prepareDecoded', () => {
  const decoded = decodeReceived({
    ...X,
    id: 'req-7',
    parameters: {
      priority: { int64_param: 3 },
      timeout: { int64_param: '250000' },
      tag: { string_param: 'blue' },
      flag: { bool_param: false },
      ratio: { double_param: 0.25 },
      big: { uint64_param: '9007199254740991' },
    },
  });
  assert.equal(decoded.id, 'req-7');
  assert.deepEqual(
    { ...decoded.parameters },
    {
      priority: 3,
      timeout: 250000,
      tag: 'blue',
      flag: false,
      ratio: 0.25,
      big: Number.MAX_SAFE_INTEGER,
    },
  );
  const prepared = prepareDecoded(decoded, SIGNATURE);
  assert.equal(prepared.priority, 3);
  assert.equal(prepared.timeoutUs, 250000);
  assert.equal(prepared.id, 'req-7');
  // An empty id is no id, as in Triton.
  assert.equal('id' in decodeReceived({ ...X, id: '' }), false);
});

test('a parameter needs a value, and a 64-bit one within ±(2^53 - 1)', () => {
  assert.throws(() => decodeReceived({ ...X, parameters: { tag: {} } }), refused(/^parameter "tag" has no value$/));
  assert.throws(
    () => decodeReceived({ ...X, parameters: { timeout: { int64_param: '9007199254740993' } } }),
    refused(/^parameter "timeout": 9007199254740993 is beyond ±\(2\^53 - 1\)$/),
  );
  assert.throws(
    () => decodeReceived({ ...X, parameters: { priority: { uint64_param: '18446744073709551615' } } }),
    refused(/^parameter "priority": 18446744073709551615 is beyond/),
  );
});

test('requested outputs: names and classification; binary_data has no say; none requested means all', () => {
  const decoded = decodeReceived({
    ...X,
    outputs: [
      { name: 'probs', parameters: { classification: { int64_param: 2 }, binary_data: { bool_param: false } } },
      { name: 'logits', parameters: { binary_data: { bool_param: false } } },
    ],
  });
  assert.deepEqual(decoded.outputs, [
    { name: 'probs', binary: true, classification: 2 },
    { name: 'logits', binary: true },
  ]);
  assert.equal(decoded.binaryDataOutput, true);
  const all = decodeReceived(X);
  assert.equal(all.outputs, undefined);
  assert.deepEqual(
    prepareDecoded(all, SIGNATURE).outputs.map((output) => output.name),
    ['probs', 'logits'],
  );
});

test('requested outputs are checked: classification an int64 above 0, each named once', () => {
  const outputs = (...list: object[]) => ({ ...X, outputs: list });
  const cases: [object, RegExp][] = [
    [
      outputs({ name: 'probs', parameters: { classification: { string_param: '2' } } }),
      /^output "probs": classification must be an int64_param$/,
    ],
    [
      outputs({ name: 'probs', parameters: { classification: { int64_param: 0 } } }),
      /^output "probs": classification must be a positive integer$/,
    ],
    [
      outputs({ name: 'probs', parameters: { classification: { int64_param: -3 } } }),
      /classification must be a positive integer/,
    ],
    [outputs({ name: 'probs' }, { name: 'probs' }), /^output "probs" is requested twice$/],
    [outputs({ name: '' }), /^outputs\[0\] needs a name$/],
  ];
  for (const [request, message] of cases) assert.throws(() => decodeReceived(request), refused(message));
});

// --- the response -------------------------------------------------------------------------------

test('the response carries every output raw, as views of the tensors, in order', () => {
  const outputs: ResponseOutput[] = DATATYPES.map((datatype) => ({
    name: `out_${datatype}`,
    tensor: makeTensor(datatype, SAMPLES[datatype], [2, 2]),
    // REST's binary_data choice does not reach gRPC.
    binary: false,
  }));
  const message = encodeGrpcInferResponse({ model_name: 'm', model_version: '3', id: 'r', outputs });
  outputs.forEach(({ tensor }, index) => {
    if (ortTypeOf(tensor.datatype) !== 'string')
      assert.equal(message.raw_output_contents[index]?.buffer, (tensor.data as Float32Array).buffer);
  });
  const answer = ModelInfer.responseDeserialize(ModelInfer.responseSerialize(message)) as {
    model_name: string;
    model_version: string;
    id: string;
    outputs: { name: string; datatype: string; shape: number[]; contents: unknown }[];
    raw_output_contents: Buffer[];
  };
  assert.deepEqual([answer.model_name, answer.model_version, answer.id], ['m', '3', 'r']);
  assert.equal(answer.raw_output_contents.length, outputs.length);
  outputs.forEach(({ name, tensor }, index) => {
    const output = answer.outputs[index];
    const raw = answer.raw_output_contents[index] as Buffer;
    const datatype = DATATYPES[index] as Datatype;
    assert.equal(output?.name, name);
    assert.equal(output.datatype, datatype);
    assert.deepEqual(output.shape.map(toSafeNumber), [2, 2]);
    assert.equal(output.contents, null, 'no typed contents');
    assert.deepEqual(raw, Buffer.from(binaryTensorBytes(tensor)));
    assertSameTensor(readBinaryTensor(name, datatype, [2, 2], 4, raw, 0, raw.length), tensor);
  });
  // Without a version or id, both are the proto's empty string.
  const bare = encodeGrpcInferResponse({ model_name: 'm', outputs: [] });
  assert.deepEqual(bare, { model_name: 'm', model_version: '', id: '', outputs: [], raw_output_contents: [] });
});

test('a classification output is the BYTES tensor of top classes, raw and length-prefixed', () => {
  const scores = tensorOf('float32', Float32Array.from([0.1, 0.7, 0.2, 0.5, 0.3, 0.2]), [2, 3]);
  const labels = ['cat', 'dog', 'eel'];
  const message = encodeGrpcInferResponse({
    model_name: 'm',
    outputs: [{ name: 'probs', tensor: scores, binary: true, classification: 2, labels }],
  });
  assert.deepEqual(message.outputs, [{ name: 'probs', datatype: 'BYTES', shape: [2, 2] }]);
  const raw = Buffer.from(message.raw_output_contents[0] as Uint8Array);
  assert.deepEqual(raw, Buffer.from(binaryTensorBytes(classify('probs', scores, 2, labels))));
  assert.deepEqual(readBinaryTensor('probs', 'BYTES', [2, 2], 4, raw, 0, raw.length).data, [
    '0.700000:1:dog',
    '0.200000:2:eel',
    '0.500000:0:cat',
    '0.300000:1:dog',
  ]);
});

// --- differential: gRPC and the v2 JSON body agree -------------------------------------------------

/** Elements JSON can carry exactly: no NaN, no -0 (JSON writes it as 0). */
function elementArb(datatype: Datatype): fc.Arbitrary<Value> {
  const noNegativeZero = (value: number) => !Object.is(value, -0);
  switch (datatype) {
    case 'BOOL':
      return fc.boolean();
    case 'UINT64':
      return fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
    case 'INT64':
      return fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    case 'FP16':
      return fc
        .integer({ min: 0, max: 0xffff })
        .filter((bits) => bits !== 0x8000 && !((bits & 0x7c00) === 0x7c00 && (bits & 0x3ff) !== 0))
        .map(halfToFloat);
    case 'FP32':
      return fc.float({ noNaN: true }).filter(noNegativeZero);
    case 'FP64':
      return fc.double({ noNaN: true }).filter(noNegativeZero);
    case 'BYTES':
      return fc.string({ unit: 'grapheme', maxLength: 6 });
    default: {
      const bits = { UINT8: 8, UINT16: 16, UINT32: 32, INT8: 8, INT16: 16, INT32: 32 }[datatype];
      const signed = datatype.startsWith('INT');
      return fc.integer({ min: signed ? -(2 ** (bits - 1)) : 0, max: signed ? 2 ** (bits - 1) - 1 : 2 ** bits - 1 });
    }
  }
}

/** The proto3 JSON spellings v2 JSON uses: 64-bit integers beyond 2^53 and non-finite floats as strings. */
function jsonValue(value: Value): unknown {
  if (typeof value === 'bigint')
    return value >= -(2n ** 53n - 1n) && value <= 2n ** 53n - 1n ? Number(value) : String(value);
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  return value;
}

const inputArb = fc
  .record({
    datatype: fc.constantFrom(...DATATYPES),
    dims: fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 3 }),
  })
  .chain(({ datatype, dims }) =>
    fc.record({
      datatype: fc.constant(datatype),
      dims: fc.constant(dims),
      values: fc.array(elementArb(datatype), {
        minLength: dims.reduce((a, b) => a * b, 1),
        maxLength: dims.reduce((a, b) => a * b, 1),
      }),
    }),
  );

test('differential: typed and raw gRPC inputs decode to the same tensors as the v2 JSON body', () => {
  fc.assert(
    fc.property(fc.array(inputArb, { minLength: 1, maxLength: 4 }), (cases) => {
      const named = cases.map((input, index) => ({ ...input, name: `in${index}` }));
      const json = decodeInferRequest(
        Buffer.from(
          JSON.stringify({
            inputs: named.map(({ name, datatype, dims, values }) => ({
              name,
              datatype,
              shape: dims,
              data: values.map(jsonValue),
            })),
          }),
        ),
        undefined,
        [],
      );
      const raw = decodeReceived({
        inputs: named.map(({ name, datatype, dims }) => ({ name, datatype, shape: dims })),
        raw_input_contents: named.map(({ datatype, dims, values }) =>
          binaryTensorBytes(makeTensor(datatype, values, dims)),
        ),
      });
      const typedCases = named.filter((input) => input.datatype !== 'FP16');
      const typed = decodeReceived({
        inputs: typedCases.map(({ name, datatype, dims, values }) => ({
          name,
          datatype,
          shape: dims,
          contents: contentsOf(datatype as Exclude<Datatype, 'FP16'>, values),
        })),
      });
      for (const { name } of named) {
        const reference = json.inputs[name] as Tensor;
        assertSameTensor(raw.inputs[name], reference);
        if (name in typed.inputs) assertSameTensor(typed.inputs[name], reference);
      }
    }),
    { numRuns: 300 },
  );
});
