import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../../src/core/errors.js';
import { reportOptions, type ExperimentReportOptions } from '../../src/cli/experiment-report.js';
import { tempDir } from '../fixtures/temp.js';
import { MODEL, converts, prediction, simulatedLog, writeLogFile } from './log-fixture.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function batchserve(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/batchserve.js', ...args], { cwd: ROOT }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
  });
}

/** The folder `serve --prediction-log DIR` writes: one log folder per model, rotated. */
async function servedLogs(root: string): Promise<void> {
  const records = simulatedLog({ '1': converts(0.1), '2': converts(0.3) }, 300);
  await writeLogFile(join(root, MODEL), 1, records.slice(0, 400));
  await writeLogFile(join(root, MODEL), 2, records.slice(400), '{"type":"feedback","id":"1-');
  await writeLogFile(join(root, 'other'), 1, [prediction('o', '1', 0, { model: 'other' })]);
}

test('experiment report prints the variants, the comparison, the test used and the verdict', async (t) => {
  const root = await tempDir(t);
  await servedLogs(root);
  const { code, stdout, stderr } = await batchserve(
    ...['experiment', 'report', '--log', root, '--model', MODEL, '--planned-n', '1000'],
  );
  assert.equal(code, 0, stderr);
  assert.match(stdout, /^model ranker, metric reward \(higher is better\), control 1$/m);
  assert.match(stdout, /^log: 3 files, 600 served predictions, 600 feedback records; 0 shadow records left out$/m);
  assert.match(stdout, /^1 line skipped: not records$/m);
  assert.match(stdout, /^binary reward: compared as a rate$/m);
  assert.match(stdout, /│ 1 \(control\) │ 300 │ \d+\.\d\d% \(/);
  assert.match(stdout, /p, two-proportion z-test │ p, always valid \(mSPRT\)/);
  assert.match(stdout, /^test: fixed-horizon two-proportion z-test$/m);
  assert.match(stdout, /^verdict: planned n not reached: do not stop early \(smallest arm 300 of 1,000\)$/m);
});

test('experiment report --json prints one document; --test sequential decides a large difference', async (t) => {
  const root = await tempDir(t);
  await servedLogs(root);
  const args = [
    'experiment',
    'report',
    '--log',
    root,
    '--model',
    MODEL,
    '--test',
    'sequential',
    '--mde',
    '0.1',
    '--json',
  ];
  const { code, stdout, stderr } = await batchserve(...args);
  assert.equal(code, 0, stderr);
  const report = JSON.parse(stdout);
  assert.deepEqual(Object.keys(report), [
    ...['model', 'metric', 'kind', 'better', 'control', 'alpha', 'alpha_per_comparison', 'planned_n', 'test', 'log'],
    ...['variants', 'comparisons', 'verdict'],
  ]);
  assert.deepEqual(Object.keys(report.variants[0]), [
    ...['version', 'control', 'n', 'estimate', 'ci', 'requests', 'error_rate', 'p99_latency_ms'],
  ]);
  assert.deepEqual(Object.keys(report.comparisons[0]), [
    ...['version', 'difference', 'ci', 'ci_confidence', 'fixed_p_value', 'sequential_p_value', 'sequential_looks'],
  ]);
  assert.deepEqual(report.log, {
    files: 3,
    skipped_lines: 1,
    served_predictions: 600,
    shadow_records: 0,
    feedback_records: 600,
    unjoined_feedback: 0,
  });
  assert.equal(report.planned_n, null);
  assert.equal(report.test.chosen, 'sequential');
  assert.equal(report.verdict.winner, '2');
});

test('experiment report errors end with one line, a code and exit code 2', async (t) => {
  const root = await tempDir(t);
  await servedLogs(root);
  const cases: [string[], string][] = [
    [['--log', join(root, 'missing'), '--model', MODEL], 'BS_ERR_PREDICTION_LOG_READ'],
    [['--log', root, '--model', 'nobody'], 'BS_ERR_PREDICTION_LOG_READ'],
    [['--log', root, '--model', 'other'], 'BS_ERR_EXPERIMENT_DATA'],
    [['--log', root, '--model', MODEL, '--metric', 'clicks'], 'BS_ERR_USAGE'],
  ];
  const results = await Promise.all(cases.map(([flags]) => batchserve('experiment', 'report', ...flags)));
  for (const [index, { code, stdout, stderr }] of results.entries()) {
    const [flags, errorCode] = cases[index] ?? [[], ''];
    assert.equal(code, 2, flags.join(' '));
    assert.equal(stdout, '', flags.join(' '));
    assert.equal(stderr.trimEnd().split('\n').length, 1, `${flags.join(' ')}: ${stderr}`);
    assert.match(stderr, new RegExp(`\\[${errorCode}\\]$`, 'm'), flags.join(' '));
  }
});

test('report flags are checked before the log is read', () => {
  const flags: ExperimentReportOptions = {
    ...{ log: 'unused', model: MODEL, metric: 'latency', alpha: '0.01', test: 'sequential', json: false },
    ...{ control: '2', plannedN: '3841', mde: '-5' },
  };
  assert.deepEqual(reportOptions(flags), {
    metric: 'latency',
    test: 'sequential',
    alpha: 0.01,
    control: '2',
    plannedN: 3841,
    mde: -5,
  });
  for (const bad of [{ test: 'bayesian' }, { plannedN: 'many' }, { plannedN: '0' }, { alpha: '5' }, { mde: '0' }]) {
    assert.throws(() => reportOptions({ ...flags, ...bad }), UsageError, JSON.stringify(bad));
  }
});
