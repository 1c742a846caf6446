import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { pino } from 'pino';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { GATED_CONFIG, GATED_HANDLER, installGate, waitUntil, within } from './handler-gate.js';

const AUTH = { authorization: 'Bearer test-token' };

test('the management API needs the bearer token', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  const base = server.urls.management;
  const missing = await call(`${base}/models`);
  assert.equal(missing.status, 401);
  assert.match(missing.body.error, /Authorization: Bearer/);
  assert.equal((await call(`${base}/models`, { headers: { authorization: 'Bearer nope' } })).status, 401);
  assert.equal((await call(`${base}/models/affine`, { method: 'DELETE' })).status, 401);
  assert.equal((await call(`${base}/models`, { headers: AUTH })).status, 200);
  assert.equal((await call(`${server.urls.inference}/v2/models/affine`)).status, 200, 'inference needs no token');
});

test('list, describe, scale and change batching live', async (t) => {
  const dir = await tempDir(t);
  // A delay no test run reaches: the first burst can only go as one full batch of 8.
  const archive = await packAffine(dir, { config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 600s\n' });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const base = server.urls.management;
  assert.deepEqual((await call(`${base}/models`, { headers: AUTH })).body, {
    models: [{ modelName: 'affine', modelUrl: 'affine.mar' }],
  });
  const [described] = (await call(`${base}/models/affine`, { headers: AUTH })).body;
  assert.equal(described.batchSize, 8);
  assert.equal(described.maxBatchDelay, 600_000);
  assert.equal(described.loadedAtStartup, true);
  assert.deepEqual(
    described.workers.map((worker: { device: string }) => worker.device),
    ['cpu'],
  );

  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const stats = async (): Promise<{ inference_count: number; execution_count: number }> =>
    (await call(`${server.urls.inference}/v2/models/affine/stats`)).body.model_stats[0];
  const burst = async (): Promise<void> => {
    const answers = await Promise.all(
      [1, 2, 3, 4, 5, 6, 7, 8].map((v) => call(url, { body: affineRequest([[v, v, v, v]]) })),
    );
    answers.forEach((answer, i) =>
      assert.deepEqual(answer.body.outputs[0].data, affine([[i + 1, i + 1, i + 1, i + 1]])),
    );
  };
  await burst();
  const batched = await stats();
  assert.equal(batched.execution_count, 1, 'batch size 8: the burst went as one pass');

  const update = await call(`${base}/models/affine?batch_size=1&max_batch_delay=0&min_worker=2`, {
    method: 'PUT',
    headers: AUTH,
  });
  assert.equal(update.status, 200, JSON.stringify(update.body));
  const [changed] = (await call(`${base}/models/affine/1`, { headers: AUTH })).body;
  assert.equal(changed.batchSize, 1);
  assert.equal(changed.maxBatchDelay, 0);
  assert.equal(changed.workers.length, 2);
  await burst();
  const unbatched = await stats();
  assert.equal(unbatched.execution_count - batched.execution_count, 8, 'batch size 1 now: one pass per request');

  assert.equal((await call(`${base}/models/affine?batch_size=-2`, { method: 'PUT', headers: AUTH })).status, 400);
  assert.equal((await call(`${base}/models/affine?min_worker=0`, { method: 'PUT', headers: AUTH })).status, 400);
  assert.equal((await call(`${base}/models/nope`, { headers: AUTH })).status, 404);
});

test('register from the model store, versions and the default, unregister; remote URLs refused', async (t) => {
  const dir = await tempDir(t);
  const { rename } = await import('node:fs/promises');
  await rename(await packAffine(dir, { version: '2' }), join(dir, 'store', 'affine-v2.mar'));
  const first = await packAffine(dir, { version: '1' });
  await packAffine(dir, { name: 'second' });
  const server = await startTestServer(t, { models: [`affine=${first}`], model_store: join(dir, 'store') });
  const base = server.urls.management;

  const registered = await call(`${base}/models?url=second.mar&initial_workers=2&batch_size=4`, {
    method: 'POST',
    headers: AUTH,
  });
  assert.equal(registered.status, 200, JSON.stringify(registered.body));
  assert.match(registered.body.status, /Model "second" Version: 1 registered with 2 initial workers/);
  const page = await call(`${base}/models?limit=1`, { headers: AUTH });
  assert.deepEqual(page.body, { models: [{ modelName: 'affine', modelUrl: 'affine.mar' }], nextPageToken: '1' });
  assert.deepEqual(
    (await call(`${base}/models?limit=1&next_page_token=1`, { headers: AUTH })).body.models[0].modelName,
    'second',
  );
  assert.equal((await call(`${base}/models?url=second.mar`, { method: 'POST', headers: AUTH })).status, 409);
  // model_name serves an archive under another name, as TorchServe's register does.
  const renamed = await call(`${base}/models?url=second.mar&model_name=third`, { method: 'POST', headers: AUTH });
  assert.match(renamed.body.status, /Model "third" Version: 1 registered/, JSON.stringify(renamed.body));
  const third = await call(`${server.urls.inference}/v2/models/third/infer`, { body: affineRequest([[1, 1, 1, 1]]) });
  assert.equal(third.status, 200, JSON.stringify(third.body));
  assert.equal(third.body.model_name, 'third');
  assert.equal((await call(`${base}/models/third`, { method: 'DELETE', headers: AUTH })).status, 200);

  assert.equal((await call(`${base}/models?url=affine-v2.mar`, { method: 'POST', headers: AUTH })).status, 200);
  const infer = (path: string): Promise<{ body: { model_version: string } }> =>
    call(`${server.urls.inference}${path}`, { body: affineRequest([[1, 1, 1, 1]]) });
  assert.equal(
    (await infer('/v2/models/affine/infer')).body.model_version,
    '1',
    'a version registered while serving takes no traffic until it is made the default',
  );
  assert.equal((await call(`${base}/models/affine/2/set-default`, { method: 'PUT', headers: AUTH })).status, 200);
  assert.equal((await infer('/v2/models/affine/infer')).body.model_version, '2');
  assert.equal((await call(`${base}/models/affine/1/set-default`, { method: 'PUT', headers: AUTH })).status, 200);
  assert.equal((await infer('/v2/models/affine/infer')).body.model_version, '1');
  const second = await call(`${server.urls.inference}/v2/models/affine/versions/2/infer`, {
    body: affineRequest([[1, 1, 1, 1]]),
  });
  assert.equal(second.body.model_version, '2');
  assert.equal(second.headers['x-model-version'], '2', 'the answering version is in a header too');
  const predicted = await call(`${server.urls.inference}/predictions/affine/2`, { body: '[[1, 1, 1, 1]]' });
  assert.equal(predicted.headers['x-model-version'], '2');
  assert.equal((await call(`${base}/models/affine/all`, { headers: AUTH })).body.length, 2);

  assert.equal((await call(`${base}/models/second`, { method: 'DELETE', headers: AUTH })).status, 200);
  assert.equal((await call(`${server.urls.inference}/v2/models/second`)).status, 404);
  assert.equal((await call(`${base}/models/affine/2`, { method: 'DELETE', headers: AUTH })).status, 200);
  assert.equal((await infer('/v2/models/affine/infer')).body.model_version, '1');

  assert.equal((await call(`${base}/models?url=../../etc/passwd`, { method: 'POST', headers: AUTH })).status, 403);
  const remote = await call(`${base}/models?url=${encodeURIComponent('https://example.com/m.mar')}`, {
    method: 'POST',
    headers: AUTH,
  });
  assert.equal(remote.status, 403);
  assert.match(remote.body.error, /allowed_urls/);
  assert.equal((await call(`${base}/models`, { method: 'POST', headers: AUTH })).status, 400);
});

test('the v2 repository extension loads and unloads from the model store, with the management token', async (t) => {
  const dir = await tempDir(t);
  const first = await packAffine(dir);
  await packAffine(dir, { name: 'second' });
  const server = await startTestServer(t, { models: [`affine=${first}`], model_store: join(dir, 'store') });
  const base = server.urls.inference;
  const control = (path: string, headers: Record<string, string> = AUTH) =>
    call(`${base}/v2/repository/models/${path}`, { method: 'POST', body: '{}', headers });
  // The index stays open: it only reads.
  const index = await call(`${base}/v2/repository/index`, { method: 'POST', body: '{}' });
  assert.deepEqual(index.body, [
    { name: 'affine', version: '1', state: 'READY' },
    { name: 'second', version: '1', state: 'UNAVAILABLE' },
  ]);
  // Without the token, or with a wrong one, nothing is loaded or unloaded.
  for (const headers of [{}, { authorization: 'Bearer wrong' }] as Record<string, string>[]) {
    for (const path of ['second/load', 'affine/unload']) {
      const refused = await control(path, headers);
      assert.equal(refused.status, 401, `${path} with ${JSON.stringify(headers)}`);
      assert.equal(refused.body.code, 'BS_ERR_UNAUTHORIZED');
    }
  }
  assert.equal((await call(`${base}/v2/models/second`)).status, 404, 'loaded without the token');
  assert.equal((await call(`${base}/v2/models/affine/ready`)).status, 200, 'unloaded without the token');
  assert.equal((await control('second/load')).status, 200);
  assert.equal((await call(`${base}/v2/models/second/ready`)).status, 200);
  assert.equal((await control('second/unload')).status, 200);
  assert.equal((await call(`${base}/v2/models/second`)).status, 404);
  assert.equal((await control('missing/load')).status, 404);
});

test('model_control: none turns v2 load and unload off even with the token; --no-auth opens them', async (t) => {
  const dir = await tempDir(t);
  const first = await packAffine(dir);
  await packAffine(dir, { name: 'second' });
  const off = await startTestServer(t, {
    models: [`affine=${first}`],
    model_store: join(dir, 'store'),
    model_control: 'none',
  });
  for (const path of ['second/load', 'affine/unload']) {
    const refused = await call(`${off.urls.inference}/v2/repository/models/${path}`, {
      method: 'POST',
      body: '{}',
      headers: AUTH,
    });
    assert.equal(refused.status, 403, path);
    assert.equal(refused.body.code, 'BS_ERR_FORBIDDEN');
    assert.match(refused.body.error, /model_control: none/);
  }
  assert.equal((await call(`${off.urls.inference}/v2/models/affine/ready`)).status, 200);
  assert.equal((await call(`${off.urls.inference}/v2/repository/index`, { method: 'POST', body: '{}' })).status, 200);
  const open = await startTestServer(t, {
    models: [`affine=${first}`],
    model_store: join(dir, 'store'),
    auth: { enabled: false },
  });
  const load = await call(`${open.urls.inference}/v2/repository/models/second/load`, { method: 'POST', body: '{}' });
  assert.equal(load.status, 200);
});

test('while a model unloads it is not ready: new requests get 503, admitted ones finish', async (t) => {
  const dir = await tempDir(t);
  const gate = installGate(t);
  const archive = await packAffine(dir, { config: `max_batch_size: 8\n${GATED_CONFIG}`, handlerSource: GATED_HANDLER });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  gate.hold();
  const base = server.urls.inference;
  const model = server.repository.get('affine');
  const admitted = call(`${base}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  await gate.reached(1);
  const unloading = call(`${server.urls.management}/models/affine`, { method: 'DELETE', headers: AUTH });
  await waitUntil(() => model.state === 'unloading', 'the unload has begun');
  const refused = await within(
    call(`${base}/v2/models/affine/infer`, { body: affineRequest([[1, 1, 1, 1]]) }),
    10_000,
    'refused while the admitted request holds the instance',
  );
  assert.equal(refused.status, 503);
  assert.match(refused.body.error, /unloading/);
  assert.deepEqual((await call(`${base}/v2/models/affine/ready`)).body, { name: 'affine', ready: false });
  assert.deepEqual((await call(`${base}/v2/health/ready`)).body, { ready: false });
  assert.equal(model.state, 'unloading', 'the unload waits for the admitted request');
  gate.release();
  assert.equal((await admitted).status, 200, 'the admitted request finished');
  assert.equal((await unloading).status, 200);
  assert.equal((await call(`${base}/v2/models/affine`)).status, 404);
});

test('an allow-listed URL is downloaded into the model store and registered; --models all loads the store', async (t) => {
  const dir = await tempDir(t);
  const { readFile, mkdir, rename } = await import('node:fs/promises');
  const { createServer } = await import('node:http');
  await mkdir(join(dir, 'remote'));
  const remote = join(dir, 'remote', 'second.mar');
  await rename(await packAffine(dir, { name: 'second' }), remote);
  const bytes = await readFile(remote);
  const files = createServer((_req, res) => res.end(bytes));
  await new Promise<void>((ready) => files.listen(0, '127.0.0.1', ready));
  t.after(() => new Promise<void>((done) => files.close(() => done())));
  const { port } = files.address() as { port: number };

  await packAffine(dir);
  const server = await startTestServer(t, {
    models: ['all'],
    model_store: join(dir, 'store'),
    allowed_urls: ['^http://127\\.0\\.0\\.1:\\d+/'],
  });
  assert.equal(
    (await call(`${server.urls.inference}/v2/models/affine/ready`)).status,
    200,
    '--models all loaded the store',
  );
  const url = encodeURIComponent(`http://127.0.0.1:${port}/models/second.mar`);
  const registered = await call(`${server.urls.management}/models?url=${url}`, { method: 'POST', headers: AUTH });
  assert.equal(registered.status, 200, JSON.stringify(registered.body));
  assert.deepEqual(await readFile(join(dir, 'store', 'second.mar')), bytes, 'kept in the model store');
  assert.equal((await call(`${server.urls.inference}/v2/models/second/ready`)).status, 200);
});

test('a refused register or scale changes nothing: every parameter is checked before any is applied', async (t) => {
  const dir = await tempDir(t);
  const first = await packAffine(dir);
  await packAffine(dir, { name: 'second' });
  await packAffine(dir, { name: 'single', config: 'max_batch_size: 0\n' });
  const server = await startTestServer(t, { models: [`affine=${first}`], model_store: join(dir, 'store') });
  const base = server.urls.management;
  const loaded = async (name: string): Promise<boolean> =>
    (await call(`${server.urls.inference}/v2/models/${name}`)).status === 200;

  for (const query of ['initial_workers=0', 'batch_size=abc', 'min_worker=3&max_worker=2', 'max_worker=0']) {
    const refused = await call(`${base}/models?url=second.mar&${query}`, { method: 'POST', headers: AUTH });
    assert.equal(refused.status, 400, query);
    assert.equal(refused.body.code, 'BS_ERR_USAGE', query);
    assert.equal(await loaded('second'), false, `${query}: not loaded`);
  }
  const both = await call(`${base}/models?url=second.mar&batch_size=x&initial_workers=0`, {
    method: 'POST',
    headers: AUTH,
  });
  assert.match(both.body.error, /batch_size.*; initial_workers/, 'every problem at once');
  // Only the loaded model can say it does not batch: it is unloaded again, not left serving.
  const single = await call(`${base}/models?url=single.mar&batch_size=4`, { method: 'POST', headers: AUTH });
  assert.equal(single.status, 400);
  assert.match(single.body.error, /does not batch/);
  assert.equal(await loaded('single'), false);
  const registered = await call(`${base}/models?url=second.mar&initial_workers=2&max_worker=3`, {
    method: 'POST',
    headers: AUTH,
  });
  assert.equal(registered.status, 200, 'no 409: the refused attempts left nothing loaded');

  const described = async (): Promise<{ batchSize: number; workers: unknown[]; maxWorkers: number }> =>
    (await call(`${base}/models/affine/1`, { headers: AUTH })).body[0];
  const before = await described();
  for (const query of [
    'batch_size=7&min_worker=0',
    'batch_size=7&min_worker=3&max_worker=2',
    'batch_size=7&max_worker=x',
  ]) {
    const refused = await call(`${base}/models/affine/1?${query}`, { method: 'PUT', headers: AUTH });
    assert.equal(refused.status, 400, query);
    assert.deepEqual(await described(), before, `${query}: batch size and workers unchanged`);
  }
  const scaled = await call(`${base}/models/affine/1?min_worker=2&max_worker=3`, { method: 'PUT', headers: AUTH });
  assert.equal(scaled.status, 200);
  assert.equal((await described()).workers.length, 2, 'the count is min_worker');
  await call(`${base}/models/affine/1?min_worker=3`, { method: 'PUT', headers: AUTH });
  const capped = await call(`${base}/models/affine/1?max_worker=1`, { method: 'PUT', headers: AUTH });
  assert.equal(capped.status, 200);
  assert.equal((await described()).workers.length, 1, 'max_worker alone lowers a larger count to it');
  assert.equal((await described()).maxWorkers, 1);
});

test('the repository index gives no stale reason: a 409 for a version already loaded is not kept after its unload', async (t) => {
  const dir = await tempDir(t);
  const first = await packAffine(dir);
  await packAffine(dir, { name: 'second' });
  const server = await startTestServer(t, { models: [`affine=${first}`], model_store: join(dir, 'store') });
  const base = server.urls.management;
  const register = (): Promise<{ status: number }> =>
    call(`${base}/models?url=second.mar`, { method: 'POST', headers: AUTH });
  assert.equal((await register()).status, 200);
  assert.equal((await register()).status, 409);
  assert.equal((await call(`${base}/models/second`, { method: 'DELETE', headers: AUTH })).status, 200);
  const index = await call(`${server.urls.inference}/v2/repository/index`, { method: 'POST', body: '{}' });
  assert.deepEqual(index.body, [
    { name: 'affine', version: '1', state: 'READY' },
    { name: 'second', version: '1', state: 'UNAVAILABLE' },
  ]);
});

test("a v2 repository load's config sets batch size, queue delay and instance count; other keys are refused and change nothing", async (t) => {
  const dir = await tempDir(t);
  const first = await packAffine(dir);
  await packAffine(dir, { name: 'second' });
  await packAffine(dir, { name: 'single', config: 'max_batch_size: 0\n' });
  const server = await startTestServer(t, { models: [`affine=${first}`], model_store: join(dir, 'store') });
  const base = server.urls.inference;
  const load = (name: string, parameters: Record<string, unknown>) =>
    call(`${base}/v2/repository/models/${name}/load`, {
      method: 'POST',
      body: JSON.stringify({ parameters }),
      headers: AUTH,
    });
  const configOf = async (name: string) => {
    const config = (await call(`${base}/v2/models/${name}/config`)).body;
    return {
      max_batch_size: config.max_batch_size,
      delay: config.dynamic_batching.max_queue_delay_microseconds,
      instances: config.instance_group.reduce((sum: number, group: { count: number }) => sum + group.count, 0),
    };
  };
  const wanted = {
    max_batch_size: 4,
    dynamic_batching: { max_queue_delay_microseconds: 2000 },
    instance_group: [{ count: 2 }],
  };
  const loaded = await load('second', { config: JSON.stringify({ name: 'second', ...wanted }) });
  assert.equal(loaded.status, 200, JSON.stringify(loaded.body));
  assert.deepEqual(await configOf('second'), { max_batch_size: 4, delay: 2000, instances: 2 });

  // Loaded already: the config applies to the loaded version, as Triton's reload with a config.
  assert.equal((await load('affine', { config: '{"max_batch_size": 2}' })).status, 200);
  assert.deepEqual(await configOf('affine'), { max_batch_size: 2, delay: 1000, instances: 1 });

  for (const [what, parameters] of [
    ['a key we cannot set', { config: '{"max_batch_size": 3, "input": []}' }],
    ['a batching field we cannot set', { config: '{"dynamic_batching": {"preferred_batch_size": [2]}}' }],
    ['a device kind', { config: '{"instance_group": [{"count": 3, "kind": "KIND_GPU"}]}' }],
    ['another model name', { config: '{"name": "other", "max_batch_size": 3}' }],
    ['not JSON', { config: '{max_batch_size' }],
    ['a file override', { config: '{"max_batch_size": 3}', 'file:1/model.onnx': 'AAAA' }],
  ] as const) {
    const refused = await load('affine', parameters);
    assert.equal(refused.status, 400, what);
    assert.equal(refused.body.code, 'BS_ERR_USAGE', what);
    assert.deepEqual(await configOf('affine'), { max_batch_size: 2, delay: 1000, instances: 1 }, `${what}: unchanged`);
  }
  const unknown = await load('affine', { config: '{"version_policy": {"latest": {}}}' });
  assert.match(unknown.body.error, /version_policy cannot be set by a load here.*may set max_batch_size/);
  const single = await load('single', { config: '{"max_batch_size": 4}' });
  assert.equal(single.status, 400);
  assert.match(single.body.error, /does not batch/);
  assert.equal((await call(`${base}/v2/models/single`)).status, 404, 'the load that was refused left nothing loaded');
});

test('a server started on an empty model store says so and is not ready until a model is registered', async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  const { mkdir, rename } = await import('node:fs/promises');
  await mkdir(store);
  const lines: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => lines.push(line) });
  const server = await startTestServer(t, { models: ['all'], model_store: store }, logger);
  assert.ok(
    lines.some((line) => /serving no models/.test(line)),
    lines.join(''),
  );
  assert.equal((await call(`${server.urls.inference}/v2/health/live`)).status, 200);
  const before = await call(`${server.urls.inference}/v2/health/ready`);
  assert.deepEqual([before.status, before.body], [503, { ready: false }]);
  assert.deepEqual((await call(`${server.urls.inference}/ping`)).body, { status: 'Unhealthy' });
  await rename(await packAffine(dir), join(store, 'affine.mar'));
  const registered = await call(`${server.urls.management}/models?url=affine.mar`, { method: 'POST', headers: AUTH });
  assert.equal(registered.status, 200, JSON.stringify(registered.body));
  assert.equal((await call(`${server.urls.inference}/v2/health/ready`)).status, 200);
});
