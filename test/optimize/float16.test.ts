import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import { ModelConversionError } from '../../src/core/errors.js';
import { DEMO_MODEL_PATH } from '../../src/runtime/demo-model.js';
import { convertToFloat16 } from '../../src/optimize/float16.js';
import { float16Bits, float16Value, toFloat16Bytes } from '../../src/optimize/float16-bits.js';
import {
  attributeTensorsModel,
  float16Model,
  FLOAT16_WEIGHTS,
  largeVarianceBatchNormModel,
} from '../fixtures/conversion-models.js';
import { sumModel } from '../fixtures/onnx-models.js';
import {
  FLOAT,
  FLOAT16,
  INT64,
  argmax,
  declaredTypes,
  decode,
  initializerTypes,
  maxAbsDifference,
  nodeSummary,
  randomTensor,
  runModel,
  tensorNamed,
  toNumber,
} from './onnx-inspection.js';

test('float16 bits round to nearest even, like numpy', () => {
  assert.equal(float16Bits(1), 0x3c00);
  assert.equal(float16Bits(-2), 0xc000);
  assert.equal(float16Bits(65504), 0x7bff);
  assert.equal(float16Bits(65520), 0x7c00, 'halfway past the largest float16 rounds to infinity');
  assert.equal(float16Bits(2 ** -24), 0x0001, 'the smallest subnormal');
  assert.equal(float16Bits(2 ** -26), 0x0000);
  assert.equal(float16Bits(1 + 2 ** -11), 0x3c00, 'a tie rounds to the even mantissa');
  assert.equal(float16Bits(1 + 3 * 2 ** -11), 0x3c02);
  assert.equal(float16Bits(Number.NaN) & 0x7e00, 0x7e00);
  assert.equal(float16Value(float16Bits(0.1)), 0.0999755859375);
  assert.equal(float16Value(0x0001), 2 ** -24);
});

test('values beyond float16 are clamped and counted; infinities and zeros are not', () => {
  const { bytes, clamped } = toFloat16Bytes([1e5, -1e6, 1e-9, -1e-9, 0, Infinity, 1]);
  const view = new DataView(bytes.buffer);
  const values = Array.from({ length: 7 }, (_, index) => float16Value(view.getUint16(index * 2, true)));
  assert.deepEqual(values, [65504, -65504, 2 ** -24, -(2 ** -24), 0, Infinity, 1]);
  assert.equal(clamped, 4);
});

test('fp16 with float32 io: every weight and value typed, a Cast at each io edge and around the blocked TopK', () => {
  const result = convertToFloat16(float16Model(), { keepIoTypes: true, fp32Ops: [] });
  const { graph, opsetImport } = decode(result.model);

  assert.equal(toNumber(opsetImport[0]?.version), 13, 'the opset stays');
  assert.deepEqual(initializerTypes(graph), { w: FLOAT16, limit: FLOAT16, k: INT64 });
  assert.deepEqual(declaredTypes(graph), {
    x: FLOAT,
    h: FLOAT16,
    limited: FLOAT16,
    values: FLOAT,
    two: FLOAT16,
    scaled: FLOAT16,
    indicesFloat: FLOAT16,
    y: FLOAT,
    indices: INT64,
  });
  assert.deepEqual(nodeSummary(graph), [
    `Cast:${FLOAT16}(x)->x_fp16`,
    'MatMul(x_fp16,w)->h',
    'Min(h,limit)->limited',
    `Cast:${FLOAT}(limited)->limited_fp32`,
    'TopK(limited_fp32,k)->values,indices',
    `Cast:${FLOAT16}(values)->values_fp16`,
    'Constant()->two',
    'Mul(values_fp16,two)->scaled',
    `Cast:${FLOAT16}(indices)->indicesFloat`,
    'Add(scaled,indicesFloat)->y_fp16',
    `Cast:${FLOAT}(y_fp16)->y`,
  ]);
  const constant = graph.node.find((node) => node.opType === 'Constant');
  assert.equal(constant?.attribute?.[0]?.t?.dataType, FLOAT16);
  assert.deepEqual(
    {
      converted: result.convertedInitializers,
      clamped: result.clampedInitializers,
      kept: result.keptFp32Nodes,
      casts: result.castsInserted,
    },
    { converted: 3, clamped: 1, kept: ['topk'], casts: 4 },
  );
  const weights = tensorNamed(graph, 'w').rawData!;
  const view = new DataView(weights.buffer, weights.byteOffset, weights.byteLength);
  assert.deepEqual(
    FLOAT16_WEIGHTS.map((_, index) => float16Value(view.getUint16(index * 2, true))),
    FLOAT16_WEIGHTS,
    'these weights are exact in float16',
  );
});

test('fp16 with float16 io: inputs and outputs become float16 and only the blocked op has Casts', () => {
  const result = convertToFloat16(float16Model(), { keepIoTypes: false, fp32Ops: [] });
  const { graph } = decode(result.model);
  assert.equal(declaredTypes(graph).x, FLOAT16);
  assert.equal(declaredTypes(graph).y, FLOAT16);
  assert.deepEqual(
    nodeSummary(graph).filter((node) => node.startsWith('Cast')),
    [
      `Cast:${FLOAT}(limited)->limited_fp32`,
      `Cast:${FLOAT16}(values)->values_fp16`,
      `Cast:${FLOAT16}(indices)->indicesFloat`,
    ],
  );
  assert.equal(result.castsInserted, 2);
});

test('fp32Ops keeps more ops float32; a weight only they read stays float32 with no Cast', () => {
  const result = convertToFloat16(float16Model(), { keepIoTypes: true, fp32Ops: ['Mul'] });
  const { graph } = decode(result.model);
  assert.deepEqual(result.keptFp32Nodes, ['topk', 'two', 'scale']);
  assert.equal(graph.node.find((node) => node.opType === 'Constant')?.attribute?.[0]?.t?.dataType, FLOAT);
  assert.equal(declaredTypes(graph).scaled, FLOAT);
  assert.deepEqual(nodeSummary(graph).slice(4, 9), [
    'TopK(limited_fp32,k)->values,indices',
    'Constant()->two',
    'Mul(values,two)->scaled',
    `Cast:${FLOAT16}(scaled)->scaled_fp16`,
    `Cast:${FLOAT16}(indices)->indicesFloat`,
  ]);
  assert.equal(result.castsInserted, 4);
});

test('the converted fixture runs in onnxruntime and agrees with the original', async () => {
  const x = randomTensor([3, 4], 7);
  const original = await runModel(float16Model(), { x });
  for (const keepIoTypes of [true, false]) {
    const converted = convertToFloat16(float16Model(), { keepIoTypes, fp32Ops: [] }).model;
    const input = keepIoTypes
      ? x
      : new ort.Tensor('float16', Uint16Array.from(x.data as Float32Array, float16Bits), x.dims);
    const answers = await runModel(converted, { x: input });
    assert.equal(answers.y!.type, keepIoTypes ? 'float32' : 'float16');
    const y = keepIoTypes ? answers.y!.values : answers.y!.values.map(float16Value);
    assert.ok(maxAbsDifference(original.y!.values, y) < 0.02, `keepIoTypes=${keepIoTypes}`);
    assert.deepEqual(answers.indices!.values, original.indices!.values);
  }
});

test('float tensors in attributes convert: Constant value_floats and ConstantOfShape without a value', async () => {
  const result = convertToFloat16(attributeTensorsModel(), { keepIoTypes: true, fp32Ops: [] });
  const { graph } = decode(result.model);
  const attributes = new Map(graph.node.map((node) => [node.name, node.attribute ?? []]));
  assert.deepEqual(
    attributes
      .get('factors')!
      .map((attribute) => [attribute.name, attribute.t?.dataType, (attribute.t?.dims ?? []).map(toNumber)]),
    [['value', FLOAT16, [3]]],
  );
  assert.deepEqual(
    attributes.get('zeros')!.map((attribute) => [attribute.name, attribute.t?.dataType]),
    [['value', FLOAT16]],
  );
  assert.deepEqual(declaredTypes(graph), { x: FLOAT, shape: INT64, zeros: FLOAT16, shifted: FLOAT16, y: FLOAT });
  assert.equal(result.convertedInitializers, 1, 'the one Constant');

  const x = randomTensor([2, 3], 3);
  const { y } = await runModel(result.model, { x });
  const expected = Array.from(x.data as Float32Array, (value, index) => value * [1, 2, 3][index % 3]!);
  assert.ok(maxAbsDifference(y!.values, expected) < 0.01);
});

test('a BatchNormalization variance beyond float16 is folded into the scale, not clamped', async () => {
  const result = convertToFloat16(largeVarianceBatchNormModel(), { keepIoTypes: true, fp32Ops: [] });
  const { graph } = decode(result.model);
  assert.deepEqual(graph.node.find((node) => node.opType === 'BatchNormalization')?.input, [
    'x_fp16',
    'scale_over_stddev',
    'bias',
    'mean',
    'variance_unit',
  ]);
  assert.deepEqual(initializerTypes(graph), {
    bias: FLOAT16,
    mean: FLOAT16,
    scale_over_stddev: FLOAT16,
    variance_unit: FLOAT16,
  });
  assert.equal(result.clampedInitializers, 0);

  const x = randomTensor([2, 2, 2, 2], 9);
  x.data.forEach((value, index, data) => (data[index] = Number(value) * 1000));
  const [expected, actual] = [
    await runModel(largeVarianceBatchNormModel(), { x }),
    await runModel(result.model, { x }),
  ];
  assert.ok(maxAbsDifference(expected.y!.values, actual.y!.values) < 0.05);
});

test('the demo classifier converts to fp16 and keeps its top-1 answer', async () => {
  const model = new Uint8Array(await readFile(DEMO_MODEL_PATH));
  const result = convertToFloat16(model, { keepIoTypes: true, fp32Ops: [] });
  assert.equal(decode(result.model).graph.initializer.length, 0, 'its weights are Constant nodes');
  assert.ok(result.convertedInitializers > 50);
  assert.ok(result.model.length < model.length * 0.6, 'weights take half the bytes');
  // Inputs the original answers with a clear margin (0.65/0.35 and wider), so a flip is a real error.
  for (const seed of [1, 2, 4]) {
    const x = randomTensor([1, 3, 48, 192], seed);
    const [expected, actual] = [await runModel(model, { x }), await runModel(result.model, { x })];
    const [before, after] = [Object.values(expected)[0]!.values, Object.values(actual)[0]!.values];
    assert.ok(Math.abs(before[0]! - before[1]!) > 0.2, `seed ${seed} is a clear case`);
    assert.equal(argmax(after), argmax(before), `seed ${seed}`);
    assert.ok(maxAbsDifference(before, after) < 0.02, `seed ${seed}: ${maxAbsDifference(before, after)}`);
  }
});

test('a model that cannot be converted fails with BS_ERR_CONVERSION_FAILED', () => {
  const options = { keepIoTypes: true, fp32Ops: [] };
  assert.throws(
    () => convertToFloat16(new Uint8Array([1, 2, 3, 4]), options),
    (error: unknown) => {
      assert.ok(error instanceof ModelConversionError);
      assert.equal(error.code, 'BS_ERR_CONVERSION_FAILED');
      return true;
    },
  );
  assert.throws(() => convertToFloat16(sumModel(), options), /no float32 weights/);
});
