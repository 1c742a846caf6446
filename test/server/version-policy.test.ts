import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { validateServerConfig } from '../../src/server/server-config.js';
import { startServer } from '../../src/server/server.js';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const AUTH = { authorization: 'Bearer test-token' };

/** Packs one version of `affine` in a folder of its own and moves it to `<to>/affine-v<version>.mar`. */
async function packVersion(
  dir: string,
  to: string,
  version: string,
  options: { config?: string; handlerSource?: string } = {},
): Promise<string> {
  const own = join(dir, `v${version}`);
  await mkdir(to, { recursive: true });
  await mkdir(own, { recursive: true });
  const target = join(to, `affine-v${version}.mar`);
  await rename(await packAffine(own, { version, ...options }), target);
  return target;
}

const versionsOf = async (base: string): Promise<string[]> => (await call(`${base}/v2/models/affine`)).body.versions;

const policies = (versionPolicy: Record<string, unknown>) => ({ affine: { version_policy: versionPolicy } });

test('--models all under latest: 2 loads the two highest versions and logs the skipped one', async (t: TestContext) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  for (const version of ['1', '2', '3']) await packVersion(dir, store, version);
  const lines: Record<string, unknown>[] = [];
  const server = await startServer({
    config: validateServerConfig(
      {
        port: 0,
        management_port: 0,
        metrics_port: 0,
        grpc_port: 0,
        auth: { token: 'test-token' },
        models: ['all'],
        model_store: store,
        model_policies: policies({ latest: 2 }),
      },
      'test',
    ),
    logger: pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) }),
  });
  t.after(() => server.close());
  const base = server.urls.inference;

  assert.deepEqual(await versionsOf(base), ['2', '3']);
  const skipped = lines.filter((line) => line.msg === 'skipped by version policy');
  assert.deepEqual(
    skipped.map(({ model, version, policy }) => ({ model, version, policy })),
    [{ model: 'affine', version: '1', policy: 'latest: 2' }],
  );
  assert.deepEqual((await call(`${base}/v2/repository/index`, { method: 'POST', body: '{}' })).body, [
    { name: 'affine', version: '1', state: 'UNAVAILABLE' },
    { name: 'affine', version: '2', state: 'READY' },
    { name: 'affine', version: '3', state: 'READY' },
  ]);
});

test('registering a newer version under latest: 2 drains and unloads the oldest; its queued requests finish', async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  const slow = `export async function inference(inputs, context) {
  await new Promise((resolve) => setTimeout(resolve, 250));
  return context.builtins.tensor.inference(inputs, context);
}
`;
  const v2 = await packVersion(dir, join(dir, 'elsewhere'), '2', {
    config: 'max_batch_size: 1\n',
    handlerSource: slow,
  });
  const v3 = await packVersion(dir, join(dir, 'elsewhere'), '3');
  await packVersion(dir, store, '4');
  const server = await startTestServer(t, {
    models: [`affine=${v2}`, `affine=${v3}`],
    model_store: store,
    model_policies: policies({ latest: 2 }),
  });
  const base = server.urls.inference;
  assert.deepEqual(await versionsOf(base), ['2', '3']);

  const events: string[] = [];
  const rows = [1, 2, 3, 4, 5, 6].map((v) => [v, v, v, v]);
  const onV2 = rows.map((row) =>
    call(`${base}/v2/models/affine/versions/2/infer`, { body: affineRequest([row]) }).then((answer) => {
      events.push('v2 answer');
      return answer;
    }),
  );
  const v2Model = server.repository.get('affine', '2');
  for (let waited = 0; v2Model.queuedRows < 3; waited += 5) {
    assert.ok(waited < 5_000, 'requests queue on version 2');
    await new Promise((done) => setTimeout(done, 5));
  }

  const registered = await call(`${server.urls.management}/models?url=affine-v4.mar`, {
    method: 'POST',
    headers: AUTH,
  });
  events.push('registered');
  assert.equal(registered.status, 200, JSON.stringify(registered.body));

  const answers = await Promise.all(onV2);
  answers.forEach((answer, i) => {
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.equal(answer.body.model_version, '2');
    assert.deepEqual(answer.body.outputs[0].data, affine([rows[i] as number[]]));
  });
  assert.deepEqual(events.at(-1), 'registered', 'the register call answered after version 2 drained');
  assert.equal(v2Model.state, 'unloaded');
  assert.deepEqual(await versionsOf(base), ['3', '4']);
  const gone = await call(`${base}/v2/models/affine/versions/2/infer`, { body: affineRequest([[1, 1, 1, 1]]) });
  assert.equal(gone.status, 404);
});

test('specific: ["1", "3"] refuses version 2 with 409 BS_ERR_VERSION_POLICY before loading it', async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  const v1 = await packVersion(dir, join(dir, 'elsewhere'), '1');
  const v2 = await packVersion(dir, store, '2');
  await packVersion(dir, store, '3');
  const server = await startTestServer(t, {
    models: [`affine=${v1}`],
    model_store: store,
    model_policies: policies({ specific: ['1', '3'] }),
  });
  const management = server.urls.management;

  const refused = await call(`${management}/models?url=affine-v2.mar`, { method: 'POST', headers: AUTH });
  assert.equal(refused.status, 409);
  assert.match(refused.body.error, /version 2 is refused/);
  await assert.rejects(server.repository.load(v2), { code: 'BS_ERR_VERSION_POLICY' });
  assert.deepEqual(await versionsOf(server.urls.inference), ['1']);

  const [, version2, version3] = (
    await call(`${server.urls.inference}/v2/repository/index`, { method: 'POST', body: '{}' })
  ).body;
  assert.equal(version2.state, 'UNAVAILABLE');
  assert.match(version2.reason, /specific: 1, 3/, 'the index says why version 2 is not loaded');
  assert.deepEqual(version3, { name: 'affine', version: '3', state: 'UNAVAILABLE' });

  assert.equal((await call(`${management}/models?url=affine-v3.mar`, { method: 'POST', headers: AUTH })).status, 200);
  assert.deepEqual(await versionsOf(server.urls.inference), ['1', '3']);
});

test('v2 repository load by name loads the store versions the policy keeps', async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  for (const version of ['1', '2', '3']) await packVersion(dir, store, version);
  await mkdir(join(dir, 'other'));
  await rename(await packAffine(join(dir, 'other'), { name: 'other' }), join(store, 'renamed.mar'));
  const server = await startTestServer(t, { model_store: store, model_policies: policies({ latest: 2 }) });
  const base = server.urls.inference;
  const load = (name: string) =>
    call(`${base}/v2/repository/models/${name}/load`, {
      method: 'POST',
      body: '{}',
      headers: { authorization: 'Bearer test-token' },
    });

  assert.equal((await load('affine')).status, 200);
  assert.deepEqual(await versionsOf(base), ['2', '3']);
  assert.equal((await load('affine')).status, 200, 'loading again changes nothing');
  assert.deepEqual(await versionsOf(base), ['2', '3']);
  assert.equal((await load('renamed')).status, 404, 'found by manifest name, not file name');
  assert.equal((await load('other')).status, 200);
  assert.equal((await load('missing')).status, 404);
});

test('under latest: 2, registering a version that evicts the default moves the default to a serving version, not the new one', async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  const v2 = await packVersion(dir, join(dir, 'elsewhere'), '2');
  const v3 = await packVersion(dir, join(dir, 'elsewhere'), '3');
  await packVersion(dir, store, '4');
  const server = await startTestServer(t, {
    models: [`affine=${v2}`, `affine=${v3}`],
    model_store: store,
    model_policies: { affine: { version_policy: { latest: 2 }, default_version: '2' } },
  });
  const served = async (): Promise<string> =>
    (await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 1, 1, 1]]) })).body
      .model_version;
  assert.equal(await served(), '2');
  const registered = await call(`${server.urls.management}/models?url=affine-v4.mar`, {
    method: 'POST',
    headers: AUTH,
  });
  assert.equal(registered.status, 200, JSON.stringify(registered.body));
  assert.deepEqual(await versionsOf(server.urls.inference), ['3', '4']);
  assert.equal(await served(), '3', 'version 4 takes traffic only when made the default');
});

const servedVersion = async (base: string): Promise<string> =>
  (await call(`${base}/v2/models/affine/infer`, { body: affineRequest([[1, 1, 1, 1]]) })).headers[
    'x-model-version'
  ] as string;

const savedRouting = async (stateFile: string): Promise<unknown> =>
  JSON.parse(await readFile(stateFile, 'utf8').catch(() => '{"models":{}}')).models;

test("server.yaml's default_version survives a v2 unload and load, and is never written into the state file", async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  for (const version of ['1', '2']) await packVersion(dir, store, version);
  const stateFile = join(dir, 'state.json');
  const server = await startTestServer(t, {
    models: ['all'],
    model_store: store,
    state_file: stateFile,
    model_policies: { affine: { default_version: '1' } },
  });
  const base = server.urls.inference;
  assert.equal(await servedVersion(base), '1');
  const control = (action: string) =>
    call(`${base}/v2/repository/models/affine/${action}`, { method: 'POST', body: '{}', headers: AUTH });
  assert.equal((await control('unload')).status, 200);
  assert.equal((await control('load')).status, 200);
  assert.deepEqual(await versionsOf(base), ['1', '2']);
  assert.equal(await servedVersion(base), '1', 'the configured default, not the highest version');
  assert.deepEqual(await savedRouting(stateFile), {}, 'nothing run-time to keep');
});

test('a run-time default goes with its version: deleting it moves requests on and clears it from the state file', async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'store');
  for (const version of ['1', '2']) await packVersion(dir, store, version);
  const stateFile = join(dir, 'state.json');
  const server = await startTestServer(t, { models: ['all'], model_store: store, state_file: stateFile });
  const { inference, management } = server.urls;
  const manage = (path: string, method: string) => call(`${management}${path}`, { method, headers: AUTH });
  assert.equal((await manage('/models/affine/1/set-default', 'PUT')).status, 200);
  assert.equal(await servedVersion(inference), '1');
  assert.deepEqual(await savedRouting(stateFile), { affine: { default_version: '1' } });
  assert.equal((await manage('/models/affine/1', 'DELETE')).status, 200);
  assert.equal(await servedVersion(inference), '2');
  assert.deepEqual(await savedRouting(stateFile), {}, 'no default on a version that is gone');
});
