import { test } from 'node:test';
import assert from 'node:assert/strict';
import { servedStats, versionSplitWarning } from '../../src/bench/served-version.js';
import { ModelStatistics } from '../../src/metrics/model-statistics.js';
import type { PointResult } from '../../src/bench/report-types.js';
import { samplePoints } from './sample-report.js';

const TIMINGS = { queueNs: 1e5, computeInputNs: 1e4, computeInferNs: 2e6, computeOutputNs: 1e4, totalNs: 3e6 };

/** Statistics of versions 1 and 2 that serve `requests` each, one row per pass. */
function versions(): { stats: Record<string, ModelStatistics>; serve: (version: string, requests: number) => void } {
  const stats = { '1': new ModelStatistics('affine', '1'), '2': new ModelStatistics('affine', '2') };
  const serve = (version: string, requests: number): void => {
    for (let i = 0; i < requests; i++) {
      stats[version as '1' | '2'].recordSuccess(TIMINGS);
      stats[version as '1' | '2'].recordExecution(1, TIMINGS);
    }
  };
  return { stats, serve };
}

const snapshot = (stats: Record<string, ModelStatistics>) => Object.values(stats).map((entry) => entry.toJSON());

test('the version the answers named is read, whatever its place in /stats', () => {
  const { stats, serve } = versions();
  serve('1', 5);
  const before = snapshot(stats);
  serve('2', 30);
  const served = servedStats(before, snapshot(stats), { '2': 30 });
  assert.equal(served.version, '2');
  assert.equal(served.after.inference_stats.success.count - served.before.inference_stats.success.count, 30);
});

test('several versions answered: the one most answers named', () => {
  const { stats, serve } = versions();
  const before = snapshot(stats);
  serve('1', 12);
  serve('2', 9);
  assert.equal(servedStats(before, snapshot(stats), { '2': 9, '1': 12 }).version, '1');
});

test('no answer named a version: the version whose successes grew most during the point', () => {
  const { stats, serve } = versions();
  serve('2', 50);
  const before = snapshot(stats);
  serve('1', 3);
  serve('2', 1);
  assert.equal(servedStats(before, snapshot(stats), undefined).version, '1');
});

test('a version loaded during the point counts everything it did as the point’s', () => {
  const { stats, serve } = versions();
  const before = snapshot(stats).filter((entry) => entry.version === '1');
  serve('2', 7);
  const served = servedStats(before, snapshot(stats), { '2': 7 });
  assert.equal(served.version, '2');
  assert.equal(served.before.inference_stats.success.count, 0);
  assert.deepEqual(served.before.batch_stats, []);
  assert.equal(served.before.inference_stats.cache_hit.count, 0, 'every counter zero, whatever its name');
});

test('the split warning names the points several versions answered, once', () => {
  assert.equal(versionSplitWarning(samplePoints), undefined, 'no point says which versions answered');
  const [first, second] = samplePoints;
  assert.ok(first && second);
  const points: PointResult[] = [
    { ...first, versions: { '1': 20, '2': 22 } },
    { ...second, versions: { '2': 40 } },
    { ...first, versions: { '1': 1, '2': 3 } },
  ];
  assert.equal(
    versionSplitWarning(points),
    'several model versions answered 2 point(s) (at B=1 d=0 i=1, c=1: version 1 20, version 2 22 answers); ' +
      'their server-side figures and the fit are the statistics of the version that answered most (serverSide.version)',
  );
});
