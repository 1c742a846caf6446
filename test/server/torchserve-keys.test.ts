import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { status } from '@grpc/grpc-js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

interface KeyFile {
  management: { key: string; 'expiration time': string };
  inference: { key: string; 'expiration time': string };
  API: { key: string };
}

const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

test("auth.mode torchserve: TorchServe's key_file.json, the inference key on model-running routes, the management key on management, /token with the API key", async (t) => {
  const dir = await tempDir(t);
  const keyFile = join(dir, 'key_file.json');
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir)}`],
    auth: { mode: 'torchserve', key_file: keyFile },
  });
  const keys = JSON.parse(await readFile(keyFile, 'utf8')) as KeyFile;
  assert.equal((await stat(keyFile)).mode & 0o777, 0o600);
  assert.equal(new Set([keys.management.key, keys.inference.key, keys.API.key]).size, 3);
  const lasts = Date.parse(keys.inference['expiration time']) - Date.now();
  assert.ok(lasts > 59 * 60_000 && lasts <= 60 * 60_000, `the inference key lasts an hour (${lasts} ms)`);

  const predict = (headers: Record<string, string> = {}) =>
    call(`${server.urls.inference}/predictions/affine`, { body: JSON.stringify([[1, 2, 3, 4]]), headers });
  const infer = (headers: Record<string, string> = {}) =>
    call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]), headers });
  for (const [what, headers] of [
    ['no key', {}],
    ['the management key', bearer(keys.management.key)],
    ['the API key', bearer(keys.API.key)],
  ] as const) {
    assert.equal((await predict(headers)).status, 401, `predictions with ${what}`);
    const refused = await infer(headers);
    assert.equal(refused.status, 401, `v2 infer with ${what}`);
    assert.equal(refused.body.code, 'BS_ERR_UNAUTHORIZED');
  }
  assert.match((await infer()).body.error, /the inference key/);
  assert.equal((await predict(bearer(keys.inference.key))).status, 200);
  assert.deepEqual((await infer(bearer(keys.inference.key))).body.outputs[0].data, affine([[1, 2, 3, 4]]));
  // Probes and descriptions stay open: Kubernetes and clients' metadata calls carry no key.
  assert.equal((await call(`${server.urls.inference}/v2/health/ready`)).status, 200);
  assert.equal((await call(`${server.urls.inference}/v2/models/affine`)).status, 200);
  const embeddings = await call(`${server.urls.inference}/v1/embeddings`, {
    body: JSON.stringify({ model: 'affine', input: 'x' }),
  });
  assert.equal(embeddings.status, 401);
  assert.equal(embeddings.body.error.type, 'authentication_error');

  const grpc = new InferenceClient(server.urls.grpc);
  t.after(() => grpc.close());
  const request = {
    model_name: 'affine',
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
    raw_input_contents: [Buffer.from(new Float32Array([1, 2, 3, 4]).buffer)],
  };
  assert.equal((await grpc.call('ModelInfer', request)).error?.code, status.UNAUTHENTICATED);
  assert.equal((await grpc.call('ModelInfer', request, bearer(keys.inference.key))).error, undefined);

  const models = `${server.urls.management}/models`;
  assert.equal((await call(models, { headers: bearer(keys.inference.key) })).status, 401);
  assert.equal((await call(models, { headers: bearer(keys.management.key) })).status, 200);

  const token = (type: string, key: string) =>
    call(`${server.urls.management}/token?type=${type}`, { headers: bearer(key) });
  assert.equal((await token('inference', keys.management.key)).status, 401, '/token wants the API key');
  assert.equal((await token('everything', keys.API.key)).status, 400);
  const renewed = await token('inference', keys.API.key);
  assert.equal(renewed.status, 200, JSON.stringify(renewed.body));
  const next = renewed.body as KeyFile;
  assert.notEqual(next.inference.key, keys.inference.key);
  assert.equal(next.management.key, keys.management.key);
  assert.deepEqual(JSON.parse(await readFile(keyFile, 'utf8')), next, 'the key file holds the new key');
  assert.equal((await predict(bearer(keys.inference.key))).status, 401, 'the old inference key is gone');
  assert.equal((await predict(bearer(next.inference.key))).status, 200);
});

test('torchserve mode: a key past auth.key_expiration is refused, saying how to get a new one', async (t) => {
  const dir = await tempDir(t);
  const keyFile = join(dir, 'key_file.json');
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir)}`],
    auth: { mode: 'torchserve', key_file: keyFile, key_expiration: '100ms' },
  });
  const keys = JSON.parse(await readFile(keyFile, 'utf8')) as KeyFile;
  await new Promise((resolve) => setTimeout(resolve, 150));
  const expired = await call(`${server.urls.management}/models`, { headers: bearer(keys.management.key) });
  assert.equal(expired.status, 401);
  assert.match(expired.body.error, /management key has expired.*GET \/token\?type=management/);
  const renewed = await call(`${server.urls.management}/token?type=management`, { headers: bearer(keys.API.key) });
  assert.equal(renewed.status, 200);
  const fresh = (renewed.body as KeyFile).management.key;
  assert.equal((await call(`${server.urls.management}/models`, { headers: bearer(fresh) })).status, 200);
});
