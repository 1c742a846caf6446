import { test } from 'node:test';
import assert from 'node:assert/strict';
import { affineRequest, call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { parseExposition, samplesOf } from '../metrics/prometheus-text.js';
import { GATED_CONFIG, GATED_HANDLER, installGate, waitUntil } from './handler-gate.js';

test('metrics parse as Prometheus text, with latency histograms per model', async (t) => {
  const dir = await tempDir(t);
  const gate = installGate(t);
  const archive = await packAffine(dir, {
    config: `max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 0\n${GATED_CONFIG}`,
    handlerSource: GATED_HANDLER,
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  gate.hold();
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const affineSeries = { model: 'affine', version: '1' };
  const gauge = async (name: string): Promise<number | undefined> =>
    samplesOf(await scrapeMetrics(server), name, affineSeries)[0]?.value;

  // Before any request the autoscaling gauges read 0, not an empty series.
  assert.equal(await gauge('batchserve_pending_rows'), 0);
  assert.equal(await gauge('batchserve_queue_rows'), 0);
  // One request holds the only instance, two more queue behind it: the gauges say so.
  const answers = [call(url, { body: affineRequest([[1, 1, 1, 1]]) })];
  await gate.reached(1);
  answers.push(
    call(url, { body: affineRequest([[2, 2, 2, 2]]) }),
    call(url, {
      body: affineRequest([
        [3, 3, 3, 3],
        [4, 4, 4, 4],
      ]),
    }),
  );
  await waitUntil(() => server.repository.get('affine').queuedRows === 3, 'both are queued');
  assert.equal(await gauge('batchserve_queue_rows'), 3, 'rows, not requests');
  assert.equal(await gauge('batchserve_pending_rows'), 4, 'the 3 queued rows and the 1 running');
  assert.equal(await gauge('batchserve_instances_busy'), 1);
  assert.equal(await gauge('batchserve_instances'), 1);
  gate.openAll();
  assert.deepEqual(
    (await Promise.all(answers)).map((answer) => answer.status),
    [200, 200, 200],
  );
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
  assert.equal(samplesOf(families, 'batchserve_queue_rows', affineSeries)[0]?.value, 0, 'the queue emptied');
  assert.equal(samplesOf(families, 'batchserve_pending_rows', affineSeries)[0]?.value, 0, 'nothing running');
  assert.equal(samplesOf(families, 'batchserve_instances_busy', affineSeries)[0]?.value, 0);
  assert.equal(samplesOf(families, 'batchserve_instances', affineSeries)[0]?.value, 1);
  const [load] = samplesOf(families, 'batchserve_model_load_seconds', affineSeries);
  assert.equal(load?.labels.device, 'cpu');
  assert.ok(load && load.value > 0, 'the load time measured');
  assert.equal(load.value, server.repository.get('affine').loadSeconds);
  const batchRows = samplesOf(families, 'batchserve_batch_size_sum', affineSeries)[0]?.value;
  const batches = samplesOf(families, 'batchserve_batch_size_count', affineSeries)[0]?.value;
  assert.deepEqual([batchRows, batches], [4, 2], 'a batch of 1 row, then the 3 queued rows together');
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

test('metrics are named as Prometheus expects: only counters end in _total, one HELP and TYPE per family', async (t) => {
  const server = await startTestServer(t, { models: [`affine=${await packAffine(await tempDir(t))}`] });
  await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 1, 1, 1]]) });
  const text = ((await call(`${server.urls.metrics}/metrics`)).body as Buffer).toString('utf8');
  const types = [...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => ({ name, type }));
  const helps = [...text.matchAll(/^# HELP (\S+) /gm)].map(([, name]) => name);
  assert.ok(
    types.some(({ name }) => name === 'nodejs_active_handles'),
    'the process metrics are there',
  );
  assert.deepEqual(
    types.filter(({ name, type }) => name?.endsWith('_total') && type !== 'counter'),
    [],
    'a gauge or untyped family named *_total',
  );
  const twice = (names: (string | undefined)[]): string[] =>
    names.filter((name, index) => names.indexOf(name) !== index) as string[];
  assert.deepEqual(twice(types.map(({ name }) => name)), [], 'a TYPE given twice');
  assert.deepEqual(twice(helps), [], 'a HELP given twice');
});
