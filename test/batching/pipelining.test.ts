import assert from 'node:assert/strict';
import { test } from 'node:test';
import { GatedRunner, settle, setup } from './harness.js';

/** A gated instance that holds a second batch while one runs, as a worker thread's message queue does. */
class QueueingRunner extends GatedRunner {
  readonly queuesBatches = true;
}

test('a full batch goes at once to a busy instance that queues, one per instance; one that does not queue gets none', async () => {
  const queueing = new QueueingRunner('q0');
  const { submit, runner } = setup({ maxBatchSize: 2, maxQueueDelayUs: 5_000 }, [queueing]);
  const answers = [0, 1, 2, 3, 4, 5].map((value) => submit(value));
  await settle();
  assert.deepEqual(
    runner.batches,
    [
      [0, 1],
      [2, 3],
    ],
    'the second full batch waits in the instance, not here',
  );
  runner.release();
  await settle();
  assert.deepEqual(runner.batches.at(-1), [4, 5], 'the third is sent once the first is answered');
  runner.release();
  runner.release();
  assert.deepEqual(
    (await Promise.all(answers)).map((answer) => answer.response),
    [0, 2, 4, 6, 8, 10],
  );

  const plain = setup({ maxBatchSize: 2, maxQueueDelayUs: 5_000 }, [new GatedRunner('p0')]);
  const more = [0, 1, 2, 3].map((value) => plain.submit(value));
  await settle();
  assert.deepEqual(plain.runner.batches, [[0, 1]], 'an instance that cannot queue gets the next batch when it frees');
  plain.runner.release();
  await settle();
  plain.runner.release();
  await Promise.all(more);
});

test('a batch that is not full is sent when the instance is expected to free (its line), formed as if it had', async () => {
  const queueing = new QueueingRunner('q0');
  const { fake, submit, batcher, runner } = setup({ maxBatchSize: 8, maxQueueDelayUs: 0 }, [queueing]);
  // T(B) = 5 + B, as timed at load: the first batch of one row frees its instance 6 ms after it starts.
  for (const rows of [1, 4, 8]) batcher.seedCost(rows, 5 + rows);
  const first = submit(1);
  await settle();
  fake.tick(1);
  const second = submit(2);
  const third = submit(3);
  await settle();
  assert.deepEqual(runner.batches, [[1]], 'delay 0 holds rows that arrive while the instance is busy');
  fake.tick(4);
  await settle();
  assert.equal(runner.batches.length, 1, 'not yet: 1 ms before the instance frees');
  fake.tick(1);
  await settle();
  assert.deepEqual(runner.batches, [[1], [2, 3]], 'sent the moment it is expected free: it starts as the first ends');
  runner.release();
  runner.release();
  assert.deepEqual(
    await Promise.all([first, second, third]).then((results) => results.map((r) => r.response)),
    [2, 4, 6],
  );
});

test("a batch's answers follow the next batch's dispatch: the instance is on its way before this thread writes them", async () => {
  const queueing = new QueueingRunner('q0');
  const { submit, runner } = setup({ maxBatchSize: 2, maxQueueDelayUs: 5_000 }, [queueing]);
  const answers = [0, 1, 2, 3, 4, 5].map((value) => submit(value));
  await settle();
  let sentWhenAnswered = 0;
  void answers[0]?.then(() => {
    sentWhenAnswered = runner.batches.length;
  });
  runner.release();
  await settle();
  assert.equal(sentWhenAnswered, 3, 'the third batch was sent before the first batch was answered');
  runner.release();
  runner.release();
  await Promise.all(answers);
});
