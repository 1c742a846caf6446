import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { tensorrtEnvironment } from '../../src/runtime/tensorrt-options.js';
import { validateServerConfig } from '../../src/server/server-config.js';
import { startServer } from '../../src/server/server.js';
import { affineRequest, call, packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

test('doctor reports the CPU provider working and each accelerator with why it does not', async () => {
  const run = await new Promise<{ code: number; stdout: string }>((resolve) =>
    execFile(process.execPath, [BIN, 'doctor', '--json'], (error, stdout) =>
      resolve({ code: error ? Number(error.code) : 0, stdout }),
    ),
  );
  assert.equal(run.code, 0);
  const report = JSON.parse(run.stdout) as {
    providers: { name: string; works: boolean; error?: string }[];
    cpu: { cores: number };
  };
  const provider = (name: string) => report.providers.find((p) => p.name === name);
  assert.equal(provider('cpu')?.works, true);
  assert.ok(report.cpu.cores >= 1);
  // This machine has no GPU: each accelerator fails with the documented cause and fix.
  assert.equal(provider('webgpu')?.works, false);
  assert.match(provider('webgpu')?.error ?? '', /Vulkan/);
  assert.equal(provider('cuda')?.works, false);
  assert.match(provider('cuda')?.error ?? '', /ONNXRUNTIME_NODE_INSTALL=cuda12 npm ci/);
});

test('auto picks the CPU here and says why; an explicit GPU device fails alone, the other models serve', async (t) => {
  const dir = await tempDir(t);
  const auto = await packAffine(dir, {
    name: 'auto',
    config: 'max_batch_size: 4\ninstances:\n  - { count: 1, device: auto }\n',
  });
  const cuda = await packAffine(dir, {
    name: 'gpu',
    config: 'max_batch_size: 4\ninstances:\n  - { count: 1, device: cuda:0 }\n',
  });
  const webgpu = await packAffine(dir, {
    name: 'web',
    config: 'max_batch_size: 4\ninstances:\n  - { count: 1, device: webgpu }\n',
  });
  const tensorrt = await packAffine(dir, {
    name: 'trt',
    config: `max_batch_size: 4\ninstances:\n  - { count: 1, device: tensorrt:0 }\ntensorrt: { fp16: true, cache_dir: ${join(dir, 'engines')} }\n`,
  });
  const savedEnvironment = { ...process.env };
  t.after(() => {
    for (const key of Object.keys(tensorrtEnvironment({ fp16: false, engine_cache: true }))) {
      if (savedEnvironment[key] === undefined) delete process.env[key];
      else process.env[key] = savedEnvironment[key];
    }
  });
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
  const server = await startServer({
    config: validateServerConfig(
      {
        models: [`auto=${auto}`, `gpu=${cuda}`, `web=${webgpu}`, `trt=${tensorrt}`],
        port: 0,
        management_port: 0,
        metrics_port: 0,
        grpc_port: 0,
        auth: { token: 't' },
      },
      'test',
    ),
    logger,
  });
  t.after(() => server.close());
  const note = lines.find((line) => line.includes('device auto picked cpu'));
  assert.ok(note, 'one line says what auto picked');
  assert.match(note, /skipped cuda:0: .*webgpu: /);
  assert.deepEqual(
    server.startupFailures.map((failure) => failure.spec.split('=')[0]),
    ['gpu', 'web', 'trt'],
  );
  assert.match(server.startupFailures[0]?.message ?? '', /on cuda:0: .*ONNXRUNTIME_NODE_INSTALL=cuda12 npm ci/);
  assert.match(server.startupFailures[1]?.message ?? '', /on webgpu: .*Vulkan loader/);
  // It is the model file that failed to load, and the message names it, not the config.
  assert.match(server.startupFailures[1]?.message ?? '', /cannot load \S+web\.mar!web\.onnx on webgpu/);
  assert.match(server.startupFailures[2]?.message ?? '', /on tensorrt:0: .*TensorRT libraries/);
  // The model's TensorRT options were in place, where the provider reads them, before its session opened.
  assert.equal(process.env.ORT_TENSORRT_FP16_ENABLE, '1');
  assert.equal(process.env.ORT_TENSORRT_ENGINE_CACHE_ENABLE, '1');
  assert.equal(process.env.ORT_TENSORRT_CACHE_PATH, join(dir, 'engines'));
  const answer = await call(`${server.urls.inference}/v2/models/auto/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.status, 200, 'the other model serves');
  const [described] = (await call(`${server.urls.management}/models/auto`, { headers: { authorization: 'Bearer t' } }))
    .body;
  assert.deepEqual(
    described.workers.map((worker: { device: string }) => worker.device),
    ['cpu'],
    'instances report their device',
  );
  assert.equal((await call(`${server.urls.inference}/v2/models/gpu`)).status, 404);
});

test("TensorRT options become the provider's environment: FP16 off by default, engines cached under XDG_CACHE_HOME", (t) => {
  const saved = process.env.XDG_CACHE_HOME;
  t.after(() => {
    if (saved === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = saved;
  });
  process.env.XDG_CACHE_HOME = '/var/cache/me';
  assert.deepEqual(tensorrtEnvironment({ fp16: false, engine_cache: true }), {
    ORT_TENSORRT_FP16_ENABLE: '0',
    ORT_TENSORRT_ENGINE_CACHE_ENABLE: '1',
    ORT_TENSORRT_CACHE_PATH: '/var/cache/me/batchserve/tensorrt',
  });
  assert.deepEqual(tensorrtEnvironment({ fp16: true, engine_cache: false }), {
    ORT_TENSORRT_FP16_ENABLE: '1',
    ORT_TENSORRT_ENGINE_CACHE_ENABLE: '0',
  });
});
