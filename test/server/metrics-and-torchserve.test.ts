import { test } from 'node:test';
import assert from 'node:assert/strict';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { parseExposition } from '../metrics/prometheus-text.js';

test('metrics parse as Prometheus text, with latency histograms per model', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  await Promise.all([1, 2, 3].map((v) => call(url, { body: affineRequest([[v, v, v, v]]) })));
  await call(url, { body: '{bad' });
  const scrape = await call(`${server.urls.metrics}/metrics`);
  assert.equal(scrape.status, 200);
  assert.match(String(scrape.headers['content-type']), /^text\/plain/);
  const families = parseExposition((scrape.body as Buffer).toString('utf8'));
  for (const name of [
    'batchserve_request_duration_seconds',
    'batchserve_queue_duration_seconds',
    'batchserve_compute_duration_seconds',
    'batchserve_batch_size',
  ]) {
    const family = families.get(name);
    assert.equal(family?.type, 'histogram', name);
    const buckets = family?.samples.filter((s) => s.name === `${name}_bucket` && s.labels.model === 'affine') ?? [];
    assert.ok(buckets.length > 5, `${name} has buckets`);
    assert.ok(
      buckets.some((s) => s.labels.le === '+Inf' && s.value > 0),
      `${name} observed`,
    );
  }
  const requests = families.get('batchserve_requests_total')?.samples ?? [];
  assert.equal(requests.find((s) => s.labels.status === '200')?.value, 3);
  assert.equal(requests.find((s) => s.labels.status === '400')?.value, 1);
  assert.ok(families.has('batchserve_queue_rows'));
  assert.ok(families.has('batchserve_instances_busy'));
  assert.ok(families.has('batchserve_model_load_seconds'));
  assert.ok(families.has('process_cpu_user_seconds_total'), 'process metrics');
  assert.equal((await call(`${server.urls.metrics}/other`)).status, 404);
});

test('TorchServe routes: /ping and /predictions hand the body to the handler', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  const base = server.urls.inference;
  assert.deepEqual((await call(`${base}/ping`)).body, { status: 'Healthy' });
  const answer = await call(`${base}/predictions/affine`, { body: JSON.stringify({ x: [[1, 2, 3, 4]] }) });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.deepEqual(answer.body, { y: [[3, 5, 7, 9]] });
  assert.deepEqual((await call(`${base}/predictions/affine/1`, { body: '[[0, 0, 0, 0]]' })).body, {
    y: [[1, 1, 1, 1]],
  });
  assert.equal((await call(`${base}/predictions/affine`, { body: 'not json' })).status, 400);
  assert.equal((await call(`${base}/predictions/affine`, { body: '' })).status, 400);
  assert.equal((await call(`${base}/predictions/nope`, { body: '[]' })).status, 404);
  assert.equal((await call(`${base}/predictions/affine`)).status, 405);
});
