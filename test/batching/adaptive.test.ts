import assert from 'node:assert/strict';
import { test } from 'node:test';
import { adaptiveWaitMs, type WaitQuestion } from '../../src/batching/adaptive-delay.js';
import { ArrivalRate } from '../../src/batching/arrival-rate.js';
import { OnlineCostFit, type CostFit } from '../../src/batching/cost-fit.js';
import { GatedRunner, settle, setup } from './harness.js';

const TRUSTED: CostFit = { c: 5, m: 0.5, r2: 1, sizes: 4, trusted: true, reason: undefined };
const ask = (question: Partial<WaitQuestion>): number =>
  adaptiveWaitMs({
    queuedRows: 1,
    maxBatchSize: 8,
    freeInstances: 1,
    oldestWaitMs: 0,
    gapMs: 1,
    maxLatencyMs: 1_000,
    fit: TRUSTED,
    ...question,
  });

test('the wait rule: hold for the next row only while Δ < (c − q·m)/(q + 1), one free instance, inside the budget', () => {
  // c = 5, m = 0.5: break-even gaps 2.25 ms (q = 1), 1.33 (q = 2), 0.875 (q = 3), 0.6 (q = 4).
  assert.equal(ask({ gapMs: 1 }), 1, 'q = 1, rows 1 ms apart: wait one gap');
  assert.equal(ask({ gapMs: 2.2 }), 2.2);
  assert.equal(ask({ gapMs: 2.3 }), 0, 'just past break-even: dispatch');
  assert.equal(ask({ queuedRows: 3, gapMs: 1 }), 0, 'q = 3 already amortises most of c');
  assert.equal(ask({ queuedRows: 10, gapMs: 0.01 }), 0, 'q·m ≥ c: never wait');
  assert.equal(ask({ queuedRows: 8, gapMs: 0.01 }), 0, 'a full batch goes');
  assert.equal(ask({ freeInstances: 2 }), 0, 'another instance is free: the newcomer would not queue');
  assert.equal(ask({ maxLatencyMs: 7.9, oldestWaitMs: 1 }), 0, '1 + 1 + 5 + 1 = 8 ms would pass a 7.9 ms budget');
  assert.equal(ask({ maxLatencyMs: 8, oldestWaitMs: 1 }), 1, 'exactly on budget is inside it');
  assert.equal(
    ask({ fit: { ...TRUSTED, trusted: false, reason: 'R² 0.5 below 0.8' } }),
    0,
    'an untrusted fit is delay 0',
  );
});

test('OnlineCostFit: recovers c and m, shrugs off outliers, says why it is not trusted, and follows a drifting cost', () => {
  const fit = new OnlineCostFit();
  assert.equal(fit.current().trusted, false);
  assert.match(fit.current().reason ?? '', /0 distinct batch sizes so far; 3 needed/);
  for (let round = 0; round < 20; round++) for (const rows of [1, 2, 4, 8]) fit.add(rows, 5 + 0.5 * rows);
  // A GC pause now and then: ten times the cost, in a few batches of each size.
  for (const rows of [1, 2, 4, 8]) fit.add(rows, 10 * (5 + 0.5 * rows));
  for (let index = 0; index < 8; index++) fit.add(8, 9);
  const learnt = fit.current();
  assert.ok(Math.abs(learnt.c - 5) < 0.1 && Math.abs(learnt.m - 0.5) < 0.02, JSON.stringify(learnt));
  assert.equal(learnt.trusted, true);
  assert.equal(learnt.sizes, 4);

  const twoSizes = new OnlineCostFit();
  for (let round = 0; round < 8; round++) for (const rows of [1, 2]) twoSizes.add(rows, 5 + rows);
  assert.match(twoSizes.current().reason ?? '', /2 distinct batch sizes so far; 3 needed/);

  const negative = new OnlineCostFit();
  for (let round = 0; round < 8; round++) for (const rows of [2, 4, 8]) negative.add(rows, rows - 1);
  assert.match(negative.current().reason ?? '', /fixed cost -1\.000 ms is negative/);

  const flat = new OnlineCostFit();
  for (let round = 0; round < 8; round++) for (const rows of [1, 2, 4]) flat.add(rows, 3);
  assert.match(flat.current().reason ?? '', /per-row cost 0\.0000 ms is not positive/);

  const noisy = new OnlineCostFit();
  const times = [1, 9, 2, 8, 3, 10];
  for (let round = 0; round < 8; round++)
    for (const [index, rows] of [1, 2, 3, 4, 5, 6].entries()) noisy.add(rows, times[index] as number);
  assert.match(noisy.current().reason ?? '', /R² 0\.\d+ below 0\.8/);

  // The machine slows down: after a window of new batches the line is the new one.
  for (let round = 0; round < 64; round++) for (const rows of [1, 2, 4, 8]) fit.add(rows, 10 + 1 * rows);
  const drifted = fit.current();
  assert.ok(Math.abs(drifted.c - 10) < 0.1 && Math.abs(drifted.m - 1) < 0.02, JSON.stringify(drifted));
});

test('ArrivalRate: the median gap per row; one long silence does not count, silence now does', () => {
  const rate = new ArrivalRate();
  assert.equal(rate.expectedGapMs(0), Infinity, 'nothing known yet');
  for (let at = 0; at <= 100; at += 2) rate.arrived(at, 1);
  assert.equal(rate.expectedGapMs(100), 2);
  rate.arrived(1_100, 1);
  for (let at = 1_101; at <= 1_105; at += 1) rate.arrived(at, 1);
  assert.equal(rate.expectedGapMs(1_105), 2, 'a second of night is one gap of sixteen');
  for (let at = 1_106; at <= 1_120; at += 1) rate.arrived(at, 4);
  assert.equal(rate.expectedGapMs(1_120), 0.25, 'four rows a millisecond now');
  assert.equal(rate.expectedGapMs(1_150), 30, '30 ms of silence: the rate is lower than the median says');
});

/** A batcher whose runner takes T(B) = 5 + 0.5·B ms of fake time, taught B = 1, 2, 4 and 8. */
async function taught(policy: { maxLatencyUs?: number } = {}) {
  const runner = new GatedRunner('i0');
  const harness = setup(
    { maxBatchSize: 8, maxQueueDelayUs: 0, adaptive: { maxLatencyUs: policy.maxLatencyUs ?? 1_000_000 } },
    [runner],
  );
  const run = async (): Promise<void> => {
    await settle();
    const batch = runner.batches.at(-1) as number[];
    harness.fake.tick(5 + 0.5 * batch.length);
    runner.release();
    await settle();
  };
  for (let round = 0; round < 8; round++) {
    for (const size of [1, 2, 4, 8]) {
      // The instance is busy with a 1-row batch while `size` rows queue; then they go together.
      const blocker = harness.submit(0);
      await settle();
      const rows = Array.from({ length: size }, (_, index) => harness.submit(index + 1));
      harness.fake.tick(5.5);
      runner.release();
      await blocker;
      await run();
      await Promise.all(rows);
    }
  }
  // Far from the teaching burst, so the arrival rate is the test's own.
  harness.fake.tick(1_000);
  let released = runner.batches.length;
  runner.batches.length = 0;
  released = 0;
  /**
   * Rows 1 ms apart while the instance is busy teach the arrival rate; then every batch is let
   * go, 1 ms of fake time each, so little silence follows the burst.
   */
  const burst = async (): Promise<void> => {
    const blocker = harness.submit(-1);
    await settle();
    for (let index = 0; index < 20; index++) {
      void harness.submit(100 + index);
      harness.fake.tick(1);
    }
    await settle();
    while (released < runner.batches.length) {
      harness.fake.tick(1);
      runner.release();
      released += 1;
      await settle();
    }
    await blocker;
    runner.batches.length = 0;
    released = 0;
  };
  return { ...harness, runner, run, burst };
}

test('adaptive batching dispatches at once when rows come slower than waiting pays', async () => {
  const { fake, submit, runner, run } = await taught();
  for (let index = 0; index < 5; index++) {
    void submit(index);
    await settle();
    assert.deepEqual(runner.batches.at(-1), [index], `request ${index} went at once`);
    await run();
    fake.tick(20);
  }
});

test('adaptive batching waits for partners when rows come fast enough, and stops when waiting stops paying', async () => {
  const { fake, submit, runner, run, burst } = await taught();
  await burst();
  // Break-even gaps: 2.25 ms at q = 1, 1.33 at q = 2, 0.875 at q = 3. One row a millisecond:
  // wait with one and with two queued, dispatch the third with three.
  const first = submit(1);
  await settle();
  assert.deepEqual(runner.batches, [], 'q = 1: waits');
  fake.tick(1);
  void submit(2);
  await settle();
  assert.deepEqual(runner.batches, [], 'q = 2: waits');
  fake.tick(1);
  void submit(3);
  await settle();
  assert.deepEqual(runner.batches, [[1, 2, 3]], 'q = 3: dispatched');
  await run();
  assert.equal((await first).batchRows, 3);
});

test('adaptive batching never waits past max_latency, and a wait for partners that do not come ends', async () => {
  const tight = await taught({ maxLatencyUs: 6_000 });
  await tight.burst();
  void tight.submit(1);
  await settle();
  // 0 + 1 (gap) + 5 + 0.5·2 = 7 ms > 6: no wait.
  assert.deepEqual(tight.runner.batches, [[1]], 'the budget forbids waiting');

  const loose = await taught();
  await loose.burst();
  void loose.submit(1);
  await settle();
  assert.deepEqual(loose.runner.batches, [], 'waits one expected gap');
  // Nobody comes. Each check waits the silence so far (1 ms, then 2 ms); at 4 ms the silence
  // is past the 2.25 ms break-even and the row goes alone.
  loose.fake.tick(1);
  await settle();
  assert.deepEqual(loose.runner.batches, [], 'at 1 ms the silence is still shorter than break-even');
  loose.fake.tick(1);
  await settle();
  assert.deepEqual(loose.runner.batches, [], 'at 2 ms too');
  loose.fake.tick(2);
  await settle();
  assert.deepEqual(loose.runner.batches, [[1]], 'dispatched alone once waiting stopped paying');
});

test('adaptive batching behaves as delay 0 until its fit is trusted', async () => {
  const runner = new GatedRunner('i0');
  const fits: CostFit[] = [];
  const { submit, fake } = setup({ maxBatchSize: 8, adaptive: { maxLatencyUs: 1_000_000 } }, [runner], {
    fitChanged: (fit) => fits.push(fit),
  });
  for (let index = 0; index < 10; index++) {
    void submit(index);
    fake.tick(0.1);
  }
  await settle();
  assert.deepEqual(runner.batches, [[0]], 'the first row went at once, the rest queued behind it');
  fake.tick(5);
  runner.release();
  await settle();
  assert.deepEqual(runner.batches.at(-1), [1, 2, 3, 4, 5, 6, 7, 8], 'what queued went together, as with delay 0');
  assert.deepEqual(
    fits.map((fit) => [fit.trusted, fit.reason]),
    [[false, '1 distinct batch size so far; 3 needed']],
    'the observer hears the fit and why it does not steer yet',
  );
});
