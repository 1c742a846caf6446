import { test } from 'node:test';
import assert from 'node:assert/strict';
import { duration, renderBar, renderLine, startProgress, type ProgressSnapshot } from '../../src/predict/progress.js';

const snapshot: ProgressSnapshot = {
  total: 10_000,
  done: 4_500,
  startedAt: 500,
  failed: 3,
  saved: 4_000,
  elapsedMs: 5_000,
};

test('progress: a plain line and a bar with rows, rate over this run, ETA and failures', () => {
  assert.equal(renderLine(snapshot), 'predict: 4500/10000 rows (45.0%), 800 rows/s, ETA 7s, 3 failed, 4000 saved');
  const bar = renderBar(snapshot, 80);
  assert.equal(bar.length, 79, 'one column short of the width: a full last column makes some terminals wrap');
  assert.match(bar, /^\[#+\.+\] 4,500\/10,000 {2}800 rows\/s {2}ETA 7s {2}3 failed$/);
  const inside = bar.slice(1, bar.indexOf(']'));
  assert.equal(inside.replaceAll('.', '').length, Math.round(0.45 * inside.length), '45 % filled');
  assert.match(renderLine({ ...snapshot, elapsedMs: 0 }), /0\.0 rows\/s, ETA \?/);
  assert.match(renderLine({ ...snapshot, done: 10_000 }), /\(100\.0%\).*ETA 0s/);
  assert.match(renderLine({ ...snapshot, total: 0, done: 0, startedAt: 0 }), /0\/0 rows \(100\.0%\)/);
  assert.deepEqual([duration(7.4), duration(185), duration(7_260)], ['7s', '3m05s', '2h01m']);
});

test('progress: quiet writes nothing; a bar ends on its own line', () => {
  const written: string[] = [];
  startProgress({ mode: 'quiet', write: (text) => written.push(text), intervalMs: 1, snapshot: () => snapshot }).stop();
  assert.equal(written.length, 0);
  startProgress({
    mode: 'bar',
    write: (text) => written.push(text),
    intervalMs: 1,
    snapshot: () => snapshot,
    columns: 60,
  }).stop();
  assert.equal(written.length, 2);
  assert.ok(
    written[0]?.startsWith('\r[') && written[0].endsWith('3 failed\x1b[K'),
    'redrawn in place, the rest of the line cleared',
  );
  assert.equal(written[1], '\n');
});
