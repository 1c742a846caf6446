import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatedRunner, setup, settle, outcome, TIMINGS } from './harness.js';
import type { BatchTimings } from '../../src/core/request.js';

test('busyInstances and the observer follow each batch from queue to instance to answer', async () => {
  const events: unknown[][] = [];
  const observer = {
    queueChanged: (rows: number) => events.push(['queue', rows]),
    pendingChanged: (rows: number) => events.push(['pending', rows]),
    busyChanged: (busy: number, total: number) => events.push(['busy', busy, total]),
    batchExecuted: (rows: number, timings: BatchTimings, id: string) => events.push(['batch', rows, timings, id]),
  };
  const runners = [new GatedRunner('i0'), new GatedRunner('i1')];
  const { submit, batcher } = setup({ maxBatchSize: 2 }, runners, observer);
  assert.equal(batcher.busyInstances, 0);
  const results = [submit(1), submit(2, { rows: 1 })];
  assert.equal(batcher.busyInstances, 1);
  runners[0]?.release();
  assert.deepEqual(await Promise.all(results.map(outcome)), [2, 4]);
  await settle();
  assert.equal(batcher.busyInstances, 0);
  // Pending rows (queued + running) stay 2 while the batch moves from the queue to the instance.
  assert.deepEqual(events, [
    ['queue', 1],
    ['pending', 1],
    ['queue', 2],
    ['pending', 2],
    ['queue', 0],
    ['pending', 2],
    ['busy', 1, 2],
    ['batch', 2, TIMINGS, 'i0'],
    ['pending', 0],
    ['busy', 0, 2],
  ]);
});

test('setRunners: new instances take queued work; a retired busy one finishes its batch and is not reused', async () => {
  const old = new GatedRunner('old');
  const busy: number[][] = [];
  const { submit, batcher } = setup({ maxBatchSize: 1, maxQueueDelayUs: 0 }, [old], {
    busyChanged: (count, total) => busy.push([count, total]),
  });
  const first = submit(1);
  const second = submit(2);
  assert.deepEqual(old.batches, [[1]]);
  const fresh = new GatedRunner('new');
  batcher.setRunners([fresh]);
  assert.deepEqual(fresh.batches, [[2]], 'the queued request goes to the new instance at once');
  assert.equal(batcher.busyInstances, 1);
  const third = submit(3);
  old.release();
  assert.equal(await outcome(first), 2, 'the retired instance still answers its running batch');
  await settle();
  assert.deepEqual(old.batches, [[1]], 'and is given nothing more');
  fresh.release();
  await settle();
  fresh.release();
  assert.deepEqual([await outcome(second), await outcome(third)], [4, 6]);
  assert.deepEqual(fresh.batches, [[2], [3]]);
  assert.deepEqual(busy.slice(0, 3), [
    [1, 1],
    [0, 1],
    [1, 1],
  ]);
});

test('setRunners keeps an instance that stays, busy or idle, and does not hand it a second batch', async () => {
  const [a, b] = [new GatedRunner('a'), new GatedRunner('b')];
  const { submit, batcher } = setup({ maxBatchSize: 1, maxQueueDelayUs: 0 }, [a, b]);
  const first = submit(1);
  batcher.setRunners([a, b]);
  assert.equal(batcher.busyInstances, 1, 'a is still busy, b still idle');
  const second = submit(2);
  const third = submit(3);
  assert.deepEqual([a.batches, b.batches], [[[1]], [[2]]]);
  a.release();
  await settle();
  assert.deepEqual(a.batches, [[1], [3]]);
  a.release();
  b.release();
  assert.deepEqual(await Promise.all([first, second, third].map(outcome)), [2, 4, 6]);
});

test('drained() resolves at once when idle, and otherwise only when the last running batch is answered', async () => {
  const { submit, batcher, runner } = setup({ maxQueueDelayUs: 0 });
  let drained = false;
  await batcher.drained();
  const running = submit(1);
  void batcher.drained().then(() => (drained = true));
  await settle();
  assert.equal(drained, false, 'nothing queued, but a batch is running');
  runner.release();
  await running;
  await settle();
  assert.equal(drained, true);
});

test('drained() waits for the batch on every instance, not just the first to finish', async () => {
  const runners = [new GatedRunner('i0'), new GatedRunner('i1')];
  const { submit, batcher } = setup({ maxBatchSize: 1, maxQueueDelayUs: 0 }, runners);
  const [first, second] = [submit(1), submit(2)];
  let drained = false;
  void batcher.drained().then(() => (drained = true));
  runners[0]?.release();
  assert.equal(await outcome(first), 2);
  await settle();
  assert.equal(drained, false, 'i1 is still running');
  runners[1]?.release();
  assert.equal(await outcome(second), 4);
  await settle();
  assert.equal(drained, true);
});

test('drained() waits for queued requests too, even when an expired one leaves the queue first', async () => {
  const { submit, batcher, runner, fake } = setup({ maxBatchSize: 1, maxQueueDelayUs: 0 });
  const results = [submit(1), submit(2, { timeoutUs: 1_000 }), submit(3)].map(outcome);
  let drained = false;
  void batcher.drained().then(() => (drained = true));
  fake.tick(1);
  await settle();
  assert.equal(drained, false, 'one running, one queued');
  runner.release();
  await settle();
  assert.equal(drained, false, 'the last one is running now');
  runner.release();
  assert.deepEqual(await Promise.all(results), [2, 'BS_ERR_QUEUE_TIMEOUT', 6]);
  await settle();
  assert.equal(drained, true);
});

test('a waiting partial batch sets one timer, due when its delay ends, rather than polling', async () => {
  const { submit, runner, fake } = setup({ maxQueueDelayUs: 5_000 });
  const first = submit(1);
  fake.tick(2);
  const second = submit(2);
  assert.equal(fake.countTimers(), 1);
  fake.next();
  assert.equal(fake.now, 1_005, 'the first timer to fire is the deadline of the oldest request');
  await settle();
  assert.deepEqual(runner.batches, [[1, 2]]);
  runner.release();
  assert.deepEqual([await outcome(first), await outcome(second)], [2, 4]);
  assert.equal(fake.countTimers(), 0);
});

test('drained() sends a partial batch without waiting out the delay; afterwards the delay applies again', async () => {
  const { submit, batcher, runner, fake } = setup({ maxQueueDelayUs: 1_000_000 });
  const first = submit(1);
  const drained = batcher.drained();
  await settle();
  assert.deepEqual(runner.batches, [[1]], 'flushed while draining');
  runner.release();
  await first;
  await drained;
  const later = submit(2);
  await settle();
  assert.deepEqual(runner.batches, [[1]], 'no longer flushing: waits for the delay');
  // A second drain works like the first.
  const again = batcher.drained();
  await settle();
  assert.deepEqual(runner.batches, [[1], [2]]);
  runner.release();
  await later;
  await again;
  assert.equal(fake.countTimers(), 0);
});

test('an expired request does not count: the next one waits its own full delay', async () => {
  const { submit, runner, fake } = setup({ maxBatchSize: 2, maxQueueDelayUs: 5_000 });
  const expired = submit(1, { timeoutUs: 1_000 });
  fake.tick(1);
  assert.equal(await outcome(expired), 'BS_ERR_QUEUE_TIMEOUT');
  fake.tick(1);
  const next = submit(2);
  fake.tick(4.9);
  await settle();
  assert.deepEqual(runner.batches, [], 'not at 5 ms after the expired one, nor as a "full" batch of 2');
  fake.tick(0.1);
  await settle();
  assert.deepEqual(runner.batches, [[2]]);
  runner.release();
  assert.equal((await next).queueNs, 5_000_000);
});

test('a request that expired mid-queue is skipped when its neighbours are batched', async () => {
  const { submit, runner, fake } = setup({ maxBatchSize: 4, maxQueueDelayUs: 0 });
  const results = [submit(0), submit(1), submit(2, { timeoutUs: 1_000 }), submit(3)].map(outcome);
  fake.tick(1);
  runner.release();
  await settle();
  assert.deepEqual(runner.batches, [[0], [1, 3]]);
  runner.release();
  assert.deepEqual(await Promise.all(results), [0, 2, 'BS_ERR_QUEUE_TIMEOUT', 6]);
});

test('max_batch_size 0: an expired request leaves no empty pass behind', async () => {
  const { submit, runner, fake } = setup({ maxBatchSize: 0, maxQueueDelayUs: 0 });
  const running = submit(0, { shapeKey: 'a' });
  const expired = submit(1, { shapeKey: 'b', timeoutUs: 1_000 });
  fake.tick(1);
  assert.equal(await outcome(expired), 'BS_ERR_QUEUE_TIMEOUT');
  runner.release();
  await running;
  await settle();
  assert.deepEqual(runner.batches, [[0]]);
});

test('the delay runs from the oldest request at any priority level', async () => {
  const { submit, runner, fake } = setup({ maxQueueDelayUs: 5_000, priorityLevels: 2 });
  const results = [submit(1, { priority: 1 })];
  fake.tick(3);
  results.push(submit(2, { priority: 2 }));
  fake.tick(2);
  await settle();
  assert.deepEqual(runner.batches, [[1, 2]], '5 ms after the priority-1 request, not after the newer one');
  runner.release();
  assert.deepEqual(await Promise.all(results.map(outcome)), [2, 4]);
});

test('the largest preferred size reached is taken, whatever order the sizes are listed in', async () => {
  const { submit, runner } = setup({ maxBatchSize: 8, preferredBatchSizes: [4, 2], maxQueueDelayUs: 1_000_000 });
  const results = [submit(0), submit(-1)];
  await settle();
  assert.deepEqual(runner.batches, [[0, -1]]);
  results.push(submit(1), submit(2), submit(3), submit(4), submit(5));
  runner.release();
  await settle();
  assert.deepEqual(runner.batches, [
    [0, -1],
    [1, 2, 3, 4],
  ]);
});

test('what is left after a batch waits for its own turn, not as if the taken rows were still there', async () => {
  const { submit, runner, fake } = setup({ maxBatchSize: 2, maxQueueDelayUs: 5_000 });
  const results = [submit(0), submit(0), submit(1), submit(2), submit(3)];
  runner.release();
  await settle();
  assert.deepEqual(runner.batches.slice(1), [[1, 2]]);
  runner.release();
  await settle();
  assert.deepEqual(runner.batches.slice(2), [], 'one row of 2 and only now free: waits for the delay');
  fake.tick(5);
  await settle();
  assert.deepEqual(runner.batches.slice(2), [[3]]);
  runner.release();
  assert.deepEqual(await Promise.all(results.map(outcome)), [0, 0, 2, 4, 6]);
});

test('when several batches become ready at once, every idle instance gets one', async () => {
  const runners = [new GatedRunner('i0'), new GatedRunner('i1'), new GatedRunner('i2')];
  const { submit, batcher } = setup({ maxBatchSize: 8, maxQueueDelayUs: 1_000_000 }, runners);
  const results = [1, 2, 3, 4].map((value) => submit(value));
  await settle();
  assert.deepEqual(
    runners.map((runner) => runner.batches),
    [[], [], []],
  );
  batcher.reconfigure({ ...batcher.batchingPolicy, maxBatchSize: 2 });
  assert.deepEqual(
    runners.map((runner) => runner.batches),
    [[[1, 2]], [[3, 4]], []],
  );
  runners.forEach((runner) => runner.release());
  assert.deepEqual(await Promise.all(results.map(outcome)), [2, 4, 6, 8]);
});

test('reconfigure refuses to change the number of priority levels', () => {
  const { batcher } = setup({ priorityLevels: 2 });
  assert.throws(() => batcher.reconfigure({ ...batcher.batchingPolicy, priorityLevels: 3 }), /priority levels/);
  assert.equal(batcher.batchingPolicy.priorityLevels, 2);
});
