import FakeTimers from '@sinonjs/fake-timers';
import type { CanaryClock } from '../../src/traffic/canary.js';

/** A fake clock for canaries: monotonic time from 0, wall time from `epoch`, timers it runs on `tick`. */
export function fakeCanaryClock(epoch: number): { fake: FakeTimers.Clock; clock: CanaryClock } {
  const fake = FakeTimers.createClock(epoch);
  const clock: CanaryClock = {
    now: () => fake.now - epoch,
    wallNow: () => fake.now,
    setTimeout: (callback, ms) => fake.setTimeout(callback, ms),
    clearTimeout: (handle) => fake.clearTimeout(handle as FakeTimers.TimerId),
  };
  return { fake, clock };
}
