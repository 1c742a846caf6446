import assert from 'node:assert/strict';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { status } from '@grpc/grpc-js';
import { importTritonModel } from '../../src/archive/import-triton.js';
import type { BatchServer } from '../../src/server/server.js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { affineModel, sumModel } from '../fixtures/onnx-models.js';
import { call, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

/**
 * A Triton model repository laid out as Triton's docs lay one out, served as it is and driven
 * with Triton's protocols (v2 REST, GRPCInferenceService): two models (affine with two
 * versions, sum), an ensemble of them, config.pbtxt files using each mapped field, and one
 * model refused. Answers are held to the same folders imported into archives and served from
 * a model store.
 */

const AUTH = { authorization: 'Bearer test-token' };
const ROWS = [
  [1, 2, 3, 4],
  [-1, 0.5, 8, 2],
];

/** The affine model takes [batch, 2, 2]; clients send [batch, 4] (reshape). y = 2x + offset. */
const AFFINE_CONFIG = `# Triton's own layout: models/affine/config.pbtxt
name: "affine"
backend: "onnxruntime"
max_batch_size: 8
version_policy: { latest: { num_versions: 2 } }
input [
  {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 4 ]
    reshape: { shape: [ 2, 2 ] }
  }
]
output [
  {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 4 ]
    reshape: { shape: [ 2, 2 ] }
  }
]
dynamic_batching {
  preferred_batch_size: [ 2, 4 ]
  max_queue_delay_microseconds: 200
  priority_levels: 2
  default_priority_level: 2
  default_queue_policy {
    max_queue_size: 64
    default_timeout_microseconds: 5000000
    allow_timeout_override: true
  }
}
instance_group [ { count: 2, kind: KIND_CPU } ]
`;

const SUM_CONFIG = `name: "sum"
platform: "onnxruntime_onnx"
max_batch_size: 4
default_model_filename: "sum.onnx"
version_policy: { all { } }
input [
  { name: "a", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "b", data_type: TYPE_FP32, dims: [ 4 ] }
]
output [ { name: "sum", data_type: TYPE_FP32, dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU } ]
optimization { graph: { level: 1 } }
parameters { key: "intra_op_thread_count" value: { string_value: "1" } }
parameters { key: "inter_op_thread_count" value: { string_value: "1" } }
response_cache { enable: true }
`;

/** out = affine(x) + x: the ensemble of both models. */
const ENSEMBLE_CONFIG = `name: "ensemble"
platform: "ensemble"
max_batch_size: 8
input [ { name: "x", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "out", data_type: TYPE_FP32, dims: [ 4 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "affine"
      model_version: -1
      input_map { key: "x" value: "x" }
      output_map { key: "y" value: "doubled" }
    },
    {
      model_name: "sum"
      model_version: 1
      input_map { key: "a" value: "doubled" }
      input_map { key: "b" value: "x" }
      output_map { key: "sum" value: "out" }
    }
  ]
}
`;

/** Versions answer differently: version n adds 4n - 3. */
const offsetOf = (version: number): number => 4 * version - 3;

async function writeAffineVersion(repository: string, version: number): Promise<void> {
  await mkdir(join(repository, 'affine', String(version)), { recursive: true });
  await writeFile(
    join(repository, 'affine', String(version), 'model.onnx'),
    affineModel([2, 2], 'batch', offsetOf(version)),
  );
}

async function tritonRepository(t: TestContext): Promise<string> {
  const repository = join(await tempDir(t, 'batchserve-triton-'), 'models');
  await writeAffineVersion(repository, 1);
  await writeAffineVersion(repository, 2);
  await writeFile(join(repository, 'affine', 'config.pbtxt'), AFFINE_CONFIG);
  await mkdir(join(repository, 'sum', '1'), { recursive: true });
  await writeFile(join(repository, 'sum', '1', 'sum.onnx'), sumModel(4));
  await writeFile(join(repository, 'sum', 'config.pbtxt'), SUM_CONFIG);
  await mkdir(join(repository, 'ensemble', '1'), { recursive: true });
  await writeFile(join(repository, 'ensemble', 'config.pbtxt'), ENSEMBLE_CONFIG);
  // Stateful: refused naming the field, while the others load.
  await mkdir(join(repository, 'counter', '1'), { recursive: true });
  await writeFile(join(repository, 'counter', 'config.pbtxt'), 'backend: "onnxruntime"\nsequence_batching { }\n');
  return repository;
}

/** One request, over v2 REST and over gRPC, each answer's outputs as plain numbers by name. */
async function inferBoth(
  server: BatchServer,
  grpc: InferenceClient,
  model: string,
  inputs: Record<string, number[][]>,
  version = '',
): Promise<{ rest: Record<string, number[]>; grpc: Record<string, number[]>; restVersion: string }> {
  const tensors = Object.entries(inputs).map(([name, rows]) => ({
    name,
    datatype: 'FP32',
    shape: [rows.length, rows[0]?.length ?? 0],
  }));
  const path = version ? `/v2/models/${model}/versions/${version}/infer` : `/v2/models/${model}/infer`;
  const rest = await call(`${server.urls.inference}${path}`, {
    body: JSON.stringify({
      inputs: tensors.map((tensor) => ({ ...tensor, data: (inputs[tensor.name] as number[][]).flat() })),
    }),
  });
  assert.equal(rest.status, 200, JSON.stringify(rest.body));
  const answer = await grpc.call('ModelInfer', {
    model_name: model,
    model_version: version,
    inputs: tensors,
    raw_input_contents: Object.values(inputs).map((rows) => Buffer.from(new Float32Array(rows.flat()).buffer)),
  });
  assert.equal(answer.error, undefined, answer.error?.details);
  const grpcOutputs: Record<string, number[]> = {};
  answer.response.outputs.forEach((output: { name: string }, index: number) => {
    const bytes = answer.response.raw_output_contents[index] as Buffer;
    grpcOutputs[output.name] = Array.from(
      new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length)),
    );
  });
  const restOutputs = Object.fromEntries(
    (rest.body.outputs as { name: string; data: number[] }[]).map((output) => [output.name, output.data]),
  );
  assert.deepEqual(restOutputs, grpcOutputs, `${model}: REST and gRPC answer the same`);
  return { rest: restOutputs, grpc: grpcOutputs, restVersion: String(rest.body.model_version) };
}

function grpcClient(t: TestContext, server: BatchServer): InferenceClient {
  const grpc = new InferenceClient(server.urls.grpc);
  t.after(() => grpc.close());
  return grpc;
}

async function restIndex(server: BatchServer): Promise<string[]> {
  const index = await call(`${server.urls.inference}/v2/repository/index`, { body: '{}' });
  return (index.body as { name: string; version?: string; state: string }[]).map(
    (entry) => `${entry.name}${entry.version ? `:${entry.version}` : ''} ${entry.state}`,
  );
}

async function grpcIndex(grpc: InferenceClient): Promise<string[]> {
  const { response } = await grpc.call('RepositoryIndex', {});
  return (response.models as { name: string; version: string; state: string }[]).map(
    (entry) => `${entry.name}${entry.version ? `:${entry.version}` : ''} ${entry.state}`,
  );
}

const affine = (version: number): number[] => ROWS.flat().map((value) => 2 * value + offsetOf(version));
const ensemble = (version: number): number[] => ROWS.flat().map((value) => 3 * value + offsetOf(version));

test('a Triton repository served as it is answers as the same models served from archives (explicit load and unload)', async (t) => {
  const repository = await tritonRepository(t);
  const server = await startTestServer(t, {
    model_repository: repository,
    model_control: 'explicit',
    load_model: ['affine', 'sum'],
  });
  const grpc = grpcClient(t, server);
  const base = server.urls.inference;

  // Start-up loads what --load-model names, under each model's policy; the refused model says why.
  assert.deepEqual(await restIndex(server), [
    'affine:1 READY',
    'affine:2 READY',
    'counter UNAVAILABLE',
    'ensemble:1 UNAVAILABLE',
    'sum:1 READY',
  ]);
  assert.deepEqual(await grpcIndex(grpc), await restIndex(server));
  const index = (await call(`${base}/v2/repository/index`, { body: '{}' })).body as { name: string; reason?: string }[];
  assert.match(index.find((entry) => entry.name === 'counter')?.reason ?? '', /config\.pbtxt: sequence_batching: /);

  // The ensemble loads through the repository extension, after the models it uses.
  const loaded = await call(`${base}/v2/repository/models/ensemble/load`, { body: '{}', headers: AUTH });
  assert.equal(loaded.status, 200, JSON.stringify(loaded.body));
  assert.equal((await grpc.call('ModelReady', { name: 'ensemble' })).response.ready, true);

  // The same folders imported into archives, served from a model store.
  const store = join(await tempDir(t), 'store');
  await importTritonModel({ source: join(repository, 'affine'), exportPath: join(store, 'v1'), version: '1' });
  for (const name of ['affine', 'sum', 'ensemble']) {
    await importTritonModel({ source: join(repository, name), exportPath: store });
  }
  const archives = await startTestServer(t, {
    models: [
      `affine=${join(store, 'v1', 'affine.mar')}`,
      `affine=${join(store, 'affine.mar')}`,
      `sum=${join(store, 'sum.mar')}`,
      `ensemble=${join(store, 'ensemble.mar')}`,
    ],
    model_policies: { affine: { default_version: '2' } },
  });
  const archiveGrpc = grpcClient(t, archives);

  const x = { x: ROWS };
  for (const [model, inputs, version, expected] of [
    ['affine', x, '', { y: affine(2) }],
    ['affine', x, '1', { y: affine(1) }],
    ['affine', x, '2', { y: affine(2) }],
    ['sum', { a: ROWS, b: ROWS }, '', { sum: ROWS.flat().map((value) => 2 * value) }],
    ['ensemble', x, '', { out: ensemble(2) }],
  ] as const) {
    const fromRepository = await inferBoth(server, grpc, model, inputs, version);
    const fromArchives = await inferBoth(archives, archiveGrpc, model, inputs, version);
    assert.deepEqual(fromRepository.rest, expected, `${model} ${version}`);
    assert.deepEqual(fromRepository.rest, fromArchives.rest, `${model} ${version}: as from archives`);
  }
  assert.equal((await inferBoth(server, grpc, 'affine', x)).restVersion, '2', 'the highest version answers');

  // The config as Triton returns it, this model's own fields kept.
  const config = (await call(`${base}/v2/models/affine/config`)).body;
  assert.deepEqual(config.version_policy, { latest: { num_versions: 2 } });
  assert.equal(config.max_batch_size, 8);
  assert.equal(config.backend, 'onnxruntime');
  assert.deepEqual(
    config.input.map((input: Record<string, unknown>) => [input.name, input.data_type, input.dims, input.reshape]),
    [['x', 'TYPE_FP32', [4], { shape: [2, 2] }]],
  );
  assert.deepEqual(config.dynamic_batching.preferred_batch_size, [2, 4]);
  assert.equal(config.dynamic_batching.max_queue_delay_microseconds, 200);
  assert.equal(config.dynamic_batching.priority_levels, 2);
  assert.deepEqual(config.dynamic_batching.default_queue_policy, {
    timeout_action: 'REJECT',
    default_timeout_microseconds: 5_000_000,
    allow_timeout_override: true,
    max_queue_size: 64,
  });
  assert.deepEqual(
    config.instance_group.map((group: Record<string, unknown>) => [group.kind, group.count]),
    [['KIND_CPU', 2]],
  );
  const sumConfig = (await grpc.call('ModelConfig', { name: 'sum' })).response.config;
  assert.equal(sumConfig.default_model_filename, 'sum.onnx');
  assert.equal(sumConfig.parameters.intra_op_thread_count.string_value, '1');
  assert.equal(sumConfig.optimization.graph.level, 1);
  assert.equal(sumConfig.response_cache.enable, true);
  assert.equal((await grpc.call('ModelConfig', { name: 'ensemble' })).response.config.platform, 'ensemble');

  // A new version folder, then a load: loaded under latest 2, the oldest drained.
  await writeAffineVersion(repository, 3);
  assert.equal((await call(`${base}/v2/repository/models/affine/load`, { body: '{}', headers: AUTH })).status, 200);
  assert.deepEqual(
    (await restIndex(server)).filter((entry) => entry.startsWith('affine')),
    ['affine:1 UNAVAILABLE', 'affine:2 READY', 'affine:3 READY'],
  );
  assert.deepEqual((await inferBoth(server, grpc, 'ensemble', x)).rest, { out: ensemble(3) }, 'steps follow');
  // Removed again, and a load over gRPC: 3 drained, 1 back within latest 2.
  await rm(join(repository, 'affine', '3'), { recursive: true });
  const reload = await grpc.call('RepositoryModelLoad', { model_name: 'affine' }, AUTH);
  assert.equal(reload.error, undefined, reload.error?.details);
  assert.deepEqual(
    (await grpcIndex(grpc)).filter((entry) => entry.startsWith('affine')),
    ['affine:1 READY', 'affine:2 READY'],
  );

  // Unload: in use by the ensemble first, then the ensemble, then the model.
  const inUse = await call(`${base}/v2/repository/models/sum/unload`, { body: '{}', headers: AUTH });
  assert.equal(inUse.body.code, 'BS_ERR_MODEL_IN_USE');
  assert.equal((await grpc.call('RepositoryModelUnload', { model_name: 'ensemble' }, AUTH)).error, undefined);
  assert.equal((await call(`${base}/v2/repository/models/sum/unload`, { body: '{}', headers: AUTH })).status, 200);
  assert.deepEqual(await restIndex(server), [
    'affine:1 READY',
    'affine:2 READY',
    'counter UNAVAILABLE',
    'ensemble:1 UNAVAILABLE',
    'sum:1 UNAVAILABLE',
  ]);
  const refused = await call(`${base}/v2/repository/models/counter/load`, { body: '{}', headers: AUTH });
  assert.equal(refused.body.code, 'BS_ERR_TRITON_CONFIG_UNSUPPORTED');
});

test('poll mode: version folders added, removed and changed, models added and removed, reach the served models at the next poll', async (t) => {
  const repository = await tritonRepository(t);
  const server = await startTestServer(t, {
    model_repository: repository,
    model_control: 'poll',
    repository_poll_secs: 3600,
  });
  const grpc = grpcClient(t, server);
  const base = server.urls.inference;
  const x = { x: ROWS };
  assert.deepEqual(await restIndex(server), [
    'affine:1 READY',
    'affine:2 READY',
    'counter UNAVAILABLE',
    'ensemble:1 READY',
    'sum:1 READY',
  ]);
  assert.equal(server.startupFailures.length, 1);
  const forbidden = await grpc.call('RepositoryModelLoad', { model_name: 'affine' }, AUTH);
  assert.equal(forbidden.error?.code, status.PERMISSION_DENIED);
  assert.match(forbidden.error?.details ?? '', /model_control: poll/);

  await writeAffineVersion(repository, 3);
  const added = await server.pollRepository();
  assert.deepEqual(added.loaded, [{ name: 'affine', version: '3' }]);
  assert.deepEqual(added.unloaded, [{ name: 'affine', version: '1' }]);
  assert.equal((await grpc.call('ModelReady', { name: 'affine', version: '1' })).error?.code, status.NOT_FOUND);
  assert.deepEqual((await inferBoth(server, grpc, 'affine', x)).rest, { y: affine(3) });
  assert.deepEqual((await inferBoth(server, grpc, 'ensemble', x)).rest, { out: ensemble(3) });

  await rm(join(repository, 'affine', '3'), { recursive: true });
  const removed = await server.pollRepository();
  assert.deepEqual(removed.unloaded, [{ name: 'affine', version: '3' }]);
  assert.deepEqual(removed.loaded, [{ name: 'affine', version: '1' }]);
  assert.deepEqual((await inferBoth(server, grpc, 'affine', x)).rest, { y: affine(2) });

  // A changed config reloads its model; a new folder without config.pbtxt loads by auto-complete.
  await writeFile(
    join(repository, 'sum', 'config.pbtxt'),
    SUM_CONFIG.replace('max_batch_size: 4', 'max_batch_size: 2'),
  );
  await mkdir(join(repository, 'plain', '1'), { recursive: true });
  await writeFile(join(repository, 'plain', '1', 'model.onnx'), affineModel([4], 'batch', 1));
  const changed = await server.pollRepository();
  assert.deepEqual(changed.failed, []);
  assert.deepEqual(changed.loaded, [
    { name: 'plain', version: '1' },
    { name: 'sum', version: '1' },
  ]);
  assert.equal((await call(`${base}/v2/models/sum/config`)).body.max_batch_size, 2);
  const plain = (await call(`${base}/v2/models/plain/config`)).body;
  assert.equal(plain.max_batch_size, 4, "Triton's auto-complete");
  assert.deepEqual(
    plain.input.map((input: Record<string, unknown>) => [input.name, input.dims]),
    [['x', [4]]],
  );

  // A model folder removed is unloaded; an ensemble goes before the model it uses.
  await rm(join(repository, 'ensemble'), { recursive: true });
  await rm(join(repository, 'sum'), { recursive: true });
  const gone = await server.pollRepository();
  assert.deepEqual(gone.failed, []);
  assert.deepEqual(gone.unloaded.map(({ name }) => name).sort(), ['ensemble', 'sum']);
  assert.deepEqual(await grpcIndex(grpc), ['affine:1 READY', 'affine:2 READY', 'counter UNAVAILABLE', 'plain:1 READY']);
});
