import assert from 'node:assert/strict';
import { test } from 'node:test';
import FakeTimers from '@sinonjs/fake-timers';
import { refusalOf, reservationRefusal } from '../../src/batching/admission.js';
import { FixedDelayPolicy } from '../../src/batching/batch-policy.js';
import type { QueuedRequest, SubmitResult } from '../../src/batching/batch-request.js';
import type { Clock } from '../../src/batching/clock.js';
import { InstancePool } from '../../src/batching/instance-pool.js';
import { RequestQueue } from '../../src/batching/request-queue.js';
import { DEFAULT_POLICY, GatedRunner, req, settle } from './harness.js';

class QueueingRunner extends GatedRunner {
  readonly queuesBatches = true;
}

function poolOf(runners: GatedRunner[]) {
  const fake = FakeTimers.createClock(1_000);
  const clock: Clock = {
    now: () => fake.now,
    setTimeout: (callback, ms) => fake.setTimeout(callback, ms),
    clearTimeout: (handle) => fake.clearTimeout(handle as FakeTimers.TimerId),
  };
  const events: string[] = [];
  const pool = new InstancePool(
    runners,
    clock,
    {},
    {
      ran: (shapeKey, rows, _timings, heldMs) => events.push(`ran ${shapeKey} ${rows} held ${heldMs}`),
      freed: () => events.push('freed'),
      answered: () => events.push('answered'),
    },
  );
  const answers: unknown[] = [];
  const queued = (value: number | string): QueuedRequest => ({
    request: req(value),
    rows: 1,
    shapeKey: 'a',
    enqueuedAt: fake.now,
    level: 1,
    trace: undefined,
    state: 'running',
    timer: undefined,
    detach: undefined,
    resolve: (result: SubmitResult) => answers.push(result.response),
    reject: (error: unknown) => answers.push((error as { code: string }).code),
  });
  return { fake, pool, events, answers, queued };
}

test('InstancePool: runs what it is given; the instance frees before its requests are answered; a bad request fails alone', async () => {
  const runner = new GatedRunner('i0');
  const { fake, pool, events, answers, queued } = poolOf([runner]);
  const taken = pool.takeIdle();
  assert.equal(taken, runner);
  pool.runningRows += 2;
  pool.dispatch(runner, [queued(1), queued('poison')], 2, undefined);
  assert.deepEqual([pool.busyCount, pool.idleCount, pool.running], [1, 0, 1]);
  fake.tick(3);
  runner.release();
  await settle();
  runner.release();
  await settle();
  runner.release();
  await settle();
  assert.deepEqual(
    answers,
    [2, 'BS_ERR_INFERENCE_INPUT'],
    'the batch failed; each ran alone and only the bad one failed',
  );
  assert.deepEqual(events, ['freed', 'answered']);
  assert.deepEqual([pool.busyCount, pool.running, pool.runningRows], [0, 0, 0]);
});

test('InstancePool: a busy instance that queues is offered a second batch a hand-over before it is expected free', async () => {
  const runner = new QueueingRunner('q0');
  const { fake, pool, events, queued } = poolOf([runner, new GatedRunner('plain')]);
  assert.equal(pool.takeIdle(), runner);
  const plain = pool.takeIdle();
  assert.ok(plain);
  pool.dispatch(plain, [queued(0)], 1, 10);
  assert.deepEqual([...pool.queueable()], [], 'an instance that does not queue is never offered one');
  pool.dispatch(runner, [queued(1)], 1, 6);
  assert.deepEqual(
    [...pool.queueable()].map(({ runner: each, sendAt }) => [each.id, sendAt]),
    [['q0', 1_006]],
  );
  assert.deepEqual(pool.freeInMs(1_002), [4, 8]);
  pool.dispatch(runner, [queued(2)], 1, 6);
  assert.deepEqual([...pool.queueable()], [], 'one batch waits behind another at most');
  fake.tick(6);
  runner.release();
  await settle();
  assert.match(events[0] ?? '', /^ran a 1 held 6$/);
  fake.tick(6);
  runner.release();
  await settle();
  assert.match(events.at(-3) ?? '', /^ran a 1 held 6$/, 'the queued batch held its instance from when the first ended');
});

test('InstancePool: exclusive work takes the next free instance before any batch and gives it back', async () => {
  const runner = new GatedRunner('i0');
  const { pool, events } = poolOf([runner]);
  let ran = '';
  const done = pool.exclusive((held) => {
    ran = held.id;
    return Promise.resolve('timed');
  });
  pool.serveExclusive();
  assert.equal(await done, 'timed');
  assert.equal(ran, 'i0');
  assert.equal(pool.idleCount, 1);
  assert.deepEqual(events, ['freed', 'answered', 'freed']);
});

test('admission: too many rows, then a full queue, then a gone client, then (auto only) the latency budget', () => {
  const runner = new GatedRunner('i0');
  const { fake, pool } = poolOf([runner]);
  const queue = new RequestQueue(
    1,
    { now: () => fake.now, setTimeout: () => 0, clearTimeout: () => undefined },
    () => {},
  );
  const policy = new FixedDelayPolicy({ ...DEFAULT_POLICY, maxBatchSize: 4, maxQueueSize: 2 });
  const state = { queue, pool, policy, flushing: false, now: fake.now };
  const code = (error: { code: string } | undefined) => error?.code;
  assert.equal(code(refusalOf(state, { rows: 5, shapeKey: 'a' }, 1)), 'BS_ERR_BATCH_TOO_LARGE');
  assert.equal(code(refusalOf(state, { rows: 3, shapeKey: 'a' }, 1)), 'BS_ERR_QUEUE_FULL');
  const gone = new AbortController();
  gone.abort();
  assert.equal(code(refusalOf(state, { rows: 1, shapeKey: 'a', signal: gone.signal }, 1)), 'BS_ERR_REQUEST_CANCELLED');
  assert.equal(refusalOf(state, { rows: 2, shapeKey: 'a' }, 1), undefined);
  queue.hold();
  queue.hold();
  assert.equal(code(reservationRefusal(state)), 'BS_ERR_QUEUE_FULL', 'held places count');
});
