import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setup, settle, GatedRunner } from './harness.js';

/**
 * Behaviours that do not hang on a fixed delay hold for both policies: `max_queue_delay: auto`
 * with no trusted fit yet must behave exactly as delay 0 (adaptive.test.ts covers its waits).
 */
const POLICIES = [
  ['delay 0', {}],
  ['auto', { adaptive: { maxLatencyUs: 1_000_000 } }],
] as const;

test('a full batch is dispatched at once, without waiting for the delay', async () => {
  const { submit, runner } = setup({ maxBatchSize: 4 });
  const results = [1, 2, 3, 4].map((v) => submit(v));
  await settle();
  assert.deepEqual(runner.batches, [[1, 2, 3, 4]]);
  runner.release();
  assert.deepEqual(
    (await Promise.all(results)).map((r) => r.response),
    [2, 4, 6, 8],
  );
  assert.ok((await results[0])?.batchRows === 4);
});

test('a partial batch waits until the oldest request has waited max_queue_delay', async () => {
  const { fake, submit, runner } = setup({ maxQueueDelayUs: 5_000 });
  const first = submit(1);
  fake.tick(3);
  const second = submit(2);
  fake.tick(1.9);
  await settle();
  assert.deepEqual(runner.batches, [], 'nothing before 5 ms');
  fake.tick(0.1);
  await settle();
  assert.deepEqual(runner.batches, [[1, 2]], 'dispatched 5 ms after the oldest, not the newest');
  runner.release();
  assert.equal((await first).queueNs, 5_000_000);
  assert.equal((await second).queueNs, 2_000_000);
});

test('a preferred batch size is dispatched at once', async () => {
  const { submit, runner } = setup({ maxBatchSize: 8, preferredBatchSizes: [2, 6], maxQueueDelayUs: 1_000_000 });
  void submit(1);
  await settle();
  assert.deepEqual(runner.batches, []);
  void submit(2);
  await settle();
  assert.deepEqual(runner.batches, [[1, 2]]);
});

for (const [policyName, policy] of POLICIES) {
  test(`delay 0 still batches under load: whatever queued while the instance was busy goes together (${policyName})`, async () => {
    const { submit, runner } = setup({ maxQueueDelayUs: 0, ...policy });
    const results = [submit(1)];
    await settle();
    assert.deepEqual(runner.batches, [[1]], 'an idle instance takes the first request alone');
    results.push(submit(2), submit(3), submit(4));
    await settle();
    assert.equal(runner.batches.length, 1, 'queued while busy');
    runner.release();
    await settle();
    assert.deepEqual(runner.batches, [[1], [2, 3, 4]]);
    runner.release();
    assert.deepEqual(
      (await Promise.all(results)).map((r) => r.response),
      [2, 4, 6, 8],
    );
  });
}

test('requests of different shapes are never stacked together', async () => {
  const { fake, submit, runner } = setup({ maxBatchSize: 8 }, [new GatedRunner('i0', false)]);
  const results = [submit(1, { shapeKey: 'a' }), submit(2, { shapeKey: 'b' }), submit(3, { shapeKey: 'a' })];
  fake.tick(5);
  await settle();
  await settle();
  assert.deepEqual(runner.batches, [[1, 3], [2]]);
  assert.deepEqual(
    (await Promise.all(results)).map((r) => r.response),
    [2, 4, 6],
  );
});

for (const [policyName, policy] of POLICIES) {
  test(`the shape group whose oldest request is oldest goes first, whatever order the groups were created in (${policyName})`, async () => {
    const { fake, submit, runner } = setup({ maxBatchSize: 8, maxQueueDelayUs: 0, ...policy });
    const running = submit(0, { shapeKey: 'busy' });
    await settle();
    // Group "b" is created first, by a request that expires; it stays first in creation order.
    const expired = submit(-1, { shapeKey: 'b', timeoutUs: 1_000 });
    fake.tick(1);
    await assert.rejects(expired, { code: 'BS_ERR_QUEUE_TIMEOUT' });
    const results = [submit(1, { shapeKey: 'a' })];
    fake.tick(1);
    results.push(submit(2, { shapeKey: 'b' }));
    fake.tick(1);
    results.push(submit(3, { shapeKey: 'a' }));
    runner.release();
    await settle();
    assert.deepEqual(runner.batches, [[0], [1, 3]], '"a" has waited since t=1, "b" only since t=2');
    runner.release();
    await settle();
    assert.deepEqual(runner.batches, [[0], [1, 3], [2]]);
    runner.release();
    await running;
    assert.deepEqual(
      (await Promise.all(results)).map((r) => r.response),
      [2, 4, 6],
    );
  });
}

test('a multi-row request counts its rows; one larger than max_batch_size is refused', async () => {
  const { submit, runner } = setup({ maxBatchSize: 4 });
  void submit(1, { rows: 3 });
  await settle();
  assert.deepEqual(runner.batches, [], '3 rows of 4: waits for more');
  void submit(2, { rows: 2 });
  await settle();
  assert.deepEqual(runner.batches, [[1]], '5 rows queued ≥ 4: the 3-row request goes; the 2-row one would overflow it');
  runner.release();
  void submit(3, { rows: 2 });
  await settle();
  assert.deepEqual(runner.batches, [[1], [2, 3]], 'two 2-row requests fill a batch of 4');
  await assert.rejects(submit(4, { rows: 5 }), { code: 'BS_ERR_BATCH_TOO_LARGE' });
});

test('the queue cap refuses with 503 "Exceeds maximum queue size"', async () => {
  const { submit } = setup({ maxQueueSize: 3, maxQueueDelayUs: 1_000_000, maxBatchSize: 8 });
  void submit(1, { rows: 2 });
  void submit(2);
  await assert.rejects(submit(3), (error: Error & { code: string; httpStatus: number }) => {
    assert.equal(error.code, 'BS_ERR_QUEUE_FULL');
    assert.equal(error.httpStatus, 503);
    assert.equal(error.message, 'Exceeds maximum queue size');
    return true;
  });
});

for (const [policyName, policy] of POLICIES) {
  test(`a request that expires while queued is answered at that moment, not when an instance frees (${policyName})`, async () => {
    const { fake, submit, runner } = setup({ maxQueueDelayUs: 0, defaultTimeoutUs: 50_000, ...policy });
    const running = submit(1);
    await settle();
    const waiting = submit(2, { timeoutUs: 10_000 });
    const longer = submit(3, { timeoutUs: 900_000 }); // may only shorten: the default 50 ms applies
    let outcome = 'pending';
    waiting.catch((error: { code: string }) => (outcome = error.code));
    fake.tick(9.9);
    await settle();
    assert.equal(outcome, 'pending');
    fake.tick(0.1);
    await settle();
    assert.equal(outcome, 'BS_ERR_QUEUE_TIMEOUT', 'rejected at 10 ms while the instance is still busy');
    fake.tick(40);
    await assert.rejects(longer, { code: 'BS_ERR_QUEUE_TIMEOUT', message: 'Request timeout expired' });
    runner.release();
    assert.equal((await running).response, 2);
    assert.deepEqual(runner.batches, [[1]], 'expired requests never ran');
  });
}

for (const [policyName, policy] of POLICIES) {
  test(`a request whose client went away is dropped from the queue and never runs (${policyName})`, async () => {
    const { submit, runner, batcher } = setup({ maxQueueDelayUs: 0, ...policy });
    const running = submit(1);
    await settle();
    const controller = new AbortController();
    const gone = submit(2, { signal: controller.signal });
    const stays = submit(3);
    controller.abort();
    await assert.rejects(gone, { code: 'BS_ERR_REQUEST_CANCELLED' });
    assert.equal(batcher.rowsQueued, 1);
    runner.release();
    await settle();
    runner.release();
    await Promise.all([running, stays]);
    assert.deepEqual(runner.batches, [[1], [3]]);
  });
}

test('a poisoned request fails alone; its batch-mates are retried one by one and succeed', async () => {
  const runner = new GatedRunner('i0', false);
  const { submit } = setup({ maxBatchSize: 3 }, [runner]);
  const results = await Promise.allSettled([submit(1), submit('poison'), submit(3)]);
  assert.deepEqual(
    results.map((r) => (r.status === 'fulfilled' ? r.value.response : (r.reason as { code: string }).code)),
    [2, 'BS_ERR_INFERENCE_INPUT', 6],
  );
  assert.equal(runner.batches.length, 4, 'one failed batch, then three solo passes');
});

for (const [policyName, policy] of POLICIES) {
  test(`priority level 1 is served before lower levels (${policyName})`, async () => {
    const { submit, runner } = setup({ maxBatchSize: 2, maxQueueDelayUs: 0, priorityLevels: 2, ...policy });
    void submit(1);
    await settle();
    void submit(2, { priority: 2 });
    void submit(3, { priority: 2 });
    void submit(4, { priority: 1 });
    runner.release();
    await settle();
    assert.deepEqual(runner.batches[1], [4, 2]);
  });
}

test('max_batch_size 0: one request per forward pass, no waiting', async () => {
  const runner = new GatedRunner('i0', false);
  const { submit } = setup({ maxBatchSize: 0, maxQueueDelayUs: 1_000_000 }, [runner]);
  await Promise.all([submit(1, { rows: 3 }), submit(2)]);
  assert.deepEqual(runner.batches, [[1], [2]]);
});

for (const [policyName, policy] of POLICIES) {
  test(`instances run batches concurrently, and drained() waits for every admitted request (${policyName})`, async () => {
    const runners = [new GatedRunner('i0'), new GatedRunner('i1')];
    const { submit, batcher } = setup({ maxBatchSize: 2, maxQueueDelayUs: 0, ...policy }, runners);
    const results = [1, 2, 3, 4, 5].map((v) => submit(v));
    await settle();
    assert.deepEqual(
      runners.map((r) => r.batches),
      [[[1]], [[2]]],
    );
    let drained = false;
    void batcher.drained().then(() => (drained = true));
    for (let round = 0; round < 3; round++) {
      runners.forEach((r) => r.release());
      await settle();
    }
    await Promise.all(results);
    await settle();
    assert.equal(drained, true);
    assert.deepEqual(
      runners
        .flatMap((r) => r.batches)
        .flat()
        .sort(),
      [1, 2, 3, 4, 5],
    );
  });
}

test('reconfigure changes batching live', async () => {
  const { submit, runner, batcher } = setup({ maxBatchSize: 8, maxQueueDelayUs: 1_000_000 });
  void submit(1);
  void submit(2);
  await settle();
  assert.deepEqual(runner.batches, []);
  batcher.reconfigure({ ...batcher.batchingPolicy, maxBatchSize: 2 });
  await settle();
  assert.deepEqual(runner.batches, [[1, 2]]);
});

for (const [policyName, policy] of POLICIES) {
  test(`exclusive work takes the next free instance before any queued batch, and gives it back (${policyName})`, async () => {
    const { submit, runner, batcher } = setup({ maxQueueDelayUs: 0, ...policy });
    const running = submit(1);
    await settle();
    const queued = submit(2);
    const order: string[] = [];
    const work = batcher.exclusive(async (held) => {
      order.push(`exclusive on ${held.id}, ${runner.batches.length} batch so far`);
      return 'timed';
    });
    await settle();
    assert.deepEqual(order, [], 'the instance is busy: the work waits');
    runner.release();
    assert.equal(await work, 'timed');
    assert.deepEqual(order, ['exclusive on i0, 1 batch so far'], 'it ran before the queued request');
    await settle();
    assert.deepEqual(runner.batches, [[1], [2]], 'then the queued request got the instance back');
    runner.release();
    await Promise.all([running, queued]);
    await batcher.drained();
  });
}

test('the batching parts stay small: no file of src/batching over 300 lines (#49)', () => {
  const folder = fileURLToPath(new URL('../../../src/batching/', import.meta.url));
  const long = readdirSync(folder)
    .filter((name) => name.endsWith('.ts'))
    .map((name) => ({ name, lines: readFileSync(join(folder, name), 'utf8').split('\n').length - 1 }))
    .filter(({ lines }) => lines > 300);
  assert.deepEqual(long, [], 'split what grew past 300 lines into a part of its own');
});
