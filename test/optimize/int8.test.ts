import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import ort from 'onnxruntime-node';
import { ModelConversionError } from '../../src/core/errors.js';
import { quantizeDynamicInt8 } from '../../src/optimize/int8.js';
import { DEMO_MODEL_PATH } from '../../src/runtime/demo-model.js';
import {
  CONV_WEIGHTS,
  GEMM_BIAS,
  GEMM_WEIGHTS,
  MATMUL_WEIGHTS,
  int8ConvModel,
  int8MatMulModel,
  opset9Model,
  upsampleOpset9Model,
} from '../fixtures/conversion-models.js';
import { sumModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';
import {
  FLOAT,
  INT8,
  argmax,
  decode,
  initializerTypes,
  int8Values,
  maxAbsDifference,
  nodeSummary,
  randomTensor,
  runModel,
  tensorNamed,
  toNumber,
} from './onnx-inspection.js';

/**
 * What symmetric int8 quantisation onto ±`range` must give: scale max|w|/range as float32,
 * values w/scale rounded. MatMul and Gemm weights take 64 (onnxruntime's reduce_range), Conv's 127.
 */
function expectedQuantization(weights: readonly number[], range: number): { scale: number; values: number[] } {
  const scale = Math.fround(Math.max(...weights.map(Math.abs)) / range);
  return { scale, values: weights.map((weight) => Math.round(weight / scale)) };
}

test('MatMul and Gemm weights become int8 with the expected scale and zero point; a run-time weight is skipped', () => {
  const result = quantizeDynamicInt8(int8MatMulModel(), { perChannel: true });
  const { graph } = decode(result.model);

  assert.deepEqual(result.quantizedNodes, ['matmul', 'gemm']);
  assert.deepEqual(result.skippedNodes, [
    { name: 'runtime-weight', reason: 'weight z is computed at run time or fed as an input, not a constant' },
  ]);
  assert.deepEqual(initializerTypes(graph), {
    c: FLOAT,
    w_quantized: INT8,
    w_scale: FLOAT,
    w_zero_point: INT8,
    g_quantized: INT8,
    g_scale: FLOAT,
    g_zero_point: INT8,
  });

  const matmul = expectedQuantization(MATMUL_WEIGHTS, 64);
  assert.deepEqual(matmul.values, [3, -5, 8, 32, -64, 13, 1, 1, -2, 50, 25, -25]);
  assert.deepEqual(int8Values(tensorNamed(graph, 'w_quantized')), matmul.values);
  assert.deepEqual(tensorNamed(graph, 'w_scale').floatData, [matmul.scale]);
  assert.deepEqual(tensorNamed(graph, 'w_scale').dims, []);
  assert.deepEqual(int8Values(tensorNamed(graph, 'w_zero_point')), [0]);
  assert.deepEqual((tensorNamed(graph, 'w_quantized').dims ?? []).map(toNumber), [4, 3]);

  // Gemm's B is [N, K] with transB; the integer product wants it [K, N].
  const transposed = [0, 3, 1, 4, 2, 5].map((index) => GEMM_WEIGHTS[index]!);
  const gemm = expectedQuantization(transposed, 64);
  assert.deepEqual(int8Values(tensorNamed(graph, 'g_quantized')), gemm.values);
  assert.deepEqual((tensorNamed(graph, 'g_quantized').dims ?? []).map(toNumber), [3, 2]);
  assert.deepEqual(tensorNamed(graph, 'g_scale').floatData, [gemm.scale]);
  assert.deepEqual(tensorNamed(graph, 'c').floatData, GEMM_BIAS.map(Math.fround));

  assert.deepEqual(nodeSummary(graph), [
    'DynamicQuantizeLinear(x)->matmul_input_quantized,matmul_input_scale,matmul_input_zero_point',
    'MatMulInteger(matmul_input_quantized,w_quantized,matmul_input_zero_point,w_zero_point)->matmul_product_int32',
    `Cast:${FLOAT}(matmul_product_int32)->matmul_product_float`,
    'Mul(matmul_input_scale,w_scale)->matmul_scale',
    'Mul(matmul_product_float,matmul_scale)->m',
    'DynamicQuantizeLinear(m)->gemm_input_quantized,gemm_input_scale,gemm_input_zero_point',
    'MatMulInteger(gemm_input_quantized,g_quantized,gemm_input_zero_point,g_zero_point)->gemm_product_int32',
    `Cast:${FLOAT}(gemm_product_int32)->gemm_product_float`,
    'Mul(gemm_input_scale,g_scale)->gemm_scale',
    'Mul(gemm_product_float,gemm_scale)->gemm_product',
    'Add(gemm_product,c)->y',
    'MatMul(m,z)->mz',
  ]);
});

test('the quantised MatMul and Gemm run in onnxruntime, agree with the original and fuse into integer kernels', async (t) => {
  const model = int8MatMulModel();
  const quantized = quantizeDynamicInt8(model, { perChannel: true }).model;
  const feeds = { x: randomTensor([5, 4], 11), z: randomTensor([3, 3], 12) };
  const [expected, actual] = [await runModel(model, feeds), await runModel(quantized, feeds)];
  for (const output of ['y', 'mz']) {
    const scale = Math.max(1, ...expected[output]!.values.map(Math.abs));
    const error = maxAbsDifference(expected[output]!.values, actual[output]!.values);
    assert.ok(error < 0.03 * scale, `${output}: max error ${error} of ${scale}`);
  }

  const optimizedPath = join(await tempDir(t), 'optimized.onnx');
  const session = await ort.InferenceSession.create(quantized, {
    graphOptimizationLevel: 'extended',
    optimizedModelFilePath: optimizedPath,
    logSeverityLevel: 3,
  });
  await session.release();
  const fused = decode(await readFile(optimizedPath)).graph.node.map((node) => node.opType);
  assert.deepEqual(
    fused.filter((op) => op !== 'MatMul'),
    ['DynamicQuantizeMatMul', 'DynamicQuantizeMatMul'],
  );
});

test('Conv weights are quantised per output channel through DequantizeLinear, only when per-channel is on', async () => {
  const result = quantizeDynamicInt8(int8ConvModel(), { perChannel: true });
  const { graph } = decode(result.model);
  assert.deepEqual(result.quantizedNodes, ['conv']);
  assert.deepEqual(initializerTypes(graph), { bias: FLOAT, k_quantized: INT8, k_scale: FLOAT, k_zero_point: INT8 });
  const channels = [0, 1, 2].map((channel) =>
    expectedQuantization(CONV_WEIGHTS.slice(channel * 2, channel * 2 + 2), 127),
  );
  assert.deepEqual(
    tensorNamed(graph, 'k_scale').floatData,
    channels.map((channel) => channel.scale),
  );
  assert.deepEqual(
    int8Values(tensorNamed(graph, 'k_quantized')),
    channels.flatMap((channel) => channel.values),
  );
  assert.deepEqual(int8Values(tensorNamed(graph, 'k_zero_point')), [0, 0, 0]);
  assert.deepEqual(nodeSummary(graph), [
    'DequantizeLinear(k_quantized,k_scale,k_zero_point)->conv_weight_dequantized',
    'Conv(img,conv_weight_dequantized,bias)->features',
  ]);
  assert.equal(toNumber(graph.node[0]!.attribute?.find((attribute) => attribute.name === 'axis')?.i), 0);

  const img = randomTensor([2, 2, 4, 4], 5);
  const [expected, actual] = [await runModel(int8ConvModel(), { img }), await runModel(result.model, { img })];
  assert.ok(maxAbsDifference(expected.features!.values, actual.features!.values) < 0.02);

  const perTensor = quantizeDynamicInt8(int8ConvModel(), { perChannel: false });
  assert.deepEqual(perTensor.quantizedNodes, []);
  assert.deepEqual(perTensor.skippedNodes, [
    { name: 'conv', reason: 'Conv weights are quantised per output channel only, and per-channel is off' },
  ]);
});

test('an opset 9 model is upgraded to opset 13 with its meaning kept (Slice, Clip, Unsqueeze, 3-D Softmax)', async () => {
  const model = opset9Model();
  const result = quantizeDynamicInt8(model, { perChannel: true });
  const quantized = decode(result.model);
  assert.equal(toNumber(quantized.opsetImport[0]?.version), 13);
  assert.deepEqual(result.quantizedNodes, ['matmul']);
  const ops = quantized.graph.node.map((node) => `${node.opType}/${(node.input ?? []).length}`);
  assert.ok(ops.includes('Slice/4') && ops.includes('Clip/3') && ops.includes('Unsqueeze/2'), ops.join(' '));
  assert.ok(ops.includes('Flatten/1') && ops.includes('Softmax/1'), ops.join(' '));

  const x = randomTensor([3, 6], 21);
  const [expected, actual] = [await runModel(model, { x }), await runModel(result.model, { x })];
  assert.ok(maxAbsDifference(expected.y!.values, actual.y!.values) < 0.01);
});

test('the demo classifier quantises to int8 and keeps its top-1 answer', async () => {
  const model = new Uint8Array(await readFile(DEMO_MODEL_PATH));
  const result = quantizeDynamicInt8(model, { perChannel: true });
  assert.equal(result.quantizedNodes.length, 54, 'its 53 Convs and one MatMul');
  assert.deepEqual(result.skippedNodes, []);
  assert.ok(result.model.length < model.length * 0.5, 'int8 weights take a quarter of the bytes');
  // Inputs the original answers with a clear margin (0.65/0.35 and wider), so a flip is a real error.
  for (const seed of [1, 2, 4]) {
    const x = randomTensor([1, 3, 48, 192], seed);
    const [expected, actual] = [await runModel(model, { x }), await runModel(result.model, { x })];
    const [before, after] = [Object.values(expected)[0]!.values, Object.values(actual)[0]!.values];
    assert.ok(Math.abs(before[0]! - before[1]!) > 0.2, `seed ${seed} is a clear case`);
    assert.equal(argmax(after), argmax(before), `seed ${seed}`);
    assert.ok(maxAbsDifference(before, after) < 0.1, `seed ${seed}: ${maxAbsDifference(before, after)}`);
  }
});

test('a model without MatMul, Gemm or Conv fails with BS_ERR_CONVERSION_FAILED', () => {
  assert.throws(
    () => quantizeDynamicInt8(sumModel(), { perChannel: true }),
    (error: unknown) => error instanceof ModelConversionError && error.code === 'BS_ERR_CONVERSION_FAILED',
  );
  assert.throws(() => quantizeDynamicInt8(new Uint8Array([0xff, 0xff]), { perChannel: true }), ModelConversionError);
  assert.throws(
    () => quantizeDynamicInt8(upsampleOpset9Model(), { perChannel: true }),
    (error: unknown) =>
      error instanceof ModelConversionError && /upsample.*Upsample was replaced by Resize/.test(error.message),
  );
});
