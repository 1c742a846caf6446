import assert from 'node:assert/strict';
import { test } from 'node:test';
import FakeTimers from '@sinonjs/fake-timers';
import type { Clock } from '../../src/batching/clock.js';
import { RequestQueue } from '../../src/batching/request-queue.js';
import { req } from './harness.js';

function queueOn(priorityLevels = 2) {
  const fake = FakeTimers.createClock(1_000);
  const clock: Clock = {
    now: () => fake.now,
    setTimeout: (callback, ms) => fake.setTimeout(callback, ms),
    clearTimeout: (handle) => fake.clearTimeout(handle as FakeTimers.TimerId),
  };
  const left: string[] = [];
  const queue = new RequestQueue(priorityLevels, clock, () => left.push('left'));
  const errors: string[] = [];
  const add = (
    value: number,
    options: { rows?: number; shapeKey?: string; level?: number; timeoutUs?: number; signal?: AbortSignal } = {},
  ) =>
    queue.enqueue(req(value), {
      rows: options.rows ?? 1,
      shapeKey: options.shapeKey ?? 'a',
      level: options.level ?? priorityLevels,
      timeoutUs: options.timeoutUs ?? 0,
      signal: options.signal,
      trace: undefined,
      resolve: () => undefined,
      reject: (error: unknown) => errors.push((error as { code: string }).code),
    });
  return { fake, queue, add, left, errors };
}

const values = (batch: { request: { kind: string; body?: Buffer } }[]): number[] =>
  batch.map((queued) => Number(queued.request.body?.toString()));

test('RequestQueue: groups by shape, oldest group first; takes by priority then arrival, within the target rows', () => {
  const { fake, queue, add } = queueOn();
  add(1, { shapeKey: 'b' });
  fake.tick(1);
  add(2, { shapeKey: 'a', rows: 2 });
  add(3, { shapeKey: 'a', level: 1 });
  add(4, { shapeKey: 'a' });
  assert.deepEqual(
    queue.byAge().map((group) => group.key),
    ['b', 'a'],
  );
  assert.equal(queue.queuedRows, 5);
  assert.deepEqual([queue.rowsAhead(1), queue.rowsAhead(2)], [1, 5], 'level 1 queues behind level 1 only');
  const a = queue.byAge()[1];
  assert.ok(a);
  assert.deepEqual(values(queue.take(a, 3, false)), [3, 2], 'priority 1 first, then arrival order, up to 3 rows');
  assert.equal(a.rows, 1);
  assert.deepEqual(values(queue.take(a, 8, false)), [4]);
  assert.deepEqual(
    queue.byAge().map((group) => group.key),
    ['b'],
    'an emptied group goes',
  );
  const b = queue.byAge()[0];
  assert.ok(b);
  add(5, { shapeKey: 'b' });
  assert.deepEqual(values(queue.take(b, 8, true)), [1], 'a model that does not batch takes one request');
  assert.equal(queue.queuedRows, 1);
});

test('RequestQueue: a request larger than the target still goes alone; a timeout or an abort rejects it and frees its rows', () => {
  const { fake, queue, add, left, errors } = queueOn(1);
  add(1, { rows: 4 });
  const group = queue.byAge()[0];
  assert.ok(group);
  assert.deepEqual(values(queue.take(group, 2, false)), [1], 'the first request always fits');
  const controller = new AbortController();
  add(2, { timeoutUs: 3_000 });
  add(3, { signal: controller.signal });
  add(4);
  fake.tick(3);
  assert.deepEqual([errors, left.length, queue.queuedRows], [['BS_ERR_QUEUE_TIMEOUT'], 1, 2]);
  controller.abort();
  assert.deepEqual([errors.at(-1), left.length, queue.queuedRows], ['BS_ERR_REQUEST_CANCELLED', 2, 1]);
  const rest = queue.byAge()[0];
  assert.ok(rest);
  const [taken] = queue.take(rest, 8, false);
  assert.equal(taken?.state, 'running');
  fake.tick(60_000);
  assert.equal(left.length, 2, 'a taken request has no timer or listener left');
});

test('RequestQueue: a held place counts ahead of every level until released, once', () => {
  const { fake, queue, add } = queueOn(2);
  add(1, { level: 2 });
  const held = queue.hold();
  fake.tick(5);
  assert.deepEqual([held.heldSince, queue.reservedRows, queue.rowsAhead(1), queue.rowsAhead(2)], [1_000, 1, 1, 2]);
  held.release();
  held.release();
  assert.equal(queue.reservedRows, 0);
});
