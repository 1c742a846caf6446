import { test } from 'node:test';
import assert from 'node:assert/strict';
import { validateModelConfig } from '../../src/config/model-config.js';
import { reconcileWithModel, DEFAULT_MAX_BATCH_SIZE } from '../../src/runtime/reconcile.js';
import { ModelSignatureMismatchError } from '../../src/core/errors.js';
import { readGraphSignature } from '../../src/runtime/session.js';
import { affineModel, sumModel } from '../fixtures/onnx-models.js';

const affine = await readGraphSignature(affineModel([4]), 'affine.onnx');
const fixedBatch = await readGraphSignature(affineModel([4], 1), 'fixed.onnx');

function mismatch(raw: unknown, model = affine): readonly string[] {
  try {
    reconcileWithModel(validateModelConfig(raw, 'c.yaml'), model, 'c.yaml');
  } catch (error) {
    assert.ok(error instanceof ModelSignatureMismatchError);
    assert.equal(error.code, 'BS_ERR_MODEL_SIGNATURE_MISMATCH');
    return error.problems;
  }
  assert.fail('expected a mismatch');
}

test('onnxruntime reports the real signature; symbolic dims become -1', () => {
  assert.deepEqual(affine, {
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
    outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
  });
});

test('a config without inputs/outputs takes them from the model and batches by default', () => {
  const config = reconcileWithModel(validateModelConfig({}, 'c.yaml'), affine, 'c.yaml');
  assert.deepEqual(config.inputs, affine.inputs);
  assert.deepEqual(config.outputs, affine.outputs);
  assert.equal(config.max_batch_size, DEFAULT_MAX_BATCH_SIZE);
});

test('a model with a fixed batch dimension defaults to max_batch_size 0', () => {
  const config = reconcileWithModel(validateModelConfig({}, 'c.yaml'), fixedBatch, 'c.yaml');
  assert.equal(config.max_batch_size, 0);
});

test('max_batch_size > 0 on a model that fixes its batch dimension is refused', () => {
  assert.deepEqual(mismatch({ max_batch_size: 4 }, fixedBatch), [
    'inputs[0] "x": max_batch_size is 4 but the model fixes the batch dimension to 1',
    'outputs[0] "y": max_batch_size is 4 but the model fixes the batch dimension to 1',
  ]);
});

test('a shape, datatype or rank disagreeing with the model is refused, all at once', () => {
  assert.deepEqual(mismatch({ inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 5] }] }), [
    'inputs[0] "x": dimension 1 is 5, but the model fixes it to 4',
  ]);
  assert.deepEqual(
    mismatch({
      inputs: [{ name: 'x', datatype: 'INT64', shape: [-1, 4, 1] }],
      outputs: [{ name: 'z', datatype: 'FP32', shape: [-1, 4] }],
    }),
    [
      'inputs[0] "x": datatype INT64, but the model\'s is FP32',
      'inputs[0] "x": rank 3 [-1, 4, 1], but the model\'s is 2 [-1, 4]',
      'outputs[0] "z": the model has no such output (it has y)',
    ],
  );
});

test('every model input must be listed; a variable dim may be narrowed to a fixed size', async () => {
  const sum = await readGraphSignature(sumModel(3), 'sum.onnx');
  assert.deepEqual(mismatch({ inputs: [{ name: 'a', datatype: 'FP32', shape: [-1, 3] }] }, sum), [
    'inputs: the model\'s input "b" is missing',
  ]);
  const narrowed = await readGraphSignature(affineModel(['width']), 'affine-var.onnx');
  const config = reconcileWithModel(
    validateModelConfig({ inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 7] }] }, 'c.yaml'),
    narrowed,
    'c.yaml',
  );
  assert.deepEqual(config.inputs[0]?.shape, [-1, 7]);
});
