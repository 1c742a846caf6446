import assert from 'node:assert/strict';
import { test } from 'node:test';
import ort from 'onnxruntime-node';
import { createSession } from '../../src/runtime/session.js';
import { DEFAULT_SIMULATED_DEVICE, SimulatedSession } from '../../src/runtime/simulated-device.js';
import { identityModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';

const RUNTIME = { intra_op_threads: 1, inter_op_threads: 1, graph_optimization_level: 'all' } as const;

test('the simulated device holds a pass for c + m·B of wall time, not CPU, and answers zeros in the outputs’ shapes', async (t) => {
  const model = await writeModel(await tempDir(t), 'id.onnx', identityModel('FP32', 16));
  const real = await createSession(model, { runtime: RUNTIME });
  const session = new SimulatedSession(real, { fixed_cost: 20_000, row_cost: 1_000 }, [
    { name: 'y', datatype: 'FP32', shape: [-1, 16] },
  ]);
  t.after(() => session.release());
  assert.deepEqual(session.inputNames, ['x']);
  assert.equal(session.passMs(8), 28);
  const feeds = { x: new ort.Tensor('float32', new Float32Array(8 * 16).fill(1), [8, 16]) };
  // Once untimed: a first call's compilation (more of it under coverage) is CPU of its own.
  await session.run(feeds, ['y']);
  const started = performance.now();
  const cpu = process.cpuUsage();
  const outputs = await session.run(feeds, ['y']);
  const wallMs = performance.now() - started;
  const used = process.cpuUsage(cpu);
  assert.ok(wallMs >= 27.5, `held ${wallMs.toFixed(2)} ms for a 28 ms pass`);
  assert.ok((used.user + used.system) / 1000 < wallMs / 2, 'the wait is not a busy loop');
  assert.deepEqual(outputs.y?.dims, [8, 16]);
  assert.ok((outputs.y?.data as Float32Array).every((value) => value === 0));
  assert.deepEqual(DEFAULT_SIMULATED_DEVICE, { fixed_cost: 4_000, row_cost: 250 });
});

test('device sim is a config device, with its costs under simulated_device', async () => {
  const { validateModelConfig } = await import('../../src/config/model-config.js');
  const config = validateModelConfig(
    { instances: [{ device: 'sim' }], simulated_device: { fixed_cost: '4ms', row_cost: '250us' } },
    'test',
  );
  assert.deepEqual(config.simulated_device, { fixed_cost: 4_000, row_cost: 250 });
  assert.throws(() => validateModelConfig({ simulated_device: { fixed_cost: -1 } }, 'test'), {
    code: 'BS_ERR_CONFIG_INVALID',
  });
});
