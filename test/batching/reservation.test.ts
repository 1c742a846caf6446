import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Batcher } from '../../src/batching/batcher.js';
import type { BatchRunner } from '../../src/batching/batch-runner.js';
import type { HandlerRequest } from '../../src/core/request.js';

/** An instance that never finishes, so submitted rows stay queued behind its first batch. */
const stuck: BatchRunner = {
  id: 'stuck',
  device: 'test',
  run: () => new Promise(() => {}),
};
const request: HandlerRequest = { kind: 'body', body: Buffer.from('1'), contentType: undefined, movable: false };

function batcher(maxQueueSize: number): Batcher {
  return new Batcher([stuck], {
    maxBatchSize: 4,
    maxQueueDelayUs: 0,
    preferredBatchSizes: [],
    maxQueueSize,
    defaultTimeoutUs: 0,
    priorityLevels: 1,
  });
}

test('a reservation holds one queue row until its request is queued or it is released', async () => {
  const queue = batcher(2);
  // The first submit goes straight to the (stuck) instance; the queue itself is empty again.
  void queue.submit(request, { rows: 1, shapeKey: 'a' });
  const first = queue.reserve();
  const second = queue.reserve();
  assert.equal(queue.rowsReserved, 2);
  // Refused at its headers exactly as it would be after its body: 503, Triton's wording.
  assert.throws(() => queue.reserve(), {
    code: 'BS_ERR_QUEUE_FULL',
    httpStatus: 503,
    message: 'Exceeds maximum queue size',
  });
  // Held places count against requests that come without one.
  await assert.rejects(queue.submit(request, { rows: 1, shapeKey: 'a' }), { code: 'BS_ERR_QUEUE_FULL' });
  // Submitting with a reservation hands it back before its own rows are counted.
  void queue.submit(request, { rows: 1, shapeKey: 'a', reservation: first });
  assert.deepEqual([queue.rowsQueued, queue.rowsReserved], [1, 1]);
  first.release();
  assert.equal(queue.rowsReserved, 1, 'a second release must not give back another place');
  second.release();
  second.release();
  assert.equal(queue.rowsReserved, 0);
  const third = queue.reserve();
  assert.equal(queue.rowsReserved, 1);
  // Two rows against one free place (one queued): refused even with its own reservation.
  await assert.rejects(queue.submit(request, { rows: 2, shapeKey: 'a', reservation: third }), {
    code: 'BS_ERR_QUEUE_FULL',
  });
  assert.equal(queue.rowsReserved, 0);
});
