import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { waitUntil } from './handler-gate.js';

interface Stats {
  inference_count: number;
  execution_count: number;
  inference_stats: Record<string, { count: number; ns: number }>;
  batch_stats: { batch_size: number }[];
}

async function statsOf(base: string, model = 'affine'): Promise<Stats> {
  return (await call(`${base}/v2/models/${model}/stats`)).body.model_stats[0] as Stats;
}

test('concurrent requests are batched, and each answer equals its request sent alone', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, { config: 'max_batch_size: 16\ndynamic_batching:\n  max_queue_delay: 20ms\n' });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const requests = Array.from({ length: 24 }, (_, i) =>
    Array.from({ length: 1 + (i % 3) }, (_, row) => [i, row, -i, i * 0.5]),
  );
  const answers = await Promise.all(requests.map((rows) => call(url, { body: affineRequest(rows) })));
  const stats = await statsOf(server.urls.inference);
  assert.equal(stats.inference_count, requests.flat().length);
  assert.ok(
    stats.execution_count < requests.length,
    `batched: ${stats.execution_count} passes for ${requests.length} requests`,
  );
  assert.ok(stats.batch_stats.some((entry) => entry.batch_size > 1));
  for (const [index, rows] of requests.entries()) {
    assert.equal(answers[index]?.status, 200);
    assert.deepEqual(answers[index]?.body.outputs[0].data, affine(rows), `request ${index}`);
    const alone = await call(url, { body: affineRequest(rows) });
    assert.deepEqual(alone.body.outputs, answers[index]?.body.outputs);
  }
});

test('requests of different shapes are served correctly side by side (never stacked)', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, {
    width: 'width',
    config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 600s\n',
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const rows = [[1, 2], [3, 4, 5], [6, 7], [8, 9, 10], [11]];
  const pending = rows.map((row) => call(url, { body: affineRequest([row]) }));
  // All queued before any batch goes, however slowly they arrive; then the delay is lifted.
  await waitUntil(() => server.repository.get('affine').queuedRows === rows.length, 'all are queued');
  const lifted = await call(`${server.urls.management}/models/affine?max_batch_delay=0`, {
    method: 'PUT',
    headers: { authorization: 'Bearer test-token' },
  });
  assert.equal(lifted.status, 200);
  const answers = await Promise.all(pending);
  answers.forEach((answer, index) => assert.deepEqual(answer.body.outputs[0].data, affine([rows[index] as number[]])));
  const stats = await statsOf(server.urls.inference);
  assert.equal(stats.execution_count, 3, 'one pass per distinct width');
});

test('the queue cap answers 503 with Retry-After; a queued timeout answers 503 when it expires', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, {
    config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 2s\n  max_queue_size: 3\n',
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const model = server.repository.get('affine');
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const started = Date.now();
  const timed = call(url, { body: affineRequest([[1, 1, 1, 1]], { parameters: { timeout: 150_000 } }) });
  let queuedAnswered = false;
  const queued = call(url, {
    body: affineRequest([
      [2, 2, 2, 2],
      [3, 3, 3, 3],
    ]),
  }).finally(() => (queuedAnswered = true));
  await waitUntil(() => model.queuedRows === 3, 'both requests are queued');
  const full = await call(url, { body: affineRequest([[4, 4, 4, 4]]) });
  assert.equal(full.status, 503);
  assert.deepEqual(full.body, { error: 'Exceeds maximum queue size', code: 'BS_ERR_QUEUE_FULL' });
  assert.equal(full.headers['retry-after'], '1');

  const expired = await timed;
  const waited = Date.now() - started;
  assert.equal(expired.status, 503);
  assert.deepEqual(expired.body, { error: 'Request timeout expired', code: 'BS_ERR_QUEUE_TIMEOUT' });
  // Answered when its 150 ms ran out (a lower bound, which load cannot break), while the
  // other request still waits out the 2 s delay.
  assert.ok(waited >= 140, `answered ${waited} ms after it was sent`);
  assert.equal(queuedAnswered, false, 'not answered at the 2 s delay');
  assert.equal(model.queuedRows, 2, 'only the expired request left the queue');
  const served = await queued;
  assert.equal(served.status, 200, 'the other request still ran when its delay ran out');
  assert.deepEqual(
    served.body.outputs[0].data,
    affine([
      [2, 2, 2, 2],
      [3, 3, 3, 3],
    ]),
  );
});

test("a disconnected client's request is dropped from the queue and never runs", async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, { config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 400ms\n' });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const model = server.repository.get('affine');
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const controller = new AbortController();
  const gone = request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: affineRequest([[1, 2, 3, 4]]),
    signal: controller.signal,
  });
  await waitUntil(() => model.queuedRows === 1, 'the request is queued');
  controller.abort();
  await assert.rejects(gone);
  await waitUntil(() => model.queuedRows === 0, 'the request left the queue', 10_000);
  // The next request waits out the delay and would have shared its batch with the dropped one.
  const next = await call(url, { body: affineRequest([[5, 5, 5, 5]]) });
  assert.deepEqual(next.body.outputs[0].data, affine([[5, 5, 5, 5]]));
  const stats = await statsOf(server.urls.inference);
  assert.equal(stats.execution_count, 1, 'one forward pass, for the next request only');
  assert.equal(stats.inference_count, 1, 'no row was spent on the dropped request');
  assert.equal(stats.inference_stats.fail?.count, 1);
});

test('a poisoned request fails alone; its batch-mates get their answers', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, {
    config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 50ms\n',
    handlerSource: `export async function preprocess(requests, context) {
  for (const request of requests) if (request.inputs.x.data[0] === 666) throw new Error('poisoned input');
  return context.builtins.tensor.preprocess(requests, context);
}
`,
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const rows = [
    [1, 2, 3, 4],
    [666, 0, 0, 0],
    [5, 6, 7, 8],
    [9, 9, 9, 9],
  ];
  const answers = await Promise.all(rows.map((row) => call(url, { body: affineRequest([row]) })));
  assert.deepEqual(
    answers.map((answer) => answer.status),
    [200, 500, 200, 200],
  );
  assert.match(answers[1]?.body.error, /poisoned input/);
  for (const index of [0, 2, 3])
    assert.deepEqual(answers[index]?.body.outputs[0].data, affine([rows[index] as number[]]));
  const stats = await statsOf(server.urls.inference);
  assert.equal(stats.inference_stats.fail?.count, 1);
  assert.equal(stats.inference_stats.success?.count, 3);
});
