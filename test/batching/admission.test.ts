import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { setup, settle, outcome } from './harness.js';

test('a request of exactly max_batch_size rows is served; the queue fills to exactly max_queue_size', async () => {
  const { submit, runner, batcher } = setup({ maxBatchSize: 4, maxQueueSize: 6, maxQueueDelayUs: 0 });
  const full = submit(1, { rows: 4 });
  await settle();
  assert.deepEqual(runner.batches, [[1]]);
  const queued = [submit(2, { rows: 4 }), submit(3, { rows: 2 })];
  assert.equal(batcher.rowsQueued, 6);
  await assert.rejects(submit(4), { code: 'BS_ERR_QUEUE_FULL' });
  runner.release();
  assert.equal(await outcome(full), 2);
  await settle();
  runner.release();
  await settle();
  runner.release();
  assert.deepEqual(await Promise.all(queued.map(outcome)), [4, 6]);
  assert.deepEqual(runner.batches, [[1], [2], [3]]);
});

test('a request larger than max_batch_size is refused with both numbers in the message', async () => {
  const { submit, batcher } = setup({ maxBatchSize: 4 });
  await assert.rejects(submit(1, { rows: 5 }), (error: Error & { code: string; httpStatus: number }) => {
    assert.equal(error.code, 'BS_ERR_BATCH_TOO_LARGE');
    assert.match(error.message, /5 rows.*max_batch_size is 4/);
    return true;
  });
  assert.equal(batcher.rowsQueued, 0);
});

test('a request whose client has already gone is refused at once and never queued', async () => {
  const { submit, runner, batcher, fake } = setup({ maxQueueDelayUs: 0 });
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(submit(1, { signal: controller.signal }), { code: 'BS_ERR_REQUEST_CANCELLED' });
  assert.equal(batcher.rowsQueued, 0);
  fake.tick(10);
  await settle();
  assert.deepEqual(runner.batches, []);
});

test('a served request leaves no abort listener on its signal and no timer behind', async () => {
  const { submit, runner, fake } = setup({ maxQueueDelayUs: 0, defaultTimeoutUs: 60_000_000 });
  // One signal for many requests, as a server-wide shutdown signal would be.
  const shared = new AbortController().signal;
  const first = submit(1, { signal: shared });
  const second = submit(2, { signal: shared });
  assert.equal(getEventListeners(shared, 'abort').length, 1, 'the queued request listens; the dispatched one stopped');
  runner.release();
  await settle();
  assert.deepEqual(runner.batches, [[1], [2]]);
  assert.equal(getEventListeners(shared, 'abort').length, 0);
  runner.release();
  assert.deepEqual([await outcome(first), await outcome(second)], [2, 4]);
  assert.equal(getEventListeners(shared, 'abort').length, 0);
  assert.equal(fake.countTimers(), 0, 'the 60 s timeouts were cleared, not left to fire');
});

test('an expired request leaves no listener behind either, and a later abort changes nothing', async () => {
  const { submit, runner, batcher, fake } = setup({ maxQueueDelayUs: 0 });
  const running = submit(1);
  await settle();
  const controller = new AbortController();
  const expired = submit(2, { signal: controller.signal, timeoutUs: 1_000 });
  const waiting = submit(3);
  fake.tick(1);
  assert.equal(await outcome(expired), 'BS_ERR_QUEUE_TIMEOUT');
  assert.equal(getEventListeners(controller.signal, 'abort').length, 0);
  controller.abort();
  assert.equal(batcher.rowsQueued, 1, 'the expired row is counted off once');
  runner.release();
  await settle();
  runner.release();
  assert.deepEqual([await outcome(running), await outcome(waiting)], [2, 6]);
});

test('timeouts: the default applies when a request asks for none or for 0; with no default a request may set one', async () => {
  const withDefault = setup({ maxQueueDelayUs: 0, defaultTimeoutUs: 10_000 });
  const busy = withDefault.submit(0);
  await settle();
  const results = [
    withDefault.submit(1),
    withDefault.submit(2, { timeoutUs: 0 }),
    withDefault.submit(3, { timeoutUs: -5 }),
  ];
  withDefault.fake.tick(9.9);
  await settle();
  assert.equal(withDefault.batcher.rowsQueued, 3, 'still queued just before 10 ms');
  withDefault.fake.tick(0.1);
  assert.deepEqual(await Promise.all(results.map(outcome)), Array(3).fill('BS_ERR_QUEUE_TIMEOUT'));
  withDefault.runner.release();
  await busy;

  const noDefault = setup({ maxQueueDelayUs: 0, defaultTimeoutUs: 0 });
  const running = noDefault.submit(0);
  await settle();
  const own = noDefault.submit(1, { timeoutUs: 2_000 });
  const unbounded = noDefault.submit(2);
  noDefault.fake.tick(2);
  assert.equal(await outcome(own), 'BS_ERR_QUEUE_TIMEOUT');
  noDefault.fake.tick(3_600_000);
  assert.equal(noDefault.batcher.rowsQueued, 1, 'no timeout at all: still waiting an hour later');
  noDefault.runner.release();
  await settle();
  noDefault.runner.release();
  assert.deepEqual([await outcome(running), await outcome(unbounded)], [0, 4]);
});

test('a lone failing request is run once and gets its error, not retried', async () => {
  const { submit, runner } = setup({ maxQueueDelayUs: 0 });
  const failing = submit('poison');
  await settle();
  runner.release();
  assert.equal(await outcome(failing), 'BS_ERR_INFERENCE_INPUT');
  await settle();
  assert.equal(runner.batches.length, 1);
});
