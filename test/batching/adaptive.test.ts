import assert from 'node:assert/strict';
import { test } from 'node:test';
import { adaptiveWaitMs, type WaitQuestion } from '../../src/batching/adaptive-delay.js';
import { ArrivalRate } from '../../src/batching/arrival-rate.js';
import { batchCostMs } from '../../src/batching/batch-request.js';
import { OnlineCostFit, type CostFit } from '../../src/batching/cost-fit.js';
import { expectedCompletion, predictsCost } from '../../src/batching/expected-completion.js';
import { Pace } from '../../src/batching/pace.js';
import { ReturningRows } from '../../src/batching/returning-rows.js';
import type { BatchTimings, HandlerRequest } from '../../src/core/request.js';
import { GatedRunner, runAtCost, settle, setup } from './harness.js';

const TRUSTED: CostFit = { c: 5, m: 0.5, r2: 1, sizes: 4, trusted: true, reason: undefined };
const ask = (question: Partial<WaitQuestion>): number =>
  adaptiveWaitMs({
    queuedRows: 1,
    maxBatchSize: 8,
    freeInstances: 1,
    instances: 1,
    oldestWaitMs: 0,
    gapMs: 1,
    returningRows: 0,
    returningInMs: 0,
    answeredRows: 0,
    answeredInMs: 0,
    maxLatencyMs: 1_000,
    fit: TRUSTED,
    pace: 1,
    ...question,
  });

test('the wait rule: rows owed back while Δ < c, the stream while gap < c/q; one free instance, inside the budget', () => {
  // c = 5: the stream pays while the gap is under c/q: 5 ms at q = 1, 2.5 at q = 2, 1.25 at q = 4.
  assert.equal(ask({ gapMs: 1 }), 1, 'q = 1, rows 1 ms apart: wait one gap');
  assert.equal(ask({ gapMs: 4.9 }), 4.9);
  assert.equal(ask({ gapMs: 5.1 }), 0, 'past break-even (fewer rows arrive during c than are queued): dispatch');
  assert.equal(ask({ queuedRows: 4, gapMs: 1.2 }), 1.2);
  assert.equal(ask({ queuedRows: 4, gapMs: 1.3 }), 0, 'q = 4 already amortises c at this rate');
  assert.equal(ask({ queuedRows: 2, gapMs: 2.5 }), 0, 'at break-even (gap = c/q) waiting does not pay: dispatch');
  assert.equal(ask({ queuedRows: 8, gapMs: 0.01 }), 0, 'a full batch goes');
  assert.equal(ask({ freeInstances: 2 }), 0, 'another instance is free: the newcomer would not queue');
  assert.equal(ask({ gapMs: 0 }), 0.01, 'a burst: rows due now get a moment to come');
  // Rows owed back (a closed loop): k = min(owed, room), Δ = when they are due; pays while Δ < c.
  assert.equal(ask({ queuedRows: 4, gapMs: Infinity, returningRows: 4, returningInMs: 0.5 }), 0.5);
  assert.equal(
    ask({ queuedRows: 4, gapMs: Infinity, returningRows: 4, returningInMs: 4.9 }),
    4.9,
    '4.9 < c = 5: a batch of their own would cost more than the wait',
  );
  assert.equal(
    ask({ queuedRows: 4, gapMs: Infinity, returningRows: 40, returningInMs: 5.1 }),
    0,
    '5.1 ms > c: a batch of their own is cheaper than the wait',
  );
  assert.equal(
    ask({ queuedRows: 4, gapMs: Infinity, returningRows: 4, returningInMs: 5 }),
    0,
    'due in exactly c: the wait costs what a batch of their own would',
  );
  assert.equal(
    ask({ queuedRows: 4, gapMs: Infinity, returningRows: 4, returningInMs: 20 }),
    0,
    'due in 20 ms, past c: a batch of their own is cheaper, however busy the machine',
  );
  assert.equal(
    ask({ queuedRows: 7, gapMs: Infinity, returningRows: 40, returningInMs: 0.5, maxLatencyMs: 9.6 }),
    0.5,
    'only one of the 40 fits: the budget is checked for a batch of 8 (0.5 + 5 + 4 = 9.5 ms), not of 47',
  );
  assert.equal(
    ask({ maxLatencyMs: 7.9, oldestWaitMs: 1 }),
    0,
    '1 waited + 1 gap + 5 + 0.5·2 = 8 ms would pass a 7.9 ms budget',
  );
  assert.equal(ask({ maxLatencyMs: 8, oldestWaitMs: 1 }), 1, 'exactly on budget is inside it');
  assert.equal(
    ask({ maxLatencyMs: 12, oldestWaitMs: 1, pace: 2 }),
    0,
    'batches running twice the line: 1 + 1 + 2·6 = 14 ms would pass 12',
  );
  assert.equal(
    ask({ returningRows: 7, returningInMs: 1, maxLatencyMs: 9, gapMs: 10 }),
    0,
    'waiting for 7 owed rows: 1 + 5 + 0.5·8 = 10 ms passes 9',
  );
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

test('OnlineCostFit: batches timed at load make a trusted line at once and stand in for sizes live traffic lacks', () => {
  const fit = new OnlineCostFit();
  for (let round = 0; round < 3; round++) for (const rows of [1, 8, 16]) fit.seed(rows, 5 + 0.5 * rows);
  const seeded = fit.current();
  assert.equal(seeded.trusted, true, JSON.stringify(seeded));
  assert.ok(Math.abs(seeded.c - 5) < 1e-9 && Math.abs(seeded.m - 0.5) < 1e-9);
  assert.equal(fit.current(), seeded, 'no new batch: the same line, not refitted');
  // Live batches of one size only (a closed loop at full batches): that size is live, the others seeded.
  for (let index = 0; index < 300; index++) fit.add(16, 15);
  const live = fit.current();
  assert.equal(live.trusted, true, 'still three sizes');
  assert.ok(
    Math.abs(live.c + live.m * 16 - 15) < 0.5,
    `the line passes near the live 15 ms at 16: ${JSON.stringify(live)}`,
  );
  // One batch of a new size at a busy moment (1.5 times its cost) has one say in eight.
  fit.add(5, 1.5 * (5 + 0.5 * 5));
  const noisy = fit.current();
  assert.equal(noisy.trusted, true, `a size seen once does not sink R²: ${JSON.stringify(noisy)}`);
});

test('OnlineCostFit: medians of unordered and even counts, seeds too; weights capped at eight batches; lines through fewer than two sizes', () => {
  const line = (fit: OnlineCostFit): [number, number, number] => {
    const { c, m, r2 } = fit.current();
    return [c, m, r2];
  };
  const near = (actual: [number, number, number], expected: [number, number, number]): void =>
    assert.ok(
      actual.every((value, index) => Math.abs(value - (expected[index] as number)) < 1e-9),
      `${actual.join(', ')} against ${expected.join(', ')}`,
    );
  // Size 1 in the order 9, 1, 5 (median 5); size 3 as 6, 12, 8, 10 (median (8 + 10)/2 = 9).
  const live = new OnlineCostFit();
  for (const ms of [9, 1, 5]) live.add(1, ms);
  for (const ms of [6, 12, 8, 10]) live.add(3, ms);
  near(line(live), [3, 2, 1]);
  const seeded = new OnlineCostFit();
  for (const ms of [7, 3, 5]) seeded.seed(1, ms);
  seeded.seed(3, 9);
  near(line(seeded), [3, 2, 1]);

  // Size 1 seen 20 times counts as 8: points (1, 3) ×8, (2, 10) ×1, (3, 5) ×8 give m = 16/16 = 1
  // and c = 74/17 − 2 (20 for size 1 would pull the mean of x to 46/29).
  const weighted = new OnlineCostFit();
  for (let index = 0; index < 20; index++) weighted.add(1, 3);
  weighted.add(2, 10);
  for (let index = 0; index < 8; index++) weighted.add(3, 5);
  const [c, m] = line(weighted);
  assert.ok(Math.abs(c - (74 / 17 - 2)) < 1e-9 && Math.abs(m - 1) < 1e-9, `c ${c}, m ${m}`);

  near(line(new OnlineCostFit()), [0, 0, 0]);
  const one = new OnlineCostFit();
  for (const ms of [4, 6, 5]) one.add(2, ms);
  near(line(one), [5, 0, 0]);
  const flat = new OnlineCostFit();
  for (const rows of [1, 2, 4]) flat.add(rows, 3);
  near(line(flat), [3, 0, 1]);
});

test('OnlineCostFit: ignores batches it cannot place, keeps 32 seeds, and refits after 8 batches or at once for a new size', () => {
  const fit = new OnlineCostFit();
  for (const rows of [1, 2, 4]) fit.add(rows, 1 + rows);
  const first = fit.current();
  assert.ok(first.trusted && Math.abs(first.c - 1) < 1e-9 && Math.abs(first.m - 1) < 1e-9, JSON.stringify(first));
  for (const [rows, ms] of [
    [0, 5],
    [2, NaN],
    [2, -1],
    [2, Infinity],
    [NaN, 3],
  ]) {
    fit.add(rows as number, ms as number);
    fit.seed(rows as number, ms as number);
  }
  for (let index = 0; index < 7; index++) fit.add(2, 3);
  assert.equal(fit.current(), first, 'seven batches of known sizes, bad ones not counted: not refitted');
  fit.add(2, 3);
  const eighth = fit.current();
  assert.notEqual(eighth, first, 'the eighth refits');
  fit.add(8, 9);
  assert.notEqual(fit.current(), eighth, 'a new size refits at once');
  assert.equal(fit.current().sizes, 4);

  const seeds = new OnlineCostFit();
  for (let index = 0; index < 32; index++) seeds.seed(1 + (index % 3), 2 + (index % 3));
  // Past the 32nd a seed is dropped: a 33rd of a new size would make a fourth.
  seeds.seed(9, 50);
  const { sizes, c, m } = seeds.current();
  assert.ok(sizes === 3 && Math.abs(c - 1) < 1e-9 && Math.abs(m - 1) < 1e-9, JSON.stringify(seeds.current()));
});

test('a batch costs its compute time as the instance reports it, else its round trip', () => {
  assert.equal(batchCostMs({ computeInputNs: 1e6, computeInferNs: 2e6, computeOutputNs: 0 }, 9), 3);
  assert.equal(batchCostMs({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 }, 9), 9);
});

test('the wait rule on several instances: each batch waits for its share of the rows owed back, the answered ones first', () => {
  // Two instances, 32 clients: the first to free has its 16 answered rows due in 1 ms and the other's 16 due in 9.
  const twoInstances = {
    instances: 2,
    gapMs: Infinity,
    returningRows: 32,
    returningInMs: 9,
    answeredRows: 16,
    answeredInMs: 1,
  };
  assert.equal(
    ask({ ...twoInstances, queuedRows: 0 + 1, returningRows: 31, answeredRows: 15 }),
    1,
    'waits for its 16, due in 1 ms',
  );
  assert.equal(
    ask({ ...twoInstances, queuedRows: 16, returningRows: 16, answeredRows: 0 }),
    0,
    'its share is in: it goes',
  );
  // Both free at once (the start, or a stall): the first takes half, not whatever came first.
  assert.equal(
    ask({ ...twoInstances, freeInstances: 2, queuedRows: 3, returningRows: 29, answeredRows: 29, answeredInMs: 1 }),
    1,
  );
  assert.equal(ask({ ...twoInstances, freeInstances: 2, queuedRows: 16, returningRows: 16, answeredRows: 16 }), 0);
  // Its share would come only with the other instance's running rows, due past c: it goes.
  assert.equal(ask({ ...twoInstances, queuedRows: 4, returningRows: 16, answeredRows: 0, returningInMs: 9 }), 0);
  // Another instance free and nothing owed: the stream is not waited for.
  assert.equal(ask({ instances: 2, freeInstances: 2, gapMs: 0.1 }), 0);
});

test('ArrivalRate: the mean gap per row over the last 16 requests (max batch 8); silence now counts', () => {
  const rate = new ArrivalRate(8);
  assert.equal(rate.expectedGapMs(0), Infinity, 'nothing known yet');
  for (let at = 0; at <= 100; at += 2) rate.arrived(at, 1);
  assert.equal(rate.expectedGapMs(100), 2);
  for (let at = 101; at <= 120; at += 1) rate.arrived(at, 4);
  assert.equal(rate.expectedGapMs(120), 0.25, 'four rows a millisecond now');
  assert.equal(rate.expectedGapMs(150), 30, '30 ms of silence: the rate is lower than the window says');
  // A closed loop of 4: bursts of 4 at once, 8 ms apart. The median gap would be 0; the mean counts the silences.
  const bursts = new ArrivalRate(8);
  for (let cycle = 0; cycle < 8; cycle++) for (let client = 0; client < 4; client++) bursts.arrived(cycle * 8, 1);
  assert.equal(bursts.expectedGapMs(56), 24 / 15, 'the window: 3 cycles of 8 ms over the 15 rows after the oldest');
});

test('ArrivalRate: a closed loop returning a whole batch at once does not read as the rate', () => {
  // 16 clients back 30 µs apart every 10 ms, max batch 32: the window holds 64 requests, four bursts and their silences.
  const closedLoop = (rate: ArrivalRate): number => {
    for (let cycle = 0; cycle < 8; cycle++)
      for (let client = 0; client < 16; client++) rate.arrived(cycle * 10 + client * 0.03, 1);
    return rate.expectedGapMs(70 + 15 * 0.03);
  };
  const gap = closedLoop(new ArrivalRate(32));
  assert.ok(Math.abs(gap - (30 + 15 * 0.03) / 63) < 1e-9, String(gap));
  // With c = 4 ms and 16 queued, the stream rule waits only for gaps under c/q = 0.25 ms: this one does not.
  assert.ok(gap > 4 / 16);
  // A window of one burst (16 requests) sees the clients' 30 µs spacing as a stream and would hold the batch.
  assert.ok(Math.abs(closedLoop(new ArrivalRate(8)) - 0.03) < 1e-9);
});

test('ReturningRows: answered rows are owed back until due, and the debt lapses when overdue', () => {
  const returning = new ReturningRows();
  returning.answered(0, 4);
  assert.equal(returning.owedRows(0), 0, 'no return delay seen yet: nothing expected');
  for (let client = 0; client < 4; client++) returning.arrived(0.5, 1);
  returning.answered(10, 4);
  assert.equal(returning.owedRows(10), 4);
  // Due at 10 + 0.5 · 1.25 + 0.05 = 10.675.
  assert.ok(Math.abs(returning.dueInMs(10) - 0.675) < 1e-9);
  returning.arrived(10.5, 3);
  assert.equal(returning.owedRows(10.5), 1, 'three came back');
  assert.equal(returning.owedRows(10.7), 0, 'the last one is overdue: not waited for');
  returning.answered(20, 2);
  assert.equal(returning.owedRows(20), 2, 'the lapsed debt is forgotten, the new one counts');
});

test('ReturningRows: the return delay is the longest of the last 16, so a slow return leaves after 16 quick ones', () => {
  const returning = new ReturningRows();
  let now = 0;
  /** A batch of one answered now, and its client back `delayMs` later. */
  const roundTrip = (delayMs: number): void => {
    returning.answered(now, 1);
    returning.arrived(now + delayMs, 1);
    now += 10;
  };
  roundTrip(8);
  for (let index = 0; index < 15; index++) roundTrip(1);
  returning.answered(now, 1);
  assert.ok(Math.abs(returning.dueInMs(now) - (8 * 1.25 + 0.05)) < 1e-9, 'the 8 ms return is among the last 16');
  returning.arrived(now + 1, 1);
  now += 10;
  returning.answered(now, 1);
  assert.ok(Math.abs(returning.dueInMs(now) - (1 * 1.25 + 0.05)) < 1e-9, 'the 16th quick return pushed it out');
});

/** A gated instance that reports the compute time T(B) = c + m·B ms (5 + 0.5·B unless told; times `slowdown`), as a real one reports its own. */
class CostRunner extends GatedRunner {
  slowdown = 1;
  constructor(
    id: string,
    readonly line = { c: 5, m: 0.5 },
  ) {
    super(id);
  }
  override async run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    const { responses } = await super.run(requests);
    const computeInferNs = this.slowdown * (this.line.c + this.line.m * requests.length) * 1e6;
    return { responses, timings: { computeInputNs: 0, computeInferNs, computeOutputNs: 0 } };
  }
}

/** The max_latency the refusal tests below reason in: a request expected to finish past it is refused. */
const MAX_LATENCY_20_MS = 20_000;

/** A batcher whose cost line is seeded as at load with T(B) = 5 + 0.5·B (or `line`), and a gated instance. */
function seeded(policy: { maxLatencyUs?: number; priorityLevels?: number; line?: { c: number; m: number } } = {}) {
  const line = policy.line ?? { c: 5, m: 0.5 };
  const runner = new CostRunner('i0', line);
  const fits: CostFit[] = [];
  const harness = setup(
    {
      maxBatchSize: 8,
      maxQueueDelayUs: 0,
      adaptive: { maxLatencyUs: policy.maxLatencyUs ?? 1_000_000 },
      priorityLevels: policy.priorityLevels ?? 1,
    },
    [runner],
    { fitChanged: (fit) => fits.push(fit) },
  );
  for (let round = 0; round < 3; round++) {
    for (const rows of [1, 4, 8]) harness.batcher.seedCost(rows, line.c + line.m * rows);
  }
  /** Lets the running batch finish after its T(B) of fake time. */
  const run = async (): Promise<void> => {
    await settle();
    harness.fake.tick(5 + 0.5 * (runner.batches.at(-1) as number[]).length);
    runner.release();
    await settle();
  };
  return { ...harness, runner, run, fits };
}

test('adaptive batching dispatches at once when rows come slower than waiting pays', async () => {
  const { fake, submit, runner, run } = seeded();
  for (let index = 0; index < 5; index++) {
    void submit(index);
    await settle();
    assert.deepEqual(runner.batches.at(-1), [index], `request ${index} went at once`);
    await run();
    fake.tick(20);
  }
});

test('adaptive batching waits for partners when rows come fast enough, and stops when waiting stops paying', async () => {
  const { fake, submit, runner, run } = seeded();
  // One row every 2 ms while the 1-row batch runs (5 ms here): λ = 0.5/ms, so c·λ = 2.5 rows arrive per fixed cost.
  const blocker = submit(0);
  await settle();
  const rows = [1, 2].map((value) => {
    fake.tick(2);
    return submit(value);
  });
  fake.tick(1);
  runner.release();
  await blocker;
  await settle();
  assert.deepEqual(runner.batches, [[0]], 'q = 2 < 2.5 with the instance free: waits');
  fake.tick(1);
  rows.push(submit(3));
  await settle();
  assert.deepEqual(runner.batches.at(-1), [1, 2, 3], 'q = 3 > c·λ: a batch of three keeps up, it goes');
  await run();
  assert.equal((await rows[0])?.batchRows, 3);
});

test('adaptive batching never waits past max_latency, and a wait for partners that do not come ends', async () => {
  for (const [budgetUs, waits] of [
    [1_000_000, true],
    // The oldest has waited 3 ms when the instance frees; 3 + 2 (gap) + 5 + 0.5·3 = 11.5 ms > 9.6,
    // the 80 % of 12 ms that auto plans for.
    [12_000, false],
  ] as const) {
    const { fake, submit, runner } = seeded({ maxLatencyUs: budgetUs });
    const blocker = submit(0);
    await settle();
    for (const value of [1, 2]) {
      fake.tick(2);
      void submit(value);
    }
    fake.tick(1);
    runner.release();
    await blocker;
    await settle();
    assert.equal(runner.batches.length, waits ? 1 : 2, waits ? 'waits' : 'the budget forbids waiting');
    if (!waits) continue;
    // Nobody comes: after the 2 ms gap the silence is 3 ms, past c/q = 2.5: the two go.
    fake.tick(1);
    await settle();
    assert.equal(runner.batches.length, 1, 'still inside the expected gap');
    fake.tick(1);
    await settle();
    assert.deepEqual(runner.batches.at(-1), [1, 2], 'dispatched once waiting stopped paying');
  }
});

test('adaptive batching waits for the rows of a closed loop that its last batch just answered', async () => {
  const { fake, submit, runner } = seeded();
  /** Four clients that send again 1 ms after each answer (fake time counts whole ms). */
  const client = async (value: number): Promise<void> => {
    for (let turn = 0; turn < 4; turn++) {
      await submit(value);
      await new Promise<void>((resolve) => fake.setTimeout(() => resolve(), 1));
    }
  };
  const clients = [0, 1, 2, 3].map(client);
  await runAtCost(fake, runner, (released) => released >= 16, 400);
  await Promise.all(clients);
  assert.deepEqual(runner.batches.slice(0, 2), [[0], [1, 2, 3]], 'the first burst splits: nothing was known');
  assert.ok(
    runner.batches.slice(3).every((batch) => batch.length === 4),
    `then every batch waits for the rows owed back: ${JSON.stringify(runner.batches)}`,
  );
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

test('adaptive batching refuses a request whose expected completion passes max_latency, at its headers and on submit', async () => {
  // T(B) = 5 + 0.5·B, batches of 8, one instance, 20 ms planned.
  const { fake, submit, batcher, runner, run } = seeded({ maxLatencyUs: MAX_LATENCY_20_MS });
  const first = submit(0);
  await settle();
  assert.deepEqual(runner.batches, [[0]], 'an idle instance: the first goes at once, expected free in 5.5 ms');
  // Request k queued behind it ends at 5.5 + T(min(k, 8)), then a second batch: 5.5 + 9 + T(k − 8).
  const queued = Array.from({ length: 9 }, (_, index) => submit(index + 1));
  await settle();
  assert.equal(batcher.rowsQueued, 9, 'the ninth ends at 5.5 + 9 + 5.5 = 20 ms: inside the budget');
  await assert.rejects(submit(10), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_LATENCY_BUDGET');
    assert.match(
      error.message,
      /expected to finish in 21 ms, past max_latency 20 ms \(9 rows queued ahead on 1 instance\)/,
    );
    return true;
  });
  assert.throws(
    () => batcher.reserve(),
    /past max_latency/,
    'a request still reading its body is refused at its headers',
  );
  assert.equal(batcher.rowsQueued, 9, 'the refused requests took nothing from the queue');
  fake.tick(2);
  batcher.reserve().release(); // 2 ms on, the running batch is that much nearer its end: 18.5 ms
  await run();
  await first;
  assert.deepEqual(runner.batches.at(-1), [1, 2, 3, 4, 5, 6, 7, 8], 'the queue runs as predicted');
  batcher.reserve().release();
  const again = submit(11);
  await settle();
  assert.equal(batcher.rowsQueued, 2, 'with a batch gone, there is room in the budget again');
  await run();
  await run();
  assert.equal((await again).batchRows, 2);
  await Promise.all(queued);
});

test('a request queues behind its own priority level and those before it: the budget refuses low priority first', async () => {
  // T(B) = 5 + 0.5·B, batches of 8, max_latency 20 ms. two levels.
  const { submit, batcher, runner, run } = seeded({ maxLatencyUs: MAX_LATENCY_20_MS, priorityLevels: 2 });
  const first = submit(0);
  await settle();
  const low = Array.from({ length: 9 }, (_, index) => submit(index + 1, { priority: 2 }));
  await settle();
  assert.equal(batcher.rowsQueued, 9, 'the ninth low one ends at 5.5 + 9 + 5.5 = 20 ms');
  await assert.rejects(submit(10, { priority: 2 }), /past max_latency 20 ms \(9 rows queued ahead/);
  // A high one goes before all nine: 5.5 + T(1) = 11 ms.
  const high = submit(11, { priority: 1 });
  await settle();
  assert.equal(batcher.rowsQueued, 10, 'admitted: no row of its level or before is queued');
  await run();
  await first;
  assert.deepEqual(runner.batches.at(-1), [11, 1, 2, 3, 4, 5, 6, 7], 'and served first, as predicted');
  await run();
  await run();
  await Promise.all([high, ...low]);
});

test('adaptive batching refuses nothing for its budget while its line cannot predict a batch', async () => {
  const runner = new GatedRunner('i0');
  const { submit, batcher } = setup({ maxBatchSize: 8, adaptive: { maxLatencyUs: 1_000 } }, [runner]);
  const answers = Array.from({ length: 20 }, (_, index) => submit(index));
  await settle();
  assert.equal(batcher.rowsQueued, 19, 'no timed batches, no prediction: everything queues, as with a fixed delay');
  batcher.reserve().release();
  for (let batch = 0; batch < 4; batch++) {
    runner.release();
    await settle();
  }
  assert.equal((await Promise.all(answers)).length, 20);
});

test('expectedCompletion: the queue ahead in full batches on the instance that frees first', () => {
  const fit: CostFit = { c: 5, m: 0.5, r2: 1, sizes: 3, trusted: true, reason: undefined };
  const ask = (rowsThrough: number, freeInMs: number[], maxBatchSize = 8, pace = 1): number =>
    expectedCompletion({ rowsThrough, maxBatchSize, freeInMs, fit, pace, limitMs: Infinity });
  assert.equal(ask(1, [0]), 5.5, 'an idle instance: its own batch, which starts now');
  assert.equal(ask(10, [3]), 3 + 9 + 6, 'after the running batch, a full batch, then its own of 2');
  assert.equal(
    ask(10, [3, 1]),
    3 + 6,
    'two instances: the 8 go on the one free in 1 ms, its own 2 on the other at 3 ms',
  );
  assert.equal(ask(3, [0], 0), 5.5 * 3, 'a model that does not batch runs a request at a time');
  assert.equal(ask(10, [0], 8, 2), 18 + 12, 'batches held their instance twice as long as the line: twice the cost');
  assert.equal(
    expectedCompletion({ rowsThrough: 100, maxBatchSize: 8, freeInMs: [0], fit, pace: 1, limitMs: 20 }),
    27,
    'stops once past the limit',
  );
  assert.equal(predictsCost(fit), true);
  assert.equal(predictsCost({ ...fit, c: -0.5, trusted: false }), true, 'no fixed cost to share still predicts');
  assert.equal(predictsCost({ ...fit, r2: 0.5 }), false);
  assert.equal(predictsCost({ ...fit, sizes: 2 }), false);
});

test('Pace: recent batches over the line, averaged over about 8, each clamped to 4× either way', () => {
  const pace = new Pace();
  assert.equal(pace.value, 1);
  for (let batch = 0; batch < 40; batch++) pace.observe(20, 10);
  assert.ok(Math.abs(pace.value - 2) < 0.01, `twice as slow as the line for 40 batches: ${pace.value}`);
  pace.observe(10, 10);
  assert.ok(Math.abs(pace.value - (2 - 1 / 8)) < 0.01, 'one batch on the line moves it an eighth of the way');
  const paused = new Pace();
  paused.observe(500, 10);
  assert.equal(paused.value, 1 + (4 - 1) / 8, 'a 50× pause counts as 4×');
  paused.observe(5, 0);
  assert.equal(paused.value, 1.375, 'nothing predicted: not counted');
});

test('the budget counts from the reservation: a body that took long to arrive has less of it left', async () => {
  // T(B) = 5 + 0.5·B, batches of 8, max_latency 20 ms.
  const { fake, submit, batcher, run } = seeded({ maxLatencyUs: MAX_LATENCY_20_MS });
  const first = submit(0);
  await settle();
  const reservation = batcher.reserve();
  const early = batcher.reserve();
  fake.tick(2);
  // Free in 3.5 ms, then a batch of 2: 3.5 + 6 = 9.5 ms from now.
  const admitted = submit(1, { reservation: early });
  await settle();
  assert.equal(batcher.rowsQueued, 1, '2 ms spent + 9.5 ms = 11.5 ms: inside');
  fake.tick(3);
  // Free in 0.5 ms, a batch of 2: 0.5 + 6 = 6.5 ms, after 5 ms spent reading its body.
  const late = submit(2, { reservation });
  await settle();
  assert.equal(batcher.rowsQueued, 2, '5 + 6.5 = 11.5 ms: inside');
  const slow = batcher.reserve();
  fake.tick(14);
  // The running batch is overdue (taken as free now): a batch of 3, 6.5 ms, after 14 ms spent.
  await assert.rejects(submit(3, { reservation: slow }), /expected to finish in 21 ms, past max_latency 20 ms/);
  await run();
  await run();
  await Promise.all([first, admitted, late]);
});

test('the budget check costs a batch what recent batches held their instance, dispatch to answer, not their compute time alone', async () => {
  // T(B) = 5 + 0.5·B as the instance reports it, but every batch answers 6.5 ms after that (the
  // main thread late to pick it up): the line stays put, the pace follows the round trip.
  // (The fake clock reads whole ms: 5.5 + 6.5 keeps every answer on one.)
  const { fake, submit, batcher, runner } = seeded({ maxLatencyUs: MAX_LATENCY_20_MS });
  const late = async (): Promise<void> => {
    await settle();
    fake.tick(5 + 0.5 * (runner.batches.at(-1) as number[]).length + 6.5);
    runner.release();
    await settle();
  };
  for (let index = 0; index < 40; index++) {
    const answer = submit(index);
    await late();
    await answer;
  }
  const first = submit(100);
  await settle();
  // Free in 12 ms (the pace, 12 ÷ 5.5), then its own batch, 12 ms more: past 20. On compute
  // time alone it would be 5.5 + 5.5 = 11 ms.
  await assert.rejects(submit(101), /expected to finish in 24 ms, past max_latency 20 ms \(0 rows/);
  assert.equal(batcher.rowsQueued, 0);
  await late();
  await first;
});
