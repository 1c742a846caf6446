import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkGate, parseFailOn, parseRegression } from '../../src/bench/gate.js';
import type { BenchReport, PointResult } from '../../src/bench/report-types.js';
import { sampleReport } from './sample-report.js';

const usageError = { code: 'BS_ERR_USAGE' };

test('parseFailOn reads metrics, operators and units', () => {
  assert.deepEqual(parseFailOn('p99>50ms,throughput<1000,errors>0'), [
    { metric: 'p99', op: '>', value: 50 },
    { metric: 'throughput', op: '<', value: 1000 },
    { metric: 'errors', op: '>', value: 0 },
  ]);
  assert.deepEqual(parseFailOn(' p50 >= 0.5s , p90<=250us, p99.9>12 '), [
    { metric: 'p50', op: '>=', value: 500 },
    { metric: 'p90', op: '<=', value: 0.25 },
    { metric: 'p999', op: '>', value: 12 },
  ]);
  assert.deepEqual(parseFailOn('items<500/s,error_rate>1.5%,P999>.5ms'), [
    { metric: 'items', op: '<', value: 500 },
    { metric: 'error_rate', op: '>', value: 1.5 },
    { metric: 'p999', op: '>', value: 0.5 },
  ]);
});

test('parseFailOn rejects bad rules with a usage error naming each', () => {
  for (const spec of [
    '',
    ' , ',
    'p95>50ms',
    'p99>fast',
    'p99=50',
    'p99>-5',
    'throughput<10ms',
    'errors>1%',
    'p99>5h',
  ]) {
    assert.throws(() => parseFailOn(spec), usageError, spec);
  }
  assert.throws(
    () => parseFailOn('p95>50ms,throughput<10ms,p99>5'),
    (error: Error) => {
      assert.match(error.message, /unknown metric "p95"/);
      assert.match(error.message, /throughput takes a plain number or one of \/s, not "ms"/);
      return true;
    },
  );
});

test('parseRegression reads a percentage', () => {
  assert.equal(parseRegression('10%'), 10);
  assert.equal(parseRegression('12.5'), 12.5);
  for (const bad of ['ten', '-5%', '', '5%%']) assert.throws(() => parseRegression(bad), usageError, bad);
  assert.throws(() => parseRegression('x', '--stability'), /^UsageError: --stability: expected a percentage/);
});

test('thresholds apply to the recommended point, errors to every point', () => {
  assert.deepEqual(checkGate(sampleReport, parseFailOn('p99>25ms,throughput<1000,items<1000')), []);
  assert.deepEqual(checkGate(sampleReport, parseFailOn('p99>5ms,p999>=10.53,throughput<2000')), [
    'p99 8.1 ms > 5 ms at B=16 d=2ms i=2, c=8',
    'p99.9 10.53 ms >= 10.53 ms at B=16 d=2ms i=2, c=8',
    'throughput 1249 req/s < 2000 req/s at B=16 d=2ms i=2, c=8',
  ]);
  assert.deepEqual(checkGate(sampleReport, parseFailOn('errors>0')), [
    'errors 12 > 0 at B=1 d=0 i=1, c=32 (503×12)',
    'errors 1 > 0 at B=16 d=2ms i=2, c=32 (connection×1)',
  ]);
  // 12 of 3992 requests is 0.3%; 1 of 17224 is 0.006%.
  assert.deepEqual(checkGate(sampleReport, parseFailOn('error_rate>1%')), []);
  assert.deepEqual(checkGate(sampleReport, parseFailOn('error_rate>0.1%')), [
    'error_rate 0.3% > 0.1% at B=1 d=0 i=1, c=32 (503×12)',
  ]);
});

test('without a recommendation the highest-throughput point is the one checked', () => {
  const report: BenchReport = { ...sampleReport, recommendation: undefined };
  assert.deepEqual(checkGate(report, parseFailOn('p99>20ms,throughput<1000')), [
    'p99 21 ms > 20 ms at B=16 d=2ms i=2, c=32',
  ]);
  assert.deepEqual(checkGate({ ...report, points: [] }, parseFailOn('errors>0')), [
    'the report has no points to check',
  ]);
  assert.deepEqual(checkGate({ ...report, points: [] }, []), [], 'nothing to check');
});

function adjusted(
  report: BenchReport,
  changes: Map<number, Partial<{ throughput: number; p99: number }>>,
): BenchReport {
  const points = report.points.map((point, i): PointResult => {
    const change = changes.get(i);
    if (!change) return point;
    return {
      ...point,
      throughput: change.throughput ?? point.throughput,
      latency: { ...point.latency, p99: change.p99 ?? point.latency.p99 },
    };
  });
  return { ...report, points };
}

test('a baseline flags each point whose throughput fell or p99 rose beyond the allowed percentage', () => {
  assert.deepEqual(checkGate(sampleReport, [], sampleReport, 10), []);
  // Point 4 is B=8 d=2ms i=1, c=8 (1142.9 req/s); point 9 the 1000/s poisson one (p99 11.2 ms).
  const slower = adjusted(
    sampleReport,
    new Map([
      [4, { throughput: 914.32 }],
      [9, { p99: 14 }],
      [10, { throughput: 1249 * 0.95, p99: 8.1 * 1.05 }],
    ]),
  );
  assert.deepEqual(checkGate(slower, [], sampleReport, 10), [
    "throughput 914.3 req/s is 20.0% below the baseline's 1142.9 req/s at B=8 d=2ms i=1, c=8 (allowed 10%)",
    "p99 14 ms is 25.0% above the baseline's 11.2 ms at B=16 d=2ms i=1, 1000/s poisson (allowed 10%)",
  ]);
  assert.equal(checkGate(slower, [], sampleReport, 22).length, 1);
  assert.equal(checkGate(slower, [], sampleReport).length, 2, 'the default allows 10%');
  // Faster is never a regression.
  assert.deepEqual(checkGate(sampleReport, [], slower, 1), []);
});

test('a baseline from another sweep is itself a violation, not a silent pass', () => {
  const other: BenchReport = {
    ...sampleReport,
    points: sampleReport.points.map((p) => ({ ...p, clientBatch: 4 })),
  };
  assert.deepEqual(checkGate(sampleReport, [], other), [
    'the baseline has no point with the same configuration and load as this run',
  ]);
});
