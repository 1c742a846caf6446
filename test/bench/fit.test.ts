import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  fitBatchCost,
  predictedSpeedup,
  recommend,
  samplesFromStats,
  speedupFitOf,
  speedupTable,
} from '../../src/bench/fit.js';
import { formatDuration } from '../../src/config/schema-kit.js';
import type { BatchCostFit } from '../../src/bench/report-types.js';
import { ModelStatistics } from '../../src/metrics/model-statistics.js';
import { SAMPLE_SLO_P99_MS, samplePoint, samplePoints } from './sample-report.js';

function exactSamples(c: number, m: number, sizes: readonly number[]): BatchCostFit['samples'][number][] {
  return sizes.map((batchSize) => ({ batchSize, ms: c + m * batchSize, count: 10 }));
}

function assertClose(actual: number, expected: number, relative: number, what: string): void {
  assert.ok(
    Math.abs(actual - expected) <= relative * Math.abs(expected),
    `${what}: ${actual} is not within ${relative} of ${expected}`,
  );
}

function fitOf(samples: readonly BatchCostFit['samples'][number][]): BatchCostFit {
  const fit = fitBatchCost(samples);
  assert.ok(fit, 'a fit');
  return fit;
}

test('exact timings give back c and m, R² 1 and the ceiling 1 + c/m', () => {
  const fit = fitOf(exactSamples(2, 0.5, [1, 2, 4, 8, 16]));
  assertClose(fit.c, 2, 1e-12, 'c');
  assertClose(fit.m, 0.5, 1e-12, 'm');
  assertClose(fit.r2, 1, 1e-12, 'R²');
  assertClose(fit.ceiling ?? NaN, 5, 1e-12, 'ceiling');
  assert.equal(fit.failure, undefined);
  assert.equal(fit.poorFit, false);
});

test('property: for any c > 0, m > 0 and batch sizes, exact timings give back c and m', () => {
  fc.assert(
    fc.property(
      fc.double({ min: 0.01, max: 100, noNaN: true }),
      fc.double({ min: 0.001, max: 10, noNaN: true }),
      fc.uniqueArray(fc.integer({ min: 1, max: 1024 }), { minLength: 2, maxLength: 12 }),
      (c, m, sizes) => {
        const fit = fitOf(exactSamples(c, m, sizes));
        assertClose(fit.c, c, 1e-6, 'c');
        assertClose(fit.m, m, 1e-6, 'm');
        assertClose(fit.ceiling ?? NaN, 1 + c / m, 1e-6, 'ceiling');
      },
    ),
  );
});

test('noisy timings give c and m within a few percent', () => {
  // ±2% around 3 ms + 0.25 ms·B, alternating so the noise does not tilt the line.
  const samples = [1, 2, 4, 6, 8, 12, 16, 24, 32].map((batchSize, i) => ({
    batchSize,
    ms: (3 + 0.25 * batchSize) * (i % 2 === 0 ? 1.02 : 0.98),
    count: 50,
  }));
  const fit = fitOf(samples);
  assertClose(fit.c, 3, 0.1, 'c');
  assertClose(fit.m, 0.25, 0.05, 'm');
  assert.ok(fit.r2 > 0.99 && fit.r2 < 1, `R² ${fit.r2}`);
  assert.equal(fit.poorFit, false);
});

test('each batch size counts once, whatever its count; repeated sizes are merged by count', () => {
  const even = fitOf(exactSamples(2, 0.5, [1, 4, 16]));
  const skewed = fitOf([
    { batchSize: 1, ms: 2.5, count: 1 },
    { batchSize: 4, ms: 4, count: 1 },
    { batchSize: 16, ms: 10, count: 100_000 },
  ]);
  assertClose(skewed.c, even.c, 1e-12, 'c');
  assertClose(skewed.m, even.m, 1e-12, 'm');

  const merged = fitOf([
    { batchSize: 1, ms: 2, count: 1 },
    { batchSize: 1, ms: 3, count: 3 },
    { batchSize: 8, ms: 6, count: 2 },
  ]);
  assert.deepEqual(merged.samples, [
    { batchSize: 1, ms: 2.75, count: 4 },
    { batchSize: 8, ms: 6, count: 2 },
  ]);
});

test('scattered timings are a poor fit; flat or falling ones fail with no ceiling; one batch size has no fit', () => {
  const scattered = fitOf([
    { batchSize: 1, ms: 5, count: 1 },
    { batchSize: 2, ms: 1, count: 1 },
    { batchSize: 3, ms: 6, count: 1 },
    { batchSize: 4, ms: 2, count: 1 },
    { batchSize: 5, ms: 6, count: 1 },
  ]);
  assert.ok(scattered.r2 < 0.9, `R² ${scattered.r2}`);
  assert.equal(scattered.poorFit, true);

  const flat = fitOf(exactSamples(4, 0, [1, 8, 16]));
  assert.equal(flat.m, 0);
  assert.deepEqual([flat.failure, flat.ceiling, flat.poorFit], ['m ≤ 0', undefined, false]);

  const falling = fitOf(exactSamples(10, -0.1, [1, 8, 16]));
  assert.deepEqual([falling.failure, falling.ceiling], ['m ≤ 0', undefined]);
  assert.equal('ceiling' in falling, false, 'no ceiling key in the JSON either');

  assert.equal(fitBatchCost([]), undefined);
  assert.equal(fitBatchCost([{ batchSize: 4, ms: 3, count: 5 }]), undefined);
  assert.equal(
    fitBatchCost([
      { batchSize: 4, ms: 3, count: 5 },
      { batchSize: 4, ms: 3.2, count: 5 },
      { batchSize: 8, ms: 5, count: 0 },
    ]),
    undefined,
  );
});

test('a line with c < 0 is a failed fit however high its R²: no ceiling, no predicted speedups', () => {
  // Issue #16's run: c = −21.4 ms with R² 0.954 printed "ceiling −0.56×".
  const fit = fitOf(
    [4, 8, 16, 32].map((batchSize, i) => ({
      batchSize,
      ms: (-21.4 + 10 * batchSize) * (i % 2 ? 1.03 : 0.97),
      count: 20,
    })),
  );
  assert.ok(fit.c < 0 && fit.r2 > 0.9, `c ${fit.c}, R² ${fit.r2}`);
  assert.deepEqual([fit.failure, fit.ceiling, fit.poorFit], ['c < 0', undefined, false]);
  const rows = speedupTable(fit, samplePoints);
  assert.deepEqual(
    rows.map((row) => Object.keys(row).sort()),
    [
      ['batchSize', 'measured'],
      ['batchSize', 'measured'],
      ['batchSize', 'measured'],
    ],
    'measured speedups stay; none is predicted from the failed line',
  );
  assert.equal(rows[1]?.measured, 1318.4 / 396.1);
  // c = 0 is no failure: a pass with no fixed cost gains nothing from batching, ceiling 1.
  assert.equal(fitOf(exactSamples(0, 1, [1, 4])).ceiling, 1);
});

test('the speedups come from the in-process fit unless it failed where the server fit did not', () => {
  const good = fitOf(exactSamples(2, 0.5, [1, 8]));
  const failed = fitOf(exactSamples(-1, 0.5, [4, 8]));
  assert.equal(speedupFitOf({ fit: good, inProcess: good }), 'inProcess');
  assert.equal(speedupFitOf({ fit: good, inProcess: failed }), 'fit');
  assert.equal(speedupFitOf({ fit: failed, inProcess: failed }), 'inProcess');
  assert.equal(speedupFitOf({ inProcess: failed }), 'inProcess');
  assert.equal(speedupFitOf({ fit: failed }), 'fit');
  assert.equal(speedupFitOf({}), undefined);
});

test('S(B) = B(c+m)/(c+Bm): 1 at B=1, rising towards 1 + c/m', () => {
  const fit = { c: 2, m: 0.5 };
  assert.equal(predictedSpeedup(fit, 1), 1);
  assert.equal(predictedSpeedup(fit, 8), 10 / 3);
  assert.equal(predictedSpeedup(fit, 16), 4);
  assert.ok(predictedSpeedup(fit, 1e9) < 5 && predictedSpeedup(fit, 1e9) > 4.999);
});

test('samplesFromStats: mean compute_infer per batch size of the passes between two snapshots', () => {
  const stats = new ModelStatistics('resnet18', '1', () => 0);
  const pass = (batchSize: number, ms: number): void =>
    stats.recordExecution(batchSize, { computeInputNs: 1, computeInferNs: ms * 1e6, computeOutputNs: 1 });
  pass(1, 100);
  pass(4, 100);
  const before = stats.toJSON();
  pass(1, 2);
  pass(1, 3);
  pass(8, 6);
  const after = stats.toJSON();

  assert.deepEqual(samplesFromStats(before, after), [
    { batchSize: 1, ms: 2.5, count: 2 },
    { batchSize: 8, ms: 6, count: 1 },
  ]);
  assert.deepEqual(samplesFromStats(undefined, before), [
    { batchSize: 1, ms: 100, count: 1 },
    { batchSize: 4, ms: 100, count: 1 },
  ]);
  // A restarted server's counters start again from zero: not this window's passes.
  assert.deepEqual(samplesFromStats(after, new ModelStatistics('resnet18', '1').toJSON()), []);
});

test('speedup table: predicted, achievable bound and measured per swept max_batch_size', () => {
  const fit = { c: 2, m: 0.5 };
  const rows = speedupTable(fit, samplePoints);
  assert.deepEqual(
    rows.map((r) => r.batchSize),
    [1, 8, 16],
  );
  const [one, eight, sixteen] = rows;
  assert.deepEqual(one, { batchSize: 1, predicted: 1, achievableBound: 1, measured: 1 });
  assert.equal(eight?.predicted, 10 / 3);
  assert.equal(eight?.achievableBound, 10 / 3);
  // B=1's best error-free point is c=8 (396.1 req/s: c=32 had 503s); B=16's is i=1 c=32.
  assert.equal(eight?.measured, 1318.4 / 396.1);
  assert.equal(sixteen?.measured, 1561.2 / 396.1);
  assert.equal(sixteen?.achievableBound, 4);
});

test('speedup table: a closed loop can only fill concurrency × client batch ÷ instances rows', () => {
  const fit = { c: 2, m: 0.5 };
  const at = (instances: number, concurrency: number, clientBatch = 1) =>
    samplePoint(
      [16, 2000, instances],
      { kind: 'concurrency', concurrency },
      { throughput: 500, p50: 5, p99: 9, averageBatch: 2, clientBatch },
    );
  const bound = (...points: Parameters<typeof speedupTable>[1]) => speedupTable(fit, points)[0]?.achievableBound;
  assert.equal(bound(at(1, 2)), predictedSpeedup(fit, 2));
  assert.equal(bound(at(2, 7)), predictedSpeedup(fit, 4));
  assert.equal(bound(at(1, 2, 4)), predictedSpeedup(fit, 8));
  assert.equal(bound(at(1, 2), at(1, 6)), predictedSpeedup(fit, 6));
  assert.equal(bound(at(1, 64)), predictedSpeedup(fit, 16));
  const rate = samplePoint(
    [16, 2000, 1],
    { kind: 'rate', rate: 50, arrival: 'constant' },
    { throughput: 50, p50: 5, p99: 9, averageBatch: 1 },
  );
  assert.equal(bound(rate), predictedSpeedup(fit, 16));
  assert.equal(speedupTable(fit, [at(1, 2)])[0]?.measured, undefined, 'no B=1 point to compare with');
});

test('recommend picks the highest throughput under the p99 objective and skips points with errors', () => {
  const rec = recommend(samplePoints, SAMPLE_SLO_P99_MS);
  assert.ok(rec);
  assert.equal(rec.sloP99Ms, SAMPLE_SLO_P99_MS);
  assert.deepEqual(rec.point.server, { maxBatchSize: 16, maxQueueDelayUs: 2000, instances: 2 });
  assert.deepEqual(rec.point.load, { kind: 'concurrency', concurrency: 8 });
  assert.equal(
    rec.snippet,
    'max_batch_size: 16\ndynamic_batching:\n  max_queue_delay: 2ms\ninstances:\n  - { count: 2, device: cpu }\n',
  );
  assert.equal(recommend(samplePoints, 30)?.point.throughput, 1249, 'a stable point before a faster unstable one');
  const unstable = samplePoints.filter((point) => !point.stable);
  assert.equal(recommend(unstable, 30)?.point.throughput, 1561.2, 'an unstable one only when nothing stable qualifies');
  assert.equal(recommend(samplePoints, 1), undefined);
  assert.equal(recommend([], 50), undefined);
  const plain = { ...(samplePoints[0] as (typeof samplePoints)[number]), server: undefined };
  assert.equal(recommend([plain], 1e9), undefined, 'a plain HTTP point has no settings to recommend');
});

test('delays are written as model-config.yaml writes them', () => {
  assert.equal(formatDuration(0), '0');
  assert.equal(formatDuration(250), '250us');
  assert.equal(formatDuration(2000), '2ms');
  assert.equal(formatDuration(1500), '1500us');
  assert.equal(formatDuration(1_000_000), '1s');
});
