import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { unpackArchive } from '../../src/archive/extract.js';
import { validateServerConfig } from '../../src/server/server-config.js';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { BIN, cleanEnv, runChild, serveChild, snapshotTree, startServing } from './container-child.js';

const AUTH = { authorization: 'Bearer t0ken' };

/** An origin that counts its requests: a refusal must come before any fetch. */
async function startOrigin(t: TestContext, archive: Buffer): Promise<{ url: string; hits: () => number }> {
  let hits = 0;
  const origin = createServer((_req, res) => {
    hits += 1;
    res.end(archive);
  });
  await new Promise<void>((ready) => origin.listen(0, '127.0.0.1', ready));
  t.after(() => new Promise<void>((done) => origin.close(() => done())));
  return { url: `http://127.0.0.1:${(origin.address() as AddressInfo).port}/models/other.mar`, hits: () => hits };
}

/** server.yaml allowing the origin's downloads, with a fixed token (no key file written). */
async function allowDownloads(dir: string): Promise<string> {
  const config = join(dir, 'server.yaml');
  await writeFile(config, "allowed_urls: ['^http://127\\.0\\.0\\.1:']\nauth:\n  token: t0ken\n");
  return config;
}

const register = (management: string, url: string) =>
  call(`${management}/models?url=${encodeURIComponent(url)}`, { method: 'POST', headers: AUTH });

test('a model store that is one .mar file serves it without --models; register-by-URL is refused before any fetch', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  const before = await snapshotTree(dirname(archive));
  const origin = await startOrigin(t, Buffer.from('never fetched'));
  const served = await serveChild(t, [
    '--model-store',
    archive,
    '--config',
    await allowDownloads(dir),
    '--work-dir',
    join(dir, 'work'),
    '--state-file',
    join(dir, 'state.json'),
  ]);
  const infer = await call(`${served.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(infer.status, 200);
  const refused = await register(served.urls.management, origin.url);
  assert.equal(refused.status, 403);
  assert.equal(refused.body.code, 'BS_ERR_MODEL_STORE_READ_ONLY');
  assert.equal(origin.hits(), 0);
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  assert.deepEqual(await snapshotTree(dirname(archive)), before, 'nothing was written beside the archive');
});

test("a store folder the server's user cannot write: it serves, and register-by-URL is refused before any fetch", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'batchserve-test-'));
  t.after(async () => {
    for (const path of [dir, join(dir, 'store')]) await chmod(path, 0o755);
    await rm(dir, { recursive: true, force: true });
  });
  await packAffine(dir);
  const store = join(dir, 'store');
  const run = join(dir, 'run');
  await mkdir(run);
  // Root writes anywhere; the server runs as nobody then (setpriv), as the image's user would.
  const asRoot = process.getuid?.() === 0;
  await chmod(join(store, 'affine.mar'), 0o444);
  await chmod(run, 0o777);
  for (const path of [dir, store]) await chmod(path, 0o555);
  const before = await snapshotTree(store);
  const origin = await startOrigin(t, Buffer.from('never fetched'));
  const config = await allowDownloads(run);
  const args = ['--model-store', store, '--models', 'all', '--config', config, '--work-dir', join(run, 'work')];
  const stateFile = ['--state-file', join(run, 'state.json')];
  if (asRoot) {
    const probe = await runChild('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', 'true']).catch(
      () => ({ code: 1 }),
    );
    assert.equal(probe.code, 0, "util-linux's setpriv switches a child to nobody, who cannot write the store");
  }
  const served = asRoot
    ? await serveChildAs(t, ['--reuid', '65534', '--regid', '65534', '--clear-groups'], [...args, ...stateFile])
    : await serveChild(t, [...args, ...stateFile]);
  const infer = await call(`${served.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(infer.status, 200);
  const refused = await register(served.urls.management, origin.url);
  assert.equal(refused.status, 403);
  assert.equal(refused.body.code, 'BS_ERR_MODEL_STORE_READ_ONLY');
  assert.equal(origin.hits(), 0);
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  assert.deepEqual(await snapshotTree(store), before);
});

/** `serve` on free ports as another user, through setpriv. */
function serveChildAs(t: TestContext, setpriv: string[], args: string[]): ReturnType<typeof startServing> {
  const ports = ['--port', '0', '--management-port', '0', '--metrics-port', '0', '--grpc-port', '0'];
  // Without NODE_V8_COVERAGE: that user could not write the coverage files.
  const env = cleanEnv();
  delete env.NODE_V8_COVERAGE;
  return startServing(t, 'setpriv', [...setpriv, process.execPath, BIN, 'serve', ...ports, ...args], { env });
}

test("--model-name serves every version of the store's one model under that name; the archive's name is not served", async (t) => {
  const dir = await tempDir(t);
  const store = join(dir, 'models');
  await mkdir(store);
  await rename(await packAffine(join(dir, 'a'), { version: '1' }), join(store, 'affine-1.mar'));
  // An archive folder, linked in as Kubernetes volumes link their files.
  const unpacked = join(dir, 'unpacked-2');
  await unpackArchive(await packAffine(join(dir, 'b'), { version: '2', offset: 5 }), unpacked);
  await symlink(unpacked, join(store, 'affine-2'));
  const server = await startTestServer(t, {
    models: ['all'],
    model_store: store,
    model_name: 'sentiment',
    work_dir: join(dir, 'work'),
  });
  assert.deepEqual(server.repository.names(), ['sentiment']);
  assert.deepEqual(
    server.repository.versions('sentiment').map((model) => model.version),
    ['1', '2'],
  );
  const v1 = await call(`${server.urls.inference}/v2/models/sentiment/versions/1/infer`, {
    body: affineRequest([[1, 2, 3, 4]]),
  });
  assert.deepEqual([v1.body.model_name, v1.body.outputs[0].data], ['sentiment', [3, 5, 7, 9]]);
  const v2 = await call(`${server.urls.inference}/v2/models/sentiment/versions/2/infer`, {
    body: affineRequest([[1, 1, 1, 1]]),
  });
  assert.deepEqual([v2.body.model_version, v2.body.outputs[0].data], ['2', [7, 7, 7, 7]]);
  const byDefault = await call(`${server.urls.inference}/v2/models/sentiment/infer`, {
    body: affineRequest([[1, 1, 1, 1]]),
  });
  assert.deepEqual([byDefault.body.model_version, byDefault.body.outputs[0].data], ['1', [3, 3, 3, 3]]);
  assert.equal((await call(`${server.urls.inference}/v2/models/affine`)).status, 404);

  // The v2 repository extension knows the store's model by that name too.
  const control = (action: string) =>
    call(`${server.urls.inference}/v2/repository/models/sentiment/${action}`, {
      body: '{}',
      headers: { authorization: 'Bearer test-token' },
    });
  assert.equal((await control('unload')).status, 200);
  assert.equal(server.repository.has('sentiment'), false);
  assert.equal((await control('load')).status, 200);
  assert.deepEqual(
    server.repository.versions('sentiment').map((model) => model.version),
    ['1', '2'],
  );
  const index = await call(`${server.urls.inference}/v2/repository/index`, { body: '{}' });
  assert.deepEqual(
    index.body.map((entry: { name: string; version: string }) => `${entry.name}:${entry.version}`),
    ['sentiment:1', 'sentiment:2'],
  );
});

test('a store that is one unpacked archive folder (KServe unzips a zip storageUri) is served without --models', async (t) => {
  const dir = await tempDir(t);
  const unpacked = join(dir, 'mnt-models');
  await unpackArchive(await packAffine(dir), unpacked);
  const before = await snapshotTree(unpacked);
  const served = await serveChild(t, [
    '--model-store',
    unpacked,
    '--no-auth',
    '--work-dir',
    join(dir, 'work'),
    '--state-file',
    join(dir, 'state.json'),
  ]);
  const infer = await call(`${served.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(infer.status, 200);
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  assert.deepEqual(await snapshotTree(unpacked), before);
});

test('--model-name with a store of two models is a usage error, with an empty one an input error; before any model loads', async (t) => {
  const dir = await tempDir(t);
  await packAffine(dir);
  await packAffine(dir, { name: 'other' });
  const empty = join(dir, 'empty');
  await mkdir(empty);
  const serve = (store: string) =>
    runChild(process.execPath, [
      BIN,
      'serve',
      ...['--port', '0', '--management-port', '0', '--metrics-port', '0', '--grpc-port', '0', '--no-auth'],
      ...['--model-store', store, '--models', 'all', '--model-name', 'sentiment'],
      ...['--work-dir', join(dir, 'work'), '--state-file', join(dir, 'state.json')],
    ]);
  const [two, none] = await Promise.all([serve(join(dir, 'store')), serve(empty)]);
  assert.equal(two.code, 2);
  assert.match(two.stderr, /^batchserve: --model-name sentiment: the model store \S+ holds 2 models \(affine, other\)/);
  assert.match(two.stderr, /\[BS_ERR_USAGE\]\n$/);
  assert.equal(two.stderr.split('\n').length, 2, 'one line: no model loaded first');
  assert.equal(none.code, 1);
  assert.match(
    none.stderr,
    /^batchserve: --model-name sentiment: the model store \S+ holds no archive .*\[BS_ERR_INPUT_FILE\]\n$/,
  );
});

test('--model-name needs --models all; nothing serve writes may be inside the model store', async (t) => {
  assert.throws(
    () => validateServerConfig({ models: ['affine=a.mar'], model_name: 'sentiment' }, 'command line'),
    (error: Error & { code?: string }) => error.code === 'BS_ERR_CONFIG_INVALID' && /model_name: /.test(error.message),
  );
  assert.throws(
    () => validateServerConfig({ models: ['all'], model_name: '-bad' }, 'command line'),
    (error: Error & { code?: string }) => error.code === 'BS_ERR_CONFIG_INVALID',
  );
  const dir = await tempDir(t);
  await packAffine(dir);
  const store = join(dir, 'store');
  const before = await snapshotTree(store);
  for (const inside of [{ work_dir: join(store, 'work') }, { state_file: join(store, 'state.json') }]) {
    await assert.rejects(
      startTestServer(t, { models: ['all'], model_store: store, ...inside }),
      (error: Error & { code?: string }) =>
        error.code === 'BS_ERR_USAGE' && /inside the model store/.test(error.message),
    );
  }
  await assert.rejects(
    startTestServer(t, {
      models: ['all'],
      model_store: store,
      auth: { key_file: join(store, 'batchserve.key') },
      work_dir: join(dir, 'work'),
    }),
    (error: Error & { code?: string }) => error.code === 'BS_ERR_USAGE',
  );
  assert.deepEqual(await snapshotTree(store), before);
});
