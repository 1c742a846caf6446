import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TailCap } from '../../src/batching/tail-cap.js';

/**
 * 200 answers admitted one a ms from `startMs`: all `ms` long with `through` rows (rows ahead
 * plus its own one) but the `slowCount` last, `slowMs` long. Returns when the last was answered.
 */
function horizon(cap: TailCap, startMs: number, ms: number, through: number, slowMs = ms, slowCount = 0): number {
  let answeredAt = startMs;
  for (let index = 0; index < 200; index++) {
    const latency = index >= 200 - slowCount ? slowMs : ms;
    answeredAt = startMs + index + latency;
    cap.answered(startMs + index, answeredAt, through - 1, 1);
  }
  return answeredAt;
}

test('TailCap: none while the p99 holds the budget; cut in proportion when it does not; raised only while it turns requests away with the p99 under three quarters of the plan', () => {
  const cap = new TailCap(100_000);
  let now = horizon(cap, 0, 50, 16, 99, 2);
  assert.equal(cap.rows, Infinity, 'two answers of 200 over 80 ms but none over 100: the p99 holds, no cap');
  assert.ok(cap.admits(500, 1));

  now = horizon(cap, now + 1000, 50, 16, 160, 2);
  assert.equal(cap.rows, Infinity, 'two of 200 past the budget are the p99.5: the p99 (third slowest) is 50 ms');
  now = horizon(cap, now + 1000, 50, 16, 160, 3);
  assert.equal(cap.rows, 8, 'three past it: p99 160 ms, 16 rows through × 80/160');
  assert.equal(cap.admits(7, 1), true, '8 rows with its own');
  assert.equal(cap.admits(7, 2), false);
  assert.equal(cap.admits(0, 20), true, 'nothing ahead: always');

  // Answers admitted before the cut carry the old depth: they do not judge it. (Counted, a p99
  // of 300 ms with 16 rows through would cut to 16 × 80/300 = 4.)
  horizon(cap, now - 300, 300, 16);
  assert.equal(cap.rows, 8, 'admitted before the cut: not counted');

  now = horizon(cap, now + 1000, 70, 8);
  assert.equal(cap.rows, 8, 'p99 70 ms, between 60 (3/4 of the plan) and 80, having turned one away: held');
  assert.equal(cap.admits(8, 1), false);
  now = horizon(cap, now + 1000, 40, 8);
  assert.equal(cap.rows, 10, 'p99 40 ms after turning one away: towards 60 ms (12 rows), a quarter at most, so 10');
  now = horizon(cap, now + 1000, 40, 8);
  assert.equal(cap.rows, 10, 'nobody turned away: held');
  assert.equal(cap.admits(10, 1), false);
  now = horizon(cap, now + 1000, 59, 10);
  assert.equal(cap.rows, 11, 'just under the mark: a row at least');

  now = horizon(cap, now + 1000, 300, 11);
  assert.equal(cap.rows, 2, 'every answer 300 ms with 11 rows through: 11 × 80/300');
  horizon(cap, now + 1000, 1000, 1);
  assert.equal(cap.rows, 1, 'never under a row');
  cap.answered(now + 5000, Number.NaN, 0, 1);
  assert.equal(cap.rows, 1, 'an answer with no time: ignored');
});

test('TailCap: where a cut is cheap (batching gains at most 2×) a p99 past the planned share already cuts; elsewhere only one past max_latency', () => {
  const dear = new TailCap(100_000);
  horizon(dear, 0, 50, 16, 90, 3);
  assert.equal(dear.rows, Infinity, 'p99 90 ms: within max_latency, held');

  const cheap = new TailCap(100_000);
  cheap.cheapToCut = true;
  const now = horizon(cheap, 0, 50, 16, 90, 3);
  assert.equal(cheap.rows, 14, 'p99 90 ms past the planned 80: 16 rows through × 80/90');
  horizon(cheap, now + 1000, 50, 14, 79, 3);
  assert.equal(cheap.rows, 14, 'p99 79 ms, between 60 and 80: held');
});
