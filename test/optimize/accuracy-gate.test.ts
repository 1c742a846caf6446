import { test } from 'node:test';
import assert from 'node:assert/strict';
import onnxProto from 'onnx-proto';
import { accuracyGateError, gateFailures, measureAccuracy } from '../../src/optimize/accuracy-gate.js';
import { GATE_BATCH, RANDOM_ROWS, randomGateFeeds } from '../../src/optimize/calibration-inputs.js';
import { validateModelConfig } from '../../src/config/model-config.js';
import { affineModel, softmaxSequenceModel, tinyImageClassifier } from '../fixtures/onnx-models.js';

const { onnx } = onnxProto;
const runtime = validateModelConfig({}, 'test').runtime;
const limits = { maxRelError: 0.01, minTop1Agreement: 0.97 };
const xInputs = [{ name: 'x', datatype: 'FP32' as const, shape: [-1, 4] }];

/** The tiny classifier with its weights' columns swapped: every arg-max flips. */
function swappedClassifier(): Uint8Array {
  const model = onnx.ModelProto.decode(tinyImageClassifier());
  const weights = model.graph?.initializer?.[0];
  assert.ok(weights);
  weights.floatData = [-1, 1, 0, 0, 0, 0];
  return onnx.ModelProto.encode(model).finish();
}

test('random gate inputs are seeded: the same values each time, batch and variable dimensions as documented', () => {
  const first = randomGateFeeds([{ name: 'x', datatype: 'FP32', shape: [-1, 3, -1] }], true);
  const again = randomGateFeeds([{ name: 'x', datatype: 'FP32', shape: [-1, 3, -1] }], true);
  assert.equal(first.samples, RANDOM_ROWS);
  assert.equal(first.feeds.length, RANDOM_ROWS / GATE_BATCH);
  assert.deepEqual(first.feeds[0]?.x?.dims, [GATE_BATCH, 3, 32]);
  assert.deepEqual(first.feeds[3]?.x?.data, again.feeds[3]?.x?.data);
  const values = [...(first.feeds[0]?.x?.data as Float32Array)];
  assert.ok(values.every((value) => value >= -1 && value < 1));
  assert.ok(new Set(values).size > values.length / 2, 'values differ');
  const fixed = randomGateFeeds([{ name: 'x', datatype: 'INT64', shape: [2, 5] }], false);
  assert.equal(fixed.samples, GATE_BATCH);
  assert.deepEqual(fixed.feeds[0]?.x?.dims, [2, 5]);
});

test("text inputs get what a text model takes, whatever the handler: windows of the tokenizer's ids, a mask of ones, type ids 0, positions along the tokens", () => {
  const text = (name: string) => ({ name, datatype: 'INT64' as const, shape: [-1, -1] });
  const gate = randomGateFeeds(
    ['input_ids', 'attention_mask', 'token_type_ids', 'position_ids'].map(text),
    true,
    [100, 101, 102, 103, 104],
  );
  const feed = gate.feeds[0] ?? {};
  const values = (name: string): number[] => Array.from(feed[name]?.data as BigInt64Array, Number);
  assert.deepEqual(feed.input_ids?.dims, [GATE_BATCH, 32]);
  const ids = values('input_ids');
  for (let row = 0; row < GATE_BATCH; row++) {
    // Each row runs on through the ids from its own start, wrapping round.
    const first = ids[row * 32] as number;
    assert.deepEqual(
      ids.slice(row * 32, row * 32 + 6),
      [0, 1, 2, 3, 4, 5].map((k) => 100 + ((first - 100 + k) % 5)),
    );
  }
  assert.ok(values('attention_mask').every((value) => value === 1));
  assert.ok(values('token_type_ids').every((value) => value === 0));
  assert.deepEqual(values('position_ids').slice(0, 34), [...Array.from({ length: 32 }, (_, i) => i), 0, 1]);
});

test('the same model passes the gate with zero error', async () => {
  const figures = await measureAccuracy({
    original: affineModel(),
    converted: affineModel(),
    runtime,
    gateFeeds: randomGateFeeds(xInputs, true),
    classifierOutputs: new Set(),
    limits,
  });
  assert.deepEqual(figures.outputs, [{ name: 'y', maxAbsError: 0, maxRelError: 0 }]);
  assert.equal(figures.passed, true);
  assert.equal(figures.inputs, 'random');
  assert.equal(figures.samples, RANDOM_ROWS);
});

test('a converted model that answers differently is refused with BS_ERR_ACCURACY_GATE, naming the output and the limit', async () => {
  // y = 2x + 1.5 against y = 2x + 1 on x in [-1, 1): the error is 0.5 everywhere, the range up to 3.
  const figures = await measureAccuracy({
    original: affineModel(),
    converted: affineModel([4], 'batch', 1.5),
    runtime,
    gateFeeds: randomGateFeeds(xInputs, true),
    classifierOutputs: new Set(),
    limits,
  });
  const [y] = figures.outputs;
  assert.ok(Math.abs((y?.maxAbsError ?? 0) - 0.5) < 1e-6, String(y?.maxAbsError));
  assert.ok(y?.maxRelError !== null && y !== undefined && y.maxRelError > 0.16 && y.maxRelError < 0.26);
  assert.equal(figures.passed, false);
  const error = accuracyGateError('fp16', figures);
  assert.equal(error.code, 'BS_ERR_ACCURACY_GATE');
  assert.match(error.message, /output "y" max relative error 0\.\d+ > 0\.01 \(--max-error\)/);
  assert.doesNotMatch(error.message, /\n/);
});

test('NaN or Infinity in the converted output fails whatever the limits', () => {
  const failures = gateFailures([{ name: 'y', maxAbsError: null, maxRelError: null }], {
    maxRelError: 1e9,
    minTop1Agreement: 0,
  });
  assert.deepEqual(failures, ['output "y" has NaN or Infinity where the original\'s is finite']);
});

test('classifier outputs are judged on top-1 agreement', async () => {
  const gateFeeds = randomGateFeeds([{ name: 'input', datatype: 'FP32', shape: [-1, 3, 8, 8] }], true);
  const same = await measureAccuracy({
    original: tinyImageClassifier(),
    converted: tinyImageClassifier(),
    runtime,
    gateFeeds,
    classifierOutputs: new Set(['probabilities']),
    limits,
  });
  assert.equal(same.outputs[0]?.top1Agreement, 1);
  const flipped = await measureAccuracy({
    original: tinyImageClassifier(),
    converted: swappedClassifier(),
    runtime,
    gateFeeds,
    classifierOutputs: new Set(['probabilities']),
    limits: { maxRelError: 1e9, minTop1Agreement: 0.97 },
  });
  assert.equal(flipped.outputs[0]?.top1Agreement, 0);
  assert.deepEqual(gateFailures(flipped.outputs, flipped.limits), [
    'output "probabilities" top-1 agreement 0.000 < 0.97 (--min-agreement)',
  ]);
});

test('a sequence of per-step probabilities is judged by its decoded labels, not by how far the probabilities moved', async () => {
  const gateFeeds = randomGateFeeds([{ name: 'x', datatype: 'FP32', shape: [-1, 6, 5] }], true);
  const gate = (converted: Uint8Array) =>
    measureAccuracy({
      original: softmaxSequenceModel(1),
      converted,
      runtime,
      gateFeeds,
      classifierOutputs: new Set(),
      limits: { maxRelError: 0.05, minTop1Agreement: 0.98 },
    });
  // Sharper probabilities, the same arg-max at every step: far past 5 % of the range, same text.
  const sharper = await gate(softmaxSequenceModel(1.6));
  const [y] = sharper.outputs;
  assert.ok(y?.maxRelError !== null && y !== undefined && y.maxRelError > 0.05, JSON.stringify(y));
  assert.equal(y.decodedAgreement, 1);
  assert.equal(y.top1Agreement, undefined);
  assert.deepEqual(gateFailures(sharper.outputs, sharper.limits), []);
  assert.equal(sharper.passed, true);
  // The arg-min at every step: other labels on nearly every row.
  const inverted = await gate(softmaxSequenceModel(-1));
  const decoded = inverted.outputs[0]?.decodedAgreement;
  assert.ok(decoded !== undefined && decoded < 0.2, String(decoded));
  assert.equal(inverted.passed, false);
  assert.match(
    gateFailures(inverted.outputs, inverted.limits).join(),
    /^output "y" decoded agreement 0\.\d{3} < 0\.98 \(--min-agreement\)$/,
  );
});

test('a [batch, steps, features] output that is not per-step probabilities is judged by its error alone', async () => {
  const figures = await measureAccuracy({
    original: affineModel([6, 5]),
    converted: affineModel([6, 5], 'batch', 1.5),
    runtime,
    gateFeeds: randomGateFeeds([{ name: 'x', datatype: 'FP32', shape: [-1, 6, 5] }], true),
    classifierOutputs: new Set(),
    limits,
  });
  assert.equal(figures.outputs[0]?.decodedAgreement, undefined);
  assert.equal(figures.passed, false);
});
