import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, rename } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { downloadArchive } from '../../src/server/download.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const AUTH = { authorization: 'Bearer test-token' };
const KIB = Buffer.alloc(1024, 7);

/**
 * The origin a model is downloaded from, on loopback: each path fails in its own way.
 * `hits` counts the requests per path, to tell a refusal made before any fetch.
 */
async function startOrigin(t: TestContext, archive: Buffer): Promise<{ base: string; hits: Map<string, number> }> {
  const hits = new Map<string, number>();
  const routes: Record<string, (res: ServerResponse) => void> = {
    '/models/second.mar': (res) => res.end(archive),
    '/models/notes.txt': (res) => res.end('not an archive'),
    '/models/missing.mar': (res) => {
      res.writeHead(404);
      res.end('no such file');
    },
    // Half the promised body, then the connection drops.
    '/models/cut.mar': (res) => {
      res.writeHead(200, { 'content-length': archive.length });
      res.write(archive.subarray(0, archive.length >> 1), () => res.socket?.destroy());
    },
    // 3 KiB, chunked: the size is known only by counting.
    '/models/chunked.mar': (res) => {
      res.write(KIB);
      res.write(KIB);
      res.end(KIB);
    },
    '/models/declared.mar': (res) => {
      res.writeHead(200, { 'content-length': 3 * KIB.length });
      res.end(Buffer.concat([KIB, KIB, KIB]));
    },
  };
  const origin = createServer((req, res) => {
    const path = req.url ?? '';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    (routes[path] ?? ((r: ServerResponse) => r.writeHead(404).end()))(res);
  });
  await new Promise<void>((ready) => origin.listen(0, '127.0.0.1', ready));
  t.after(() => new Promise<void>((done) => origin.close(() => done())));
  return { base: `http://127.0.0.1:${(origin.address() as AddressInfo).port}`, hits };
}

/** A store holding affine.mar, and the bytes of second.mar as the origin serves it. */
async function storeAndArchive(t: TestContext): Promise<{ store: string; archive: Buffer }> {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'remote'));
  const remote = join(dir, 'remote', 'second.mar');
  await rename(await packAffine(dir, { name: 'second' }), remote);
  await packAffine(dir);
  return { store: join(dir, 'store'), archive: await readFile(remote) };
}

const listing = async (dir: string): Promise<string[]> => (await readdir(dir)).sort();

test('registering by URL: each failure answers with its status and code, and leaves the store as it was', async (t) => {
  const { store, archive } = await storeAndArchive(t);
  const { base, hits } = await startOrigin(t, archive);
  const server = await startTestServer(t, {
    models: ['all'],
    model_store: store,
    allowed_urls: ['^http://127\\.0\\.0\\.1:\\d+/'],
  });
  const before = await listing(store);
  assert.deepEqual(before, ['affine.mar']);
  const storedAffine = await readFile(join(store, 'affine.mar'));
  const register = (path: string) =>
    call(`${server.urls.management}/models?url=${encodeURIComponent(base + path)}`, { method: 'POST', headers: AUTH });

  const notArchive = await register('/models/notes.txt');
  assert.equal(notArchive.status, 400);
  assert.equal(notArchive.body.code, 'BS_ERR_USAGE');
  assert.match(notArchive.body.error, /must name a \.mar file/);

  const exists = await register('/models/affine.mar');
  assert.equal(exists.status, 409);
  assert.equal(exists.body.code, 'BS_ERR_MODEL_EXISTS');
  assert.match(exists.body.error, /affine\.mar is already in the model store/);
  assert.deepEqual(await readFile(join(store, 'affine.mar')), storedAffine, 'the stored archive is untouched');
  assert.deepEqual([...hits.keys()], [], 'both refused before fetching anything');

  const missing = await register('/models/missing.mar');
  assert.equal(missing.status, 500);
  assert.equal(missing.body.code, 'BS_ERR_MODEL_LOAD');
  assert.match(missing.body.error, /HTTP 404/);
  assert.deepEqual(await listing(store), before);

  const cut = await register('/models/cut.mar');
  assert.equal(cut.status, 500);
  assert.equal(cut.body.code, 'BS_ERR_MODEL_LOAD', 'a connection cut mid-body is an expected failure, with a code');
  assert.match(cut.body.error, /cannot fetch .*cut\.mar/);
  assert.deepEqual(await listing(store), before, 'no partial file left behind');
  assert.equal(hits.get('/models/cut.mar'), 1);

  assert.equal((await call(`${server.urls.inference}/v2/models/second/ready`)).status, 404);
  assert.equal((await register('/models/second.mar')).status, 200, 'the failures left nothing in the way');
  assert.deepEqual(await listing(store), ['affine.mar', 'second.mar']);
});

test('a download over the size cap is refused, streamed or declared, and leaves no partial file', async (t) => {
  const { store, archive } = await storeAndArchive(t);
  const { base, hits } = await startOrigin(t, archive);
  const before = await listing(store);
  const cap = 2 * KIB.length;

  await assert.rejects(downloadArchive(`${base}/models/chunked.mar`, store, { maxBytes: cap }), {
    code: 'BS_ERR_MODEL_LOAD',
    message: `${base}/models/chunked.mar is larger than ${cap} bytes`,
  });
  assert.deepEqual(await listing(store), before, 'the partial file went with the failure');

  await assert.rejects(downloadArchive(`${base}/models/declared.mar`, store, { maxBytes: cap }), {
    code: 'BS_ERR_MODEL_LOAD',
    message: `${base}/models/declared.mar is larger than ${cap} bytes`,
  });
  assert.deepEqual(await listing(store), before);
  assert.equal(hits.get('/models/declared.mar'), 1);

  const exact = await downloadArchive(`${base}/models/second.mar`, store, { maxBytes: archive.length });
  assert.equal(exact, join(store, 'second.mar'));
  assert.deepEqual(await readFile(exact), archive, 'an archive exactly at the cap is accepted whole');
});
