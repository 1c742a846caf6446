import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { ExperimentDataError } from '../../src/core/errors.js';
import { normalQuantile } from '../../src/experiment/distributions.js';
import { summarize, twoProportionZTest, welchTTest } from '../../src/experiment/fixed-horizon.js';
import { guardrailsByVersion, nearestRank } from '../../src/experiment/guardrails.js';
import { joinPredictionLog, type JoinedLog } from '../../src/experiment/join.js';
import type { FeedbackRecord, LogRecord } from '../../src/experiment/log-records.js';
import { analyzeExperiment, type ReportOptions } from '../../src/experiment/report.js';
import type { ExperimentReport } from '../../src/experiment/report-types.js';
import { PLANNED_N_NOT_REACHED } from '../../src/experiment/verdict.js';
import { tempDir } from '../fixtures/temp.js';
import { MODEL, converts, simulatedLog, writeLogFile, type Arm } from './log-fixture.js';

async function joined(t: TestContext, records: readonly LogRecord[]): Promise<JoinedLog> {
  const folder = await tempDir(t);
  // Two rotated files, the feedback mostly in the second.
  const half = Math.floor(records.length / 2);
  await writeLogFile(folder, 1, records.slice(0, half));
  await writeLogFile(folder, 2, records.slice(half));
  return joinPredictionLog(folder, MODEL);
}

function analyze(log: JoinedLog, options: Partial<ReportOptions> = {}): ExperimentReport {
  return analyzeExperiment(log, { metric: 'reward', alpha: 0.05, test: 'fixed', ...options });
}

/** The values of the metric per version, straight from the records, to check the report against. */
function feedbackValues(records: readonly LogRecord[], version: string): number[] {
  return records
    .filter((record): record is FeedbackRecord => record.type === 'feedback' && record.version === version)
    .map((record) => record.reward ?? record.value ?? Number.NaN);
}

const sum = (values: readonly number[]): number => values.reduce((total, value) => total + value, 0);

test('a binary reward is a rate: the two-proportion z-test on the same counts, Wald intervals per variant', async (t) => {
  const records = simulatedLog({ '1': converts(0.1), '2': converts(0.2) }, 500);
  const report = analyze(await joined(t, records), { plannedN: 400 });
  const [a, b] = [feedbackValues(records, '1'), feedbackValues(records, '2')];
  assert.equal(report.kind, 'rate');
  assert.equal(report.test.description, 'fixed-horizon two-proportion z-test');
  assert.deepEqual(
    report.variants.map((v) => [v.version, v.control, v.n]),
    [
      ['1', true, 500],
      ['2', false, 500],
    ],
  );
  const rate = sum(a) / 500;
  const half = normalQuantile(0.975) * Math.sqrt((rate * (1 - rate)) / 500);
  assert.equal(report.variants[0]?.estimate, rate);
  assert.deepEqual(report.variants[0]?.ci, [rate - half, rate + half]);
  const expected = twoProportionZTest(sum(a), 500, sum(b), 500, 0.95);
  const [comparison] = report.comparisons;
  assert.equal(comparison?.difference, expected.difference);
  assert.deepEqual(comparison?.ci, expected.confidenceInterval);
  assert.equal(comparison?.fixed_p_value, expected.pValue);
  assert.deepEqual(report.verdict, {
    decision: 'winner',
    winner: '2',
    text: `version 2 wins: reward higher than control 1 (p = ${Number(expected.pValue.toPrecision(2))} < alpha 0.05)`,
  });
});

test('before the planned n the fixed test calls no winner, however small p is; without one it calls none', async (t) => {
  const log = await joined(t, simulatedLog({ '1': converts(0.1), '2': converts(0.3) }, 500));
  const early = analyze(log, { plannedN: 3841 });
  assert.ok((early.comparisons[0]?.fixed_p_value ?? 1) < 1e-6);
  assert.deepEqual(early.verdict, {
    decision: 'planned_n_not_reached',
    winner: null,
    text: `${PLANNED_N_NOT_REACHED} (smallest arm 500 of 3,841)`,
  });
  assert.equal(PLANNED_N_NOT_REACHED, 'planned n not reached: do not stop early');
  const unplanned = analyze(log);
  assert.equal(unplanned.verdict.decision, 'no_planned_n');
  assert.equal(unplanned.verdict.winner, null);
  assert.match(
    unplanned.verdict.text,
    /run `batchserve experiment plan` and pass --planned-n, or use --test sequential/,
  );
});

test("a reward that is not 0/1 is a mean, compared by Welch's t-test on the same numbers", async (t) => {
  const mean =
    (centre: number): Arm =>
    (_uniform, normal) => ({ reward: centre + normal() });
  const records = simulatedLog({ '1': mean(5), '2': mean(5.5) }, 200);
  const report = analyze(await joined(t, records), { plannedN: 200 });
  const expected = welchTTest(summarize(feedbackValues(records, '1')), summarize(feedbackValues(records, '2')));
  assert.equal(report.kind, 'mean');
  assert.equal(report.test.fixed, "Welch's t-test");
  assert.equal(report.comparisons[0]?.difference, expected.difference);
  assert.deepEqual(report.comparisons[0]?.ci, expected.confidenceInterval);
  assert.equal(report.comparisons[0]?.fixed_p_value, expected.pValue);
  assert.equal(report.verdict.winner, '2');
});

test('latency and error rate: lower is better, so a faster variant wins and an erring one loses to the control', async (t) => {
  const served =
    (latency: number, errors: number): Arm =>
    (uniform, normal) => {
      const failed = uniform() < errors;
      return { status: failed ? 503 : 200, latency_ms: failed ? 1 : latency + 5 * normal() };
    };
  const log = await joined(t, simulatedLog({ '1': served(50, 0.01), '2': served(40, 0.1) }, 400));
  const latency = analyze(log, { metric: 'latency', plannedN: 300 });
  assert.equal(latency.better, 'lower');
  assert.equal(latency.kind, 'mean');
  const failures = log.predictions.filter((p) => p.version === '2' && p.status >= 500).length;
  assert.equal(latency.variants[1]?.n, 400 - failures, 'only 2xx answers count for latency');
  assert.equal(latency.variants[1]?.requests, 400);
  assert.equal(latency.variants[1]?.error_rate, failures / 400);
  assert.equal(latency.verdict.winner, '2');
  const errors = analyze(log, { metric: 'error-rate', plannedN: 300 });
  assert.equal(errors.kind, 'rate');
  assert.ok((errors.comparisons[0]?.difference ?? 0) > 0);
  assert.deepEqual([errors.verdict.decision, errors.verdict.winner], ['winner', '1']);
});

test('accuracy compares feedback labels with one-row predictions', async (t) => {
  const classifier =
    (accuracy: number): Arm =>
    (uniform) => ({ prediction: 'cat', label: uniform() < accuracy ? 'cat' : 'dog' });
  const report = analyze(await joined(t, simulatedLog({ '1': classifier(0.7), '2': classifier(0.72) }, 300)), {
    metric: 'accuracy',
    plannedN: 300,
  });
  assert.equal(report.kind, 'rate');
  assert.ok(Math.abs((report.variants[0]?.estimate ?? 0) - 0.7) < 0.08);
  assert.equal(report.verdict.decision, 'no_difference');
  assert.equal(report.verdict.text, 'no significant difference at alpha 0.05');
});

test('three variants split alpha by Bonferroni, and the intervals are at 1 − alpha per comparison', async (t) => {
  const records = simulatedLog({ '1': converts(0.1), '2': converts(0.12), '10': converts(0.3) }, 300);
  const report = analyze(await joined(t, records), { plannedN: 300 });
  assert.deepEqual(
    report.variants.map((v) => v.version),
    ['1', '2', '10'],
    'versions compare as numbers',
  );
  assert.equal(report.alpha_per_comparison, 0.025);
  const [a, c] = [feedbackValues(records, '1'), feedbackValues(records, '10')];
  const expected = twoProportionZTest(sum(a), 300, sum(c), 300, 0.975);
  assert.equal(report.comparisons[1]?.ci_confidence, 0.975);
  assert.deepEqual(report.comparisons[1]?.ci, expected.confidenceInterval);
  assert.equal(report.verdict.winner, '10');
});

test('--control picks the version the others are compared with; unknown ones and thin logs are data errors', async (t) => {
  const log = await joined(t, simulatedLog({ '1': converts(0.1), '2': converts(0.2) }, 100));
  const flipped = analyze(log, { control: '2' });
  const usual = analyze(log);
  assert.equal(flipped.control, '2');
  assert.equal(flipped.comparisons[0]?.version, '1');
  assert.equal(flipped.comparisons[0]?.difference, -(usual.comparisons[0]?.difference ?? 0));
  assert.throws(() => analyze(log, { control: '3' }), ExperimentDataError);
  assert.throws(() => analyze(log, { metric: 'accuracy' }), ExperimentDataError, 'no labels: no observations');
  const single = await joined(t, simulatedLog({ '1': converts(0.1) }, 50));
  assert.throws(() => analyze(single), ExperimentDataError);
});

test('sequential: a large true difference is decided, valid under continuous monitoring', async (t) => {
  const log = await joined(t, simulatedLog({ '1': converts(0.1), '2': converts(0.3) }, 500));
  const report = analyze(log, { test: 'sequential', plannedN: 1000 });
  assert.match(
    report.test.description,
    /^sequential: mixture SPRT \(τ = 0\.0\d+, 10 % of the control's rate\), always valid$/,
  );
  assert.equal(report.test.tau_from, 'control');
  const [comparison] = report.comparisons;
  assert.ok((comparison?.sequential_looks ?? 0) > 100);
  assert.ok((comparison?.sequential_p_value ?? 1) >= (comparison?.fixed_p_value ?? 0), 'peeking costs evidence');
  assert.equal(report.verdict.winner, '2');
  assert.match(report.verdict.text, /valid under continuous monitoring \(smallest arm 500 of 1,000\)$/);
  const planned = analyze(log, { test: 'sequential', mde: -0.05 });
  assert.deepEqual([planned.test.tau, planned.test.tau_from], [0.05, 'mde']);
});

test('sequential: no true difference keeps collecting, and the replay follows time, not file order', async (t) => {
  const records = simulatedLog({ '1': converts(0.2), '2': converts(0.2) }, 500, 7);
  const report = analyze(await joined(t, records), { test: 'sequential' });
  assert.deepEqual(report.verdict, {
    decision: 'keep_collecting',
    winner: null,
    text: 'no decision yet: keep collecting; this p-value stays valid however often you look',
  });
  const reversed = analyze(await joined(t, records.toReversed()), { test: 'sequential' });
  assert.equal(reversed.comparisons[0]?.sequential_p_value, report.comparisons[0]?.sequential_p_value);
});

test('p99 is the nearest rank over every served request of a version', () => {
  assert.equal(
    nearestRank(
      Array.from({ length: 100 }, (_, i) => 100 - i),
      0.99,
    ),
    99,
  );
  assert.equal(nearestRank([7], 0.99), 7);
  const predictions = [200, 200, 500].map((status, i) => ({ id: `${i}`, version: '1', time: i, status, latencyMs: i }));
  assert.deepEqual(guardrailsByVersion(predictions).get('1'), { requests: 3, errorRate: 1 / 3, p99LatencyMs: 2 });
});
