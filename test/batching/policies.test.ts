import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AutoPolicy } from '../../src/batching/auto-policy.js';
import { BatchCosts } from '../../src/batching/batch-costs.js';
import { FixedDelayPolicy, fullBatchRows, type BatchPolicy, type GroupView } from '../../src/batching/batch-policy.js';
import type { CostFit } from '../../src/batching/cost-fit.js';
import { DEFAULT_POLICY } from './harness.js';

const view = (group: Partial<GroupView>): GroupView => ({
  shapeKey: 'a',
  rows: 1,
  oldestAt: 1_000,
  freeInstances: 1,
  instances: 1,
  now: 1_000,
  flushing: false,
  ...group,
});

test('fullBatchRows: one request unbatched; max_batch_size reached; the largest preferred size reached; everything while draining', () => {
  const config = { ...DEFAULT_POLICY, maxBatchSize: 8, preferredBatchSizes: [2, 4] };
  assert.equal(fullBatchRows(config, 0, false), 0);
  assert.equal(fullBatchRows({ ...config, maxBatchSize: 0 }, 3, false), 1);
  assert.equal(fullBatchRows(config, 9, false), 8);
  assert.equal(fullBatchRows(config, 5, false), 4);
  assert.equal(fullBatchRows(config, 3, false), 2);
  assert.equal(fullBatchRows(config, 1, false), 0);
  assert.equal(fullBatchRows(config, 1, true), 8);
});

test('FixedDelayPolicy: waits until the oldest request has waited max_queue_delay, learning nothing', () => {
  const policy = new FixedDelayPolicy({ ...DEFAULT_POLICY, maxBatchSize: 8, maxQueueDelayUs: 5_000 });
  assert.deepEqual(policy.decide(view({ rows: 3, now: 1_002 })), { rows: 0, lookAgainAt: 1_005 });
  assert.deepEqual(policy.decide(view({ rows: 3, now: 1_005 })), { rows: 8, lookAgainAt: Infinity });
  assert.deepEqual(policy.decide(view({ rows: 8, now: 1_000 })), { rows: 8, lookAgainAt: Infinity });
  const zero = new FixedDelayPolicy({ ...DEFAULT_POLICY, maxQueueDelayUs: 0 });
  assert.equal(zero.decide(view({ rows: 1 })).rows, 8, 'delay 0 takes what is queued');
  assert.equal('latencyRefusal' in (policy as BatchPolicy), false, 'a fixed delay has no latency budget');
});

/** An auto policy whose costs are seeded with T(B) = 5 + 0.5·B, as at load. */
function auto(maxLatencyUs = 1_000_000) {
  const costs = new BatchCosts();
  for (const rows of [1, 4, 8]) costs.seed(rows, 5 + 0.5 * rows);
  const fits: [CostFit, number][] = [];
  const policy = new AutoPolicy({ ...DEFAULT_POLICY, adaptive: { maxLatencyUs } }, costs, {
    fitChanged: (fit, waitMs) => fits.push([fit, waitMs]),
  });
  return { policy, costs, fits };
}

test('AutoPolicy: waits for the rows its last batch owes back while they are due within c, and no longer', () => {
  const { policy } = auto();
  // A closed loop of 4: each answer is followed 1 ms later by the same 4 rows.
  for (let round = 0; round < 3; round++) {
    const at = 1_000 + round * 10;
    policy.answered('a', at, 4);
    for (let row = 0; row < 4; row++) policy.arrived('a', at + 1, 1);
  }
  policy.answered('a', 1_030, 4);
  policy.arrived('a', 1_031, 1);
  const waiting = policy.decide(view({ rows: 1, oldestAt: 1_031, now: 1_031 }));
  assert.equal(waiting.rows, 0, 'three more rows are owed, due within 1.25 ms: wait');
  assert.ok(
    waiting.lookAgainAt > 1_031 && waiting.lookAgainAt < 1_032.4,
    `looks again when they are due (${waiting.lookAgainAt})`,
  );
  // On two instances, both free, the 4 clients ride two batches of 2: this one waits for its second row only.
  assert.equal(policy.decide(view({ rows: 1, oldestAt: 1_031, now: 1_031, freeInstances: 2, instances: 2 })).rows, 0);
  policy.arrived('a', 1_031, 1);
  assert.equal(
    policy.decide(view({ rows: 2, oldestAt: 1_031, now: 1_031, freeInstances: 2, instances: 2 })).rows,
    8,
    'its share of two is in: it goes, the other instance takes the next two',
  );
  assert.equal(policy.decide(view({ rows: 1, oldestAt: 1_031, now: 1_040 })).rows, 8, 'overdue: they are not coming');
});

test('AutoPolicy: the observer hears of each refit once, with the wait last chosen', () => {
  const { policy, costs, fits } = auto();
  policy.answered('a', 1_000, 1);
  policy.answered('a', 1_010, 1);
  assert.equal(fits.length, 1, 'the same line is not told twice');
  for (const rows of [2, 3]) costs.learn('a', rows, 5 + 0.5 * rows, 5 + 0.5 * rows);
  policy.answered('a', 1_020, 3);
  assert.equal(fits.length, 2, 'a new size refits the line');
  assert.ok(Math.abs((fits[1]?.[0].c ?? 0) - 5) < 1e-9);
});

test('AutoPolicy: refuses only what the queue ahead puts past max_latency, judging a reservation by the shape that last ran', () => {
  const { policy, costs } = auto(20_000);
  const ask = (shapeKey: string | undefined, rowsAhead: number, spentMs = 0) =>
    policy.latencyRefusal({ shapeKey, rowsAhead, rows: 1, spentMs, freeInMs: [9] })?.message;
  assert.equal(ask(undefined, 20), undefined, 'nothing ran yet: no line to judge a reservation by');
  costs.of('a');
  policy.dispatched('a', 1_000, 1, undefined);
  // The instance frees in 9 ms; T(8) = 9 ms, T(1) = 5.5 ms.
  assert.equal(ask('a', 6), undefined, '7 rows: one batch, done at 17.5 ms');
  assert.match(
    ask('a', 8) ?? '',
    /expected to finish in 24 ms, past max_latency 20 ms \(8 rows queued ahead on 1 instance\)/,
    '9 rows: 8 done at 18 ms, the ninth at 23.5',
  );
  assert.match(ask(undefined, 8) ?? '', /past max_latency/, 'a reservation is judged by the last shape');
  assert.match(ask('a', 6, 3) ?? '', /expected to finish in 21 ms/, 'time spent reading the body counts');
});

test('BatchCosts: a batch is expected to hold its instance T(B) times the pace, once the line predicts', () => {
  const costs = new BatchCosts();
  assert.equal(costs.expectedMs('a', 4), undefined, 'no line yet');
  for (const rows of [1, 4, 8]) costs.seed(rows, 5 + 0.5 * rows);
  assert.ok(Math.abs((costs.expectedMs('b', 4) ?? 0) - 7) < 1e-9, 'every shape starts from the seeds');
  costs.learn('b', 4, 7, 14);
  assert.ok((costs.expectedMs('b', 4) ?? 0) > 7, 'a batch that held its instance twice as long raises the pace');
  assert.equal(costs.known('c'), undefined);
});
