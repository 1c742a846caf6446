import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ReturningRows } from '../../src/batching/returning-rows.js';
import type { BatchTimings, HandlerRequest } from '../../src/core/request.js';
import { GatedRunner, runAtCost, setup } from './harness.js';

test('ReturningRows: rows still running are owed too, due a return delay after their batch is expected to end', () => {
  const returning = new ReturningRows();
  returning.answered(0, 2);
  returning.arrived(1, 2);
  // Return delay learnt: 1 ms, so due 1 · 1.25 + 0.05 = 1.3 ms after an answer.
  returning.started(10, 2, 14);
  assert.equal(returning.owedRows(12), 2, 'the running batch’s two rows');
  assert.ok(Math.abs(returning.dueInMs(12) - 3.3) < 1e-9, 'due at 14 + 1.3');
  returning.answered(14, 2);
  assert.equal(returning.owedRows(14), 2, 'answered now: owed as before, no longer running');
  returning.arrived(14.5, 2);
  assert.equal(returning.owedRows(14.5), 0);
  returning.started(20, 3, 24);
  assert.equal(returning.owedRows(26), 0, 'a batch that ran past its due time is not waited for');
  returning.started(30, 1, 34);
  assert.equal(returning.owedRows(31), 1, 'and its rows do not linger in the next count');
});

/**
 * A gated instance that holds a second batch while one runs, as a worker thread's message
 * queue does, and reports the compute time T(B) = 5 + 0.5·B ms, as a real one reports its own.
 */
class QueueingRunner extends GatedRunner {
  readonly queuesBatches = true;
  override async run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    const { responses } = await super.run(requests);
    return {
      responses,
      timings: { computeInputNs: 0, computeInferNs: (5 + 0.5 * requests.length) * 1e6, computeOutputNs: 0 },
    };
  }
}

test('auto gathers a closed loop split into half batches on an instance that queues: the running batch’s clients are waited for', async () => {
  const runner = new QueueingRunner('q0');
  const harness = setup({ maxBatchSize: 8, maxQueueDelayUs: 0, adaptive: { maxLatencyUs: 1_000_000 } }, [runner]);
  const { fake, submit, batcher } = harness;
  for (let round = 0; round < 3; round++) for (const rows of [1, 4, 8]) batcher.seedCost(rows, 5 + 0.5 * rows);
  /** Four clients that send again 1 ms after each answer; two start 3 ms late, so the loop starts split in two. */
  const client = async (value: number, startMs: number): Promise<void> => {
    await new Promise<void>((resolve) => fake.setTimeout(() => resolve(), startMs));
    for (let turn = 0; turn < 6; turn++) {
      await submit(value);
      await new Promise<void>((resolve) => fake.setTimeout(() => resolve(), 1));
    }
  };
  const clients = [client(0, 0), client(1, 0), client(2, 3), client(3, 3)];
  let finished = false;
  void Promise.all(clients).then(() => {
    finished = true;
  });
  await runAtCost(fake, runner, () => finished, 2_000);
  await Promise.all(clients);
  const sizes = runner.batches.map((batch) => batch.length);
  assert.ok((sizes[0] as number) < 4, `the loop starts split: ${JSON.stringify(sizes)}`);
  assert.ok(
    sizes.slice(-3).every((size) => size === 4),
    `and ends in whole batches of 4: ${JSON.stringify(sizes)}`,
  );
});
