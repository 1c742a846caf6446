import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { FixedQueue } from '../../src/batching/fixed-queue.js';

test('an empty queue peeks, shifts and indexes to undefined, and stays usable after', () => {
  const queue = new FixedQueue<string>(2);
  assert.equal(queue.peek(), undefined);
  assert.equal(queue.shift(), undefined);
  assert.equal(queue.at(0), undefined);
  assert.equal(queue.length, 0, 'shifting an empty queue does not drive its length negative');
  queue.push('a');
  assert.deepEqual([queue.length, queue.peek(), queue.at(0), queue.at(1)], [1, 'a', 'a', undefined]);
});

test('items come out in order when the ring has wrapped and then grown', () => {
  const queue = new FixedQueue<number>(4);
  for (let i = 0; i < 3; i++) queue.push(i);
  assert.deepEqual([queue.shift(), queue.shift()], [0, 1]);
  // Head at slot 2 of 4: these wrap round to slots 3, 0, 1, then the fifth item grows the ring.
  for (let i = 3; i < 8; i++) queue.push(i);
  assert.equal(queue.length, 6);
  assert.deepEqual(
    Array.from({ length: 7 }, (_, offset) => queue.at(offset)),
    [2, 3, 4, 5, 6, 7, undefined],
  );
  assert.deepEqual(
    Array.from({ length: 6 }, () => queue.shift()),
    [2, 3, 4, 5, 6, 7],
  );
  assert.equal(queue.peek(), undefined);
});

test('growth doubles only when full: forty items fit in a ring that started with one slot', () => {
  const queue = new FixedQueue<number>(1);
  for (let i = 0; i < 40; i++) queue.push(i);
  assert.equal(queue.length, 40);
  assert.equal(queue.at(39), 39);
  assert.equal(queue.shift(), 0);
});

test('property: any run of pushes and shifts behaves like an array used as a FIFO', () => {
  const op = fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.constant('shift' as const));
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 8 }), fc.array(op, { maxLength: 200 }), (capacity, ops) => {
      const queue = new FixedQueue<number>(capacity);
      const model: number[] = [];
      for (const step of ops) {
        if (step === 'shift') assert.equal(queue.shift(), model.shift());
        else {
          queue.push(step);
          model.push(step);
        }
        assert.equal(queue.length, model.length);
        assert.equal(queue.peek(), model[0]);
      }
      assert.deepEqual(
        Array.from({ length: model.length + 1 }, (_, offset) => queue.at(offset)),
        [...model, undefined],
      );
    }),
  );
});
