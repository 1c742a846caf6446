import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import jpeg from 'jpeg-js';
import { PNG } from 'pngjs';
import { readModelConfigFile } from '../../src/config/load.js';
import { validateModelConfig, type ModelConfig } from '../../src/config/model-config.js';
import { reconcileWithModel } from '../../src/runtime/reconcile.js';
import { imageClassifierHandler, type Classification } from '../../src/handlers/image-classifier-handler.js';
import { createHandlerContext, runBatch } from '../../src/handlers/lifecycle.js';
import { tensorHandler } from '../../src/handlers/tensor-handler.js';
import type { HandlerContext } from '../../src/handlers/types.js';
import { createSession, readSignature } from '../../src/runtime/session.js';
import type { TensorMap } from '../../src/handlers/ort-tensors.js';
import type { BatchserveError } from '../../src/core/errors.js';
import { DEMO_MODEL_PATH as DEMO_MODEL } from '../../src/runtime/demo-model.js';
import { affineModel, tinyImageClassifier } from '../fixtures/onnx-models.js';
import type { HandlerRequest } from '../../src/core/request.js';

type Request = HandlerRequest<ort.Tensor>;
const body = (bytes: Buffer): Request => ({ kind: 'body', body: bytes, contentType: undefined, movable: false });
const tensors = (x: ort.Tensor): Request => ({
  kind: 'tensors',
  inputs: { x },
  rows: x.dims[0] as number,
  movable: false,
});

async function contextFor(model: string | Uint8Array, config: ModelConfig, labels?: string[]): Promise<HandlerContext> {
  const session = await createSession(model, config);
  return createHandlerContext({
    modelName: 'm',
    modelVersion: '1',
    config: reconcileWithModel(config, readSignature(session, 'model'), 'config'),
    session,
    ...(labels ? { labels } : {}),
  });
}

const rows = (count: number, start: number): ort.Tensor =>
  new ort.Tensor(
    'float32',
    Float32Array.from({ length: count * 4 }, (_, i) => start + i),
    [count, 4],
  );

function png(width: number, height: number, pixel: (x: number, y: number) => [number, number, number]): Buffer {
  const image = new PNG({ width, height });
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      image.data.set([...pixel(x, y), 255], (y * width + x) * 4);
    }
  }
  return PNG.sync.write(image);
}

test("tensor handler: a stacked batch splits back to exactly each request's solo result", async () => {
  const context = await contextFor(affineModel([4]), validateModelConfig({}, 'c'));
  const requests: Request[] = [tensors(rows(1, 0)), tensors(rows(2, 100)), tensors(rows(1, -7))];
  const batched = (await runBatch(tensorHandler, requests, context)) as TensorMap[];
  for (const [index, request] of requests.entries()) {
    const [solo] = (await runBatch(tensorHandler, [request], context)) as TensorMap[];
    assert.deepEqual(batched[index]?.y?.dims, solo?.y?.dims);
    assert.deepEqual(Array.from(batched[index]?.y?.data as Float32Array), Array.from(solo?.y?.data as Float32Array));
    const input = (request.kind === 'tensors' ? request.inputs.x?.data : undefined) as Float32Array;
    assert.deepEqual(
      Array.from(solo?.y?.data as Float32Array),
      Array.from(input, (v) => v * 2 + 1),
    );
  }
});

test('tensor handler: JSON bodies (TorchServe route) and bad inputs', async () => {
  const context = await contextFor(affineModel([4]), validateModelConfig({}, 'c'));
  const [named] = (await runBatch(tensorHandler, [body(Buffer.from('{"x": [[1, 2, 3, 4]]}'))], context)) as TensorMap[];
  assert.deepEqual(Array.from(named?.y?.data as Float32Array), [3, 5, 7, 9]);
  const [bare] = (await runBatch(tensorHandler, [body(Buffer.from('[[0, 0, 0, 1]]'))], context)) as TensorMap[];
  assert.deepEqual(Array.from(bare?.y?.data as Float32Array), [1, 1, 1, 3]);
  const refuse = async (request: Request): Promise<string> =>
    runBatch(tensorHandler, [request], context).then(
      () => assert.fail('expected a refusal'),
      (error: BatchserveError) => error.code,
    );
  // Tensors read from a JSON body are checked here; decoded v2 tensors were checked by the
  // protocol layer (test/protocol/prepared-request.test.ts) and are trusted.
  assert.equal(await refuse(body(Buffer.from('{"x": [[1, 2, 3, 4, 5]]}'))), 'BS_ERR_INFERENCE_INPUT');
  assert.equal(await refuse(body(Buffer.from('{"x": [[1, 2], [3, 4]]}'))), 'BS_ERR_INFERENCE_INPUT');
  assert.equal(await refuse(body(Buffer.from('{"z": [[1, 2, 3, 4]]}'))), 'BS_ERR_INFERENCE_INPUT');
  assert.equal(await refuse(body(Buffer.from('not json'))), 'BS_ERR_INFERENCE_INPUT');
  assert.equal(await refuse(body(Buffer.from('{"x": [[1, 2], [3]]}'))), 'BS_ERR_INFERENCE_INPUT');
});

test('image classifier: known scores and labels on a tiny model (PNG and JPEG)', async () => {
  const config = validateModelConfig(
    {
      inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 3, 8, 8] }],
      image_classifier: { mean: [0, 0, 0], std: [1, 1, 1], top_k: 2 },
    },
    'c',
  );
  const context = await contextFor(tinyImageClassifier(8, 8), config, ['red', 'not-red']);
  const red = png(16, 4, () => [255, 0, 0]);
  const black = png(3, 5, () => [0, 0, 0]);
  const redJpeg = Buffer.from(
    jpeg.encode({ width: 8, height: 8, data: Buffer.alloc(8 * 8 * 4, Buffer.from([255, 0, 0, 255])) }, 100).data,
  );
  const [fromRed, fromBlack, fromJpeg] = (await runBatch(
    imageClassifierHandler,
    [body(red), body(black), body(redJpeg)],
    context,
  )) as Classification[][];
  const e = Math.exp(2);
  assert.equal(fromRed?.[0]?.label, 'red');
  assert.ok(Math.abs((fromRed?.[0]?.score ?? 0) - e / (e + 1)) < 1e-5, 'softmax of logits [1, -1]');
  assert.deepEqual(
    fromBlack?.map((c) => c.label),
    ['red', 'not-red'],
  );
  assert.ok(Math.abs((fromBlack?.[0]?.score ?? 0) - 0.5) < 1e-6, 'logits [0, 0]');
  assert.equal(fromJpeg?.[0]?.label, 'red');
  assert.ok((fromJpeg?.[0]?.score ?? 0) > 0.85);
  await assert.rejects(runBatch(imageClassifierHandler, [body(Buffer.from('GIF89a....'))], context), {
    code: 'BS_ERR_INFERENCE_INPUT',
  });
});

test('image classifier over a model of any image size: refused at load until the config fixes one, then it classifies', async () => {
  const dynamic = tinyImageClassifier('height', 'width');
  const open = await contextFor(dynamic, validateModelConfig({}, 'c'));
  assert.throws(
    () => imageClassifierHandler.initialize?.(open),
    (error: BatchserveError) =>
      error.code === 'BS_ERR_HANDLER_INVALID' &&
      /needs fixed channels, height and width .* "input" is \[-1, 3, -1, -1\] \(NCHW\): give them in model-config.yaml/.test(
        error.message,
      ),
  );
  const fixed = validateModelConfig(
    {
      inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 3, 6, 6] }],
      image_classifier: { mean: [0, 0, 0], std: [1, 1, 1] },
    },
    'c',
  );
  const context = await contextFor(dynamic, fixed, ['red', 'not-red']);
  await imageClassifierHandler.initialize?.(context);
  const [answer] = (await runBatch(
    imageClassifierHandler,
    [body(png(12, 3, () => [255, 0, 0]))],
    context,
  )) as Classification[][];
  assert.equal(answer?.[0]?.label, 'red');
  const flat = await contextFor(affineModel([4]), validateModelConfig({}, 'c'));
  assert.throws(
    () => imageClassifierHandler.initialize?.(flat),
    /needs one FP32 input of rank 4 .* takes x FP32 \[-1, 4\]/,
  );
});

test('image classifier on the demo model: a batch equals each image alone, labels from the labels file', async () => {
  const config = await readModelConfigFile(
    new URL('../../../examples/orientation/model-config.yaml', import.meta.url).pathname,
  );
  const labels = (await readFile(new URL('../../../examples/orientation/labels.txt', import.meta.url), 'utf8'))
    .trim()
    .split('\n');
  const context = await contextFor(DEMO_MODEL, config, labels);
  // A "text line": dark strokes on white, and the same picture upside down.
  const line = png(160, 32, (x, y) =>
    (x % 12 < 7 && y > 8 && y < 26) || (y < 12 && x % 24 < 3) ? [20, 20, 20] : [250, 250, 250],
  );
  const flipped = png(160, 32, (x, y) =>
    (x % 12 < 7 && 31 - y > 8 && 31 - y < 26) || (31 - y < 12 && (159 - x) % 24 < 3) ? [20, 20, 20] : [250, 250, 250],
  );
  const batch = (await runBatch(imageClassifierHandler, [body(line), body(flipped)], context)) as Classification[][];
  for (const [index, bodyBytes] of [line, flipped].entries()) {
    const [solo] = (await runBatch(imageClassifierHandler, [body(bodyBytes)], context)) as Classification[][];
    assert.deepEqual(
      batch[index]?.map((c) => c.label),
      solo?.map((c) => c.label),
    );
    batch[index]?.forEach((c, k) => assert.ok(Math.abs(c.score - (solo?.[k]?.score ?? NaN)) < 1e-5));
    assert.deepEqual(new Set(solo?.map((c) => c.label)), new Set(['0', '180']));
    assert.ok(Math.abs((solo ?? []).reduce((sum, c) => sum + c.score, 0) - 1) < 1e-4, 'the model outputs a softmax');
  }
});
