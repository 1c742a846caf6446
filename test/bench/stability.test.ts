import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { instabilityReason, isStable, windowVariation, type WindowFigures } from '../../src/bench/stability.js';
import { buildReport } from '../../src/bench/report.js';
import { POINT_COLUMNS, pointCells, renderCsv, renderTable } from '../../src/bench/report-table.js';
import type { PointResult, WindowVariation } from '../../src/bench/report-types.js';
import { samplePoint } from './sample-report.js';

/** [throughput, p99Ms] or [throughput, p99Ms, completedPerSecond]; without errors unless told. */
const windows = (...figures: ([number, number] | [number, number, number])[]): WindowFigures[] =>
  figures.map(([throughput, p99Ms, completedPerSecond = throughput]) => ({ throughput, p99Ms, completedPerSecond }));

test('the variation is each figure’s largest distance from its mean over the last windows, in %', () => {
  // Throughput 90, 100, 110: mean 100, ±10 %. p99 10, 10, 13: mean 11, 2/11 = ±18.2 %.
  const variation = windowVariation(windows([500, 1], [90, 10], [100, 10], [110, 13]), 3, 10);
  assert.equal(variation.compared, 3);
  assert.equal(variation.required, 3);
  assert.equal(variation.limitPct, 10);
  assert.ok(Math.abs(variation.throughputPct - 10) < 1e-9);
  assert.ok(Math.abs(variation.p99Pct - 200 / 11) < 1e-9);
  assert.equal(instabilityReason(variation), 'p99 ±18%');
  assert.deepEqual(windowVariation([], 3, 10), {
    compared: 0,
    required: 3,
    limitPct: 10,
    throughputPct: 0,
    p99Pct: 0,
    completedPct: 0,
    emptyWindows: 0,
  });
  assert.equal(windowVariation(windows([0, 0], [0, 0], [0, 0]), 3, 10).p99Pct, 0, 'no requests, no spread');
});

test('windows in which nothing completed agree on nothing: counted, named, never stable', () => {
  // A server that stalls answers nothing for two windows: 0 req/s and p99 0 both times, within any limit.
  const stalled = windows([100, 10], [0, 0, 0], [0, 0, 0]);
  assert.equal(isStable(stalled, 2, 10), false);
  const variation = windowVariation(stalled, 3, 10);
  assert.equal(variation.emptyWindows, 2);
  assert.equal(instabilityReason(variation), '2 of 3 windows empty');
  // Every request failed: nothing succeeded, but each window measured its failures, at a rate
  // that must hold like any figure's (5 and 9 a second: ±2/7).
  assert.equal(isStable(windows([0, 0, 5], [0, 0, 5]), 2, 10), true);
  const swinging = windows([0, 0, 5], [0, 0, 9]);
  assert.equal(isStable(swinging, 2, 10), false);
  assert.equal(instabilityReason(windowVariation(swinging, 2, 10)), 'completed/s ±29%');
});

test('the reason names the figures beyond the limit, or the windows the run lacked', () => {
  const at = (throughputPct: number, p99Pct: number, compared = 3): WindowVariation => ({
    compared,
    required: 3,
    limitPct: 10,
    throughputPct,
    p99Pct,
  });
  assert.equal(instabilityReason(at(14.2, 31)), 'req/s ±14%, p99 ±31%');
  assert.equal(instabilityReason(at(12, 4)), 'req/s ±12%');
  assert.equal(instabilityReason(at(3.14, 9.5)), 'req/s ±3.1%, p99 ±9.5%', 'within: both shown');
  assert.equal(instabilityReason(at(0, 0, 2)), '2 of 3 windows');
});

test('a variation inside the limit is exactly what the load generator calls stable', () => {
  const figure = fc.double({ min: 1, max: 1000, noNaN: true });
  fc.assert(
    fc.property(
      fc.array(fc.tuple(figure, figure), { minLength: 3, maxLength: 8 }),
      fc.integer({ min: 1, max: 40 }),
      (runs, pct) => {
        const full = windows(...runs);
        const variation = windowVariation(full, 3, pct);
        const within = variation.throughputPct <= pct + 1e-9 && variation.p99Pct <= pct + 1e-9;
        // Equal at the boundary up to rounding; away from it the two rules agree.
        const nearEdge = [variation.throughputPct, variation.p99Pct].some((v) => Math.abs(v - pct) < 1e-6);
        return nearEdge || within === isStable(full, 3, pct);
      },
    ),
  );
});

test('the table says why a point is not stable, and the warning says what to change', () => {
  const steady = samplePoint(
    [8, 0, 1],
    { kind: 'concurrency', concurrency: 4 },
    { throughput: 300, p50: 5, p99: 9, averageBatch: 2 },
  );
  const shaky: PointResult = {
    ...steady,
    stable: false,
    variation: { compared: 3, required: 3, limitPct: 10, throughputPct: 4, p99Pct: 23.4 },
  };
  const short: PointResult = {
    ...steady,
    stable: false,
    variation: { compared: 1, required: 3, limitPct: 10, throughputPct: 0, p99Pct: 0 },
  };
  const stableCell = (point: PointResult): string | undefined => pointCells(point)[POINT_COLUMNS.indexOf('stable')];
  assert.equal(stableCell(steady), '✓');
  assert.equal(stableCell(shaky), '✗ p99 ±23%');
  assert.equal(stableCell(short), '✗ 1 of 3 windows');
  assert.equal(stableCell({ ...shaky, variation: undefined }), '✗', 'a report from before variations were kept');

  const report = buildReport({
    target: { model: 'm', protocol: 'v2-binary' },
    points: [steady, shaky],
    serverSamples: [],
  });
  const warning = report.warnings.find((w) => w.includes('did not stabilize'));
  assert.ok(warning, JSON.stringify(report.warnings));
  assert.match(warning, /^1 point\(s\) did not stabilize/);
  assert.match(warning, /more than ±10% from the mean of the last 3 windows/);
  assert.match(warning, /--window/);
  assert.match(renderTable(report), /✗ p99 ±23%/);
  const [head, , row] = renderCsv(report)
    .split('\r\n')
    .map((line) => line.split(','));
  assert.equal(row?.[head?.indexOf('p99_variation_pct') ?? -1], '23.4');
});
