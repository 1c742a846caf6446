import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cudaIndexMap, cudaOrdinal } from '../../src/metrics/gpu-metrics.js';
import { ServerMetrics } from '../../src/metrics/server-metrics.js';
import { FAKE_NVIDIA_SMI, fakeNvidiaSmiPrints } from '../fixtures/nvidia-smi.js';
import { packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { parseExposition, samplesOf } from './prometheus-text.js';

const GPU_FAMILIES = [
  'batchserve_gpu_utilization',
  'batchserve_gpu_memory_used_bytes',
  'batchserve_gpu_memory_total_bytes',
  'batchserve_gpu_power_watts',
];

function sampledMetrics(t: { after(fn: () => void): void }, command = FAKE_NVIDIA_SMI, logged: string[] = []) {
  const metrics = new ServerMetrics({
    collectProcessMetrics: false,
    gpu: { command, intervalMs: 5, log: (message) => logged.push(message) },
  });
  t.after(() => metrics.close());
  return metrics;
}

async function scrapeUntil(metrics: ServerMetrics, done: (text: string) => boolean) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const text = await metrics.text();
    if (done(text)) return parseExposition(text);
    if (Date.now() > deadline) throw new Error(`timed out; last scrape:\n${text}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test('a version on cuda:0 brings per-GPU gauges labelled with the models on each GPU', async (t) => {
  fakeNvidiaSmiPrints(t, 'four-gpus.txt');
  const metrics = sampledMetrics(t);
  metrics.modelLoaded('resnet', '1', 1, 'cuda:0');
  metrics.modelLoaded('bert', '3', 1, 'cpu,tensorrt:2');
  metrics.modelLoaded('tiny', '1', 1, 'cpu');
  const families = await scrapeUntil(metrics, (text) => text.includes('models="bert:3"'));
  for (const name of GPU_FAMILIES) {
    assert.equal(families.get(name)?.type, 'gauge', name);
    assert.match(families.get(name)?.help ?? '', /^\S.*, in [a-z]+\.$/, name);
  }
  assert.deepEqual(samplesOf(families, 'batchserve_gpu_utilization', { gpu: '0' })[0]?.labels, {
    gpu: '0',
    models: 'resnet:1',
  });
  assert.equal(samplesOf(families, 'batchserve_gpu_utilization', { gpu: '0' })[0]?.value, 1);
  assert.equal(samplesOf(families, 'batchserve_gpu_utilization', { gpu: '2', models: 'bert:3' })[0]?.value, 0.35);
  assert.equal(samplesOf(families, 'batchserve_gpu_memory_used_bytes', { gpu: '2' })[0]?.value, 20480 * 2 ** 20);
  assert.equal(samplesOf(families, 'batchserve_gpu_memory_total_bytes', { gpu: '1' })[0]?.value, 81920 * 2 ** 20);
  assert.equal(samplesOf(families, 'batchserve_gpu_power_watts', { gpu: '3', models: '' })[0]?.value, 58.77);
  // One series per GPU, so sum() over them counts each GPU once.
  assert.equal(samplesOf(families, 'batchserve_gpu_power_watts').length, 4);

  metrics.modelLoaded('vit', '2', 1, 'cuda:0');
  await scrapeUntil(metrics, (text) => text.includes('models="resnet:1,vit:2"'));
  const joined = parseExposition(await metrics.text());
  assert.equal(samplesOf(joined, 'batchserve_gpu_utilization', { gpu: '0' }).length, 1, 'the old series is gone');
});

test('figures the driver does not report have no series; unloading the last GPU version removes them all', async (t) => {
  fakeNvidiaSmiPrints(t, 'not-available.txt');
  const metrics = sampledMetrics(t);
  metrics.modelLoaded('m', '1', 1, 'webgpu');
  const families = await scrapeUntil(metrics, (text) => text.includes('batchserve_gpu_memory_used_bytes{'));
  assert.deepEqual(samplesOf(families, 'batchserve_gpu_utilization'), []);
  assert.deepEqual(samplesOf(families, 'batchserve_gpu_power_watts'), []);
  assert.equal(
    samplesOf(families, 'batchserve_gpu_memory_used_bytes', { gpu: '0', models: 'm:1' })[0]?.value,
    12 * 2 ** 20,
  );
  metrics.modelUnloaded('m', '1');
  const after = parseExposition(await metrics.text());
  for (const name of GPU_FAMILIES) assert.deepEqual(samplesOf(after, name), [], name);
});

test('without a GPU version, or without nvidia-smi, nothing is sampled and no GPU family is exported', async (t) => {
  const cpuOnly = sampledMetrics(t, '/nonexistent/nvidia-smi');
  cpuOnly.modelLoaded('m', '1', 1, 'cpu');
  const logged: string[] = [];
  const noBinary = sampledMetrics(t, '/nonexistent/nvidia-smi', logged);
  noBinary.modelLoaded('m', '1', 1, 'cuda:0');
  const deadline = Date.now() + 10_000;
  while (logged.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  assert.deepEqual(logged, ['GPU metrics off: /nonexistent/nvidia-smi not found']);
  for (const metrics of [cpuOnly, noBinary]) {
    const text = await metrics.text();
    assert.doesNotMatch(text, /batchserve_gpu_/);
  }
});

test('a failing driver drops the series it had exported', async (t) => {
  fakeNvidiaSmiPrints(t, 'one-gpu.txt');
  const logged: string[] = [];
  const metrics = sampledMetrics(t, FAKE_NVIDIA_SMI, logged);
  metrics.modelLoaded('m', '1', 1, 'cuda');
  await scrapeUntil(metrics, (text) => text.includes('batchserve_gpu_power_watts{gpu="0",models="m:1"} 612.45'));
  process.env.FAKE_NVIDIA_SMI_OUTPUT = 'driver-error.txt';
  await scrapeUntil(metrics, (text) => !text.includes('batchserve_gpu_power_watts{'));
  assert.match(logged.join('\n'), /nvidia-smi failed: NVIDIA-SMI has failed because it couldn't communicate/);
});

test('devices map to CUDA ordinals, and CUDA_VISIBLE_DEVICES renumbers them to nvidia-smi indexes', () => {
  assert.deepEqual(cudaOrdinal('cuda:3'), [3]);
  assert.deepEqual(cudaOrdinal('tensorrt:1'), [1]);
  assert.deepEqual(cudaOrdinal('cuda'), [0]);
  assert.deepEqual(cudaOrdinal('webgpu'), [0]);
  assert.deepEqual(cudaOrdinal('cpu'), []);
  const gpus = [
    { index: 0, uuid: 'GPU-aaaa-1' },
    { index: 1, uuid: 'GPU-bbbb-2' },
    { index: 2, uuid: 'GPU-cccc-3' },
  ];
  assert.equal(cudaIndexMap(gpus, undefined)(1), 1);
  assert.equal(cudaIndexMap(gpus, '2,0')(0), 2);
  assert.equal(cudaIndexMap(gpus, '2,0')(1), 0);
  assert.equal(cudaIndexMap(gpus, '2,0')(2), undefined);
  assert.equal(cudaIndexMap(gpus, 'GPU-bbbb')(0), 1);
});

test('a real server whose models run on the CPU exports no GPU family, with GPU metrics on or off', async (t) => {
  for (const interval of ['1s', 0]) {
    const archive = await packAffine(await tempDir(t));
    const server = await startTestServer(t, { models: [`affine=${archive}`], gpu_metrics_interval: interval });
    const families = await scrapeMetrics(server);
    assert.ok(families.has('batchserve_instances'));
    assert.deepEqual(
      [...families.keys()].filter((name) => name.startsWith('batchserve_gpu_')),
      [],
    );
  }
});
