import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { ResponseCache } from '../../src/repository/response-cache.js';
import { samplesOf } from '../metrics/prometheus-text.js';
import { affineRequest, call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const CACHED = 'max_batch_size: 8\nresponse_cache:\n  enable: true\n';

test('a repeated request is answered from the cache: no forward pass, Triton’s cache statistics, Prometheus counters', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, { config: CACHED });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const first = await call(url, { body: affineRequest([[1, 2, 3, 4]]) });
  const again = await call(url, {
    body: affineRequest([[1, 2, 3, 4]], { outputs: [{ name: 'y', parameters: { classification: 2 } }] }),
  });
  const other = await call(url, { body: affineRequest([[1, 2, 3, 5]]) });
  assert.deepEqual(first.body.outputs[0].data, [3, 5, 7, 9]);
  assert.deepEqual(
    again.body.outputs[0].data,
    ['9.000000:3', '7.000000:2'],
    'outputs and classification apply to a cached answer',
  );
  assert.deepEqual(other.body.outputs[0].data, [3, 5, 7, 11]);

  const stats = (await call(`${server.urls.inference}/v2/models/affine/stats`)).body.model_stats[0];
  assert.equal(stats.inference_stats.cache_hit.count, 1);
  assert.equal(stats.inference_stats.cache_miss.count, 2);
  assert.ok(stats.inference_stats.cache_hit.ns > 0);
  assert.equal(stats.execution_count, 2, 'the hit ran no forward pass');
  assert.equal(stats.inference_stats.success.count, 3);
  const families = await scrapeMetrics(server);
  const value = (name: string) => samplesOf(families, name, { model: 'affine', version: '1' })[0]?.value;
  assert.equal(value('batchserve_cache_hits_total'), 1);
  assert.equal(value('batchserve_cache_misses_total'), 2);
  assert.ok((value('batchserve_cache_bytes') ?? 0) > 32);
});

test('the cache is bounded by bytes, least recently used first out, and never crosses versions or outlives one', async (t) => {
  const root = await tempDir(t);
  // One entry is 4 input floats + 4 output floats + the key's header, about 60 bytes: two fit.
  const small = 'max_batch_size: 8\nresponse_cache:\n  enable: true\n  max_bytes: 150\n';
  const v1 = await packAffine(join(root, 'v1'), { version: '1', config: small });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2, config: small });
  const server = await startTestServer(t, { models: [`affine=${v1}`, `affine=${v2}`] });
  const ask = async (version: string, row: number[]) =>
    (await call(`${server.urls.inference}/v2/models/affine/versions/${version}/infer`, { body: affineRequest([row]) }))
      .body.outputs[0].data;
  const hits = async (version: string) =>
    (await call(`${server.urls.inference}/v2/models/affine/versions/${version}/stats`)).body.model_stats[0]
      .inference_stats.cache_hit.count;

  await ask('1', [1, 0, 0, 0]);
  await ask('1', [2, 0, 0, 0]);
  await ask('1', [1, 0, 0, 0]);
  assert.equal(await hits('1'), 1);
  await ask('1', [3, 0, 0, 0]); // evicts [2…], the least recently used
  await ask('1', [2, 0, 0, 0]);
  assert.equal(await hits('1'), 1, '[2…] had been evicted');
  const evictions = samplesOf(await scrapeMetrics(server), 'batchserve_cache_evictions_total', { version: '1' });
  assert.ok((evictions[0]?.value ?? 0) >= 1);

  assert.deepEqual(await ask('2', [1, 0, 0, 0]), [4, 2, 2, 2], 'version 2 answers for itself');
  assert.equal(await hits('2'), 0);

  await server.repository.unload('affine', '1');
  await server.repository.load(v1);
  await ask('1', [1, 0, 0, 0]);
  assert.equal(await hits('1'), 0, 'a reloaded version starts with an empty cache');
});

test('TorchServe bodies are keyed by content type and bytes; equal hashes with different bytes are not a hit', () => {
  const changes = { evicted: () => undefined, sized: () => undefined };
  const cache = new ResponseCache(1_000, changes);
  const body = (bytes: Buffer, contentType: string | undefined) =>
    ({ kind: 'body', body: bytes, contentType, movable: false }) as const;
  const png = cache.keyOf(body(Buffer.from('image'), 'image/png'));
  const jpeg = cache.keyOf(body(Buffer.from('image'), 'image/jpeg'));
  assert.notEqual(png.hash, jpeg.hash);
  cache.put(png, [{ label: 'cat', score: 0.9 }]);
  assert.deepEqual(cache.get(png), [{ label: 'cat', score: 0.9 }]);
  assert.equal(cache.get(jpeg), undefined);
  // A forged collision: the same hash over other bytes is compared in full and refused.
  assert.equal(cache.get({ hash: png.hash, material: Buffer.from('something else') }), undefined);

  const tensors = (dims: number[]) =>
    ({
      kind: 'tensors',
      inputs: { x: { datatype: 'FP32', dims, data: new Float32Array([1, 2]) } },
      rows: dims[0] as number,
      movable: false,
    }) as const;
  assert.notEqual(cache.keyOf(tensors([1, 2])).hash, cache.keyOf(tensors([2, 1])).hash, 'the shape is part of the key');
  const texts = cache.keyOf({ kind: 'texts', texts: ['a b', 'c'] });
  assert.notEqual(texts.hash, cache.keyOf({ kind: 'texts', texts: ['a', 'b c'] }).hash, 'texts are keyed apart');
  const huge = cache.keyOf(body(Buffer.alloc(2_000), undefined));
  cache.put(huge, 'too big');
  assert.equal(cache.get(huge), undefined, 'an answer larger than the cache is not kept');
});
