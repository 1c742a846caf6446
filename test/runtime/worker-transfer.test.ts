import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateModelConfig } from '../../src/config/model-config.js';
import type { HandlerRequest } from '../../src/core/request.js';
import type { Tensors } from '../../src/core/tensors.js';
import { WorkerInstance } from '../../src/runtime/worker-instance.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';

/** A request whose tensor sits in a buffer of its own, as the server's decoded requests do. */
const request = (value: number, movable: boolean): HandlerRequest => ({
  kind: 'tensors',
  inputs: { x: { datatype: 'FP32', dims: [1, 4], data: new Float32Array(4).fill(value) } },
  rows: 1,
  movable,
});
const inputBytes = (request: HandlerRequest): number =>
  request.kind === 'tensors' ? (request.inputs.x?.data as Float32Array).byteLength : NaN;
const outputOf = (response: unknown): number[] => Array.from((response as Tensors).y?.data as Float32Array);

test('a movable request alone in its batch moves its buffers into the worker; shared or batched ones are copied', async (t) => {
  const dir = await tempDir(t);
  const { instance } = await WorkerInstance.start('affine-0', {
    modelName: 'affine',
    modelVersion: '1',
    modelPath: await writeModel(dir, 'model.onnx', affineModel()),
    modelSource: 'model.onnx',
    handler: 'tensor',
    config: validateModelConfig({ max_batch_size: 8 }, 'test'),
    configSource: 'test',
    labels: undefined,
    device: 'cpu',
  });
  t.after(() => instance.release());

  const moved = request(1, true);
  const alone = await instance.run([moved]);
  assert.deepEqual(outputOf(alone.responses[0]), [3, 3, 3, 3]);
  assert.equal(inputBytes(moved), 0, 'transferred: the buffer is detached on this side');

  const shared = request(2, false);
  await instance.run([shared]);
  assert.equal(inputBytes(shared), 16, 'a request a shadow also reads is copied');

  // A batch of several stays usable here: the batcher reruns each alone if the batch fails.
  const batch = [request(3, true), request(4, true)];
  const together = await instance.run(batch);
  assert.deepEqual(together.responses.map(outputOf), [
    [7, 7, 7, 7],
    [9, 9, 9, 9],
  ]);
  for (const item of batch) assert.equal(inputBytes(item), 16);
  const again = await instance.run([batch[1] as HandlerRequest]);
  assert.deepEqual(outputOf(again.responses[0]), [9, 9, 9, 9]);
});
