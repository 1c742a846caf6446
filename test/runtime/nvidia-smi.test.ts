import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GpuSampler } from '../../src/runtime/gpu-sampler.js';
import { parseGpuQuery, queryGpus, type GpuSample } from '../../src/runtime/nvidia-smi.js';
import { FAKE_NVIDIA_SMI, fakeNvidiaSmiPrints, recorded } from '../fixtures/nvidia-smi.js';

const MIB = 2 ** 20;

test('one GPU: utilisation as a ratio, memory in bytes, power in watts', () => {
  assert.deepEqual(parseGpuQuery(recorded('one-gpu.txt')), {
    kind: 'gpus',
    gpus: [
      {
        index: 0,
        uuid: 'GPU-6f3c2e1a-8b4d-4c55-9e2a-1d7b3f0a9c11',
        name: 'NVIDIA H200',
        utilization: 0.87,
        memoryUsedBytes: 40321 * MIB,
        memoryTotalBytes: 143771 * MIB,
        powerWatts: 612.45,
      },
    ],
  });
});

test('several GPUs keep their own index and figures', () => {
  const reading = parseGpuQuery(recorded('four-gpus.txt'));
  assert.equal(reading.kind, 'gpus');
  const gpus = (reading as { gpus: readonly GpuSample[] }).gpus;
  assert.deepEqual(
    gpus.map((gpu) => [gpu.index, gpu.utilization, gpu.memoryUsedBytes, gpu.powerWatts]),
    [
      [0, 1, 61234 * MIB, 398.12],
      [1, 0, 4 * MIB, 61.03],
      [2, 0.35, 20480 * MIB, 210.5],
      [3, 0, 1 * MIB, 58.77],
    ],
  );
});

test('[N/A] and [Not Supported] are unknown figures, not zeros', () => {
  const reading = parseGpuQuery(recorded('not-available.txt'));
  assert.equal(reading.kind, 'gpus');
  const [mig, k80] = (reading as { gpus: readonly GpuSample[] }).gpus;
  assert.equal(mig?.name, 'NVIDIA H100 80GB HBM3 MIG 1g.10gb');
  assert.equal(mig?.utilization, undefined);
  assert.equal(mig?.powerWatts, undefined);
  assert.equal(mig?.memoryUsedBytes, 12 * MIB);
  assert.equal(k80?.utilization, undefined);
  assert.equal(k80?.memoryTotalBytes, 11441 * MIB);
});

test("a driver error is a failed reading that carries nvidia-smi's text", () => {
  const reading = parseGpuQuery(recorded('driver-error.txt'));
  assert.equal(reading.kind, 'failed');
  assert.match((reading as { error: string }).error, /couldn't communicate with the NVIDIA driver/);
  assert.deepEqual(parseGpuQuery(''), { kind: 'gpus', gpus: [] });
  assert.equal(parseGpuQuery('0, GPU-x, name, 1, 2, 3').kind, 'failed');
});

test('queryGpus runs the real executable: a recording, a driver error (exit 9), or no binary at all', async (t) => {
  fakeNvidiaSmiPrints(t, 'four-gpus.txt');
  const four = await queryGpus(FAKE_NVIDIA_SMI);
  assert.equal(four.kind === 'gpus' && four.gpus.length, 4);
  process.env.FAKE_NVIDIA_SMI_OUTPUT = 'driver-error.txt';
  const failed = await queryGpus(FAKE_NVIDIA_SMI);
  assert.equal(failed.kind, 'failed');
  assert.match((failed as { error: string }).error, /NVIDIA-SMI has failed/);
  const missing = await queryGpus('/nonexistent/nvidia-smi');
  assert.deepEqual(missing, { kind: 'missing', error: '/nonexistent/nvidia-smi not found' });
});

test('the sampler without nvidia-smi logs one line, reports no GPUs and stops for good', async () => {
  const logged: string[] = [];
  const readings: unknown[] = [];
  const sampler = new GpuSampler({
    command: '/nonexistent/nvidia-smi',
    intervalMs: 10,
    onReading: (gpus) => readings.push(gpus),
    log: (message) => logged.push(message),
  });
  sampler.start();
  await waitFor(() => readings.length > 0);
  assert.equal(sampler.running, false);
  sampler.start();
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.deepEqual(readings, [undefined]);
  assert.deepEqual(logged, ['GPU metrics off: /nonexistent/nvidia-smi not found']);
});

test('the sampler reads the fake nvidia-smi again and again, logging a driver error once', async (t) => {
  fakeNvidiaSmiPrints(t, 'driver-error.txt');
  const logged: string[] = [];
  const readings: (readonly GpuSample[] | undefined)[] = [];
  const sampler = new GpuSampler({
    command: FAKE_NVIDIA_SMI,
    intervalMs: 5,
    onReading: (gpus) => readings.push(gpus),
    log: (message) => logged.push(message),
  });
  t.after(() => sampler.stop());
  sampler.start();
  await waitFor(() => readings.length >= 3);
  assert.equal(logged.length, 1);
  assert.match(logged[0] ?? '', /nvidia-smi failed: NVIDIA-SMI has failed/);
  process.env.FAKE_NVIDIA_SMI_OUTPUT = 'one-gpu.txt';
  await waitFor(() => readings.at(-1)?.[0]?.name === 'NVIDIA H200');
  sampler.stop();
  assert.equal(sampler.running, false);
});

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
