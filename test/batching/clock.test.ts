import { test } from 'node:test';
import assert from 'node:assert/strict';
import { realClock } from '../../src/batching/clock.js';

test('the real clock reads monotonic milliseconds and runs and cancels timers', async () => {
  const before = performance.now();
  const now = realClock.now();
  assert.equal(typeof now, 'number');
  assert.ok(now >= before && now <= performance.now());
  const fired: string[] = [];
  const cancelled = realClock.setTimeout(() => fired.push('cancelled'), 0);
  realClock.clearTimeout(cancelled);
  // Timers of equal delay fire in the order they were set, so this one runs after the first would have.
  await new Promise<void>((resolve) => realClock.setTimeout(resolve, 0));
  assert.deepEqual(fired, []);
});
