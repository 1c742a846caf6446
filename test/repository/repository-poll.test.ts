import assert from 'node:assert/strict';
import { test } from 'node:test';
import FakeTimers from '@sinonjs/fake-timers';
import type { TritonPollReport } from '../../src/repository/model-repository.js';
import { RepositoryPoll } from '../../src/repository/repository-poll.js';

const EMPTY: TritonPollReport = { loaded: [], unloaded: [], failed: [] };

test('the repository is read again an interval after the last read ended, never two at once, and not after stop', async () => {
  const clock = FakeTimers.createClock();
  let reads = 0;
  let finish: (() => void) | undefined;
  const repository = {
    pollTritonRepository: () =>
      new Promise<TritonPollReport>((done) => {
        reads += 1;
        finish = () => done(EMPTY);
      }),
  };
  const reports: TritonPollReport[] = [];
  const poll = new RepositoryPoll(repository, 15_000, (report) => reports.push(report), clock);
  poll.start();
  clock.tick(14_999);
  assert.equal(reads, 0);
  clock.tick(1);
  assert.equal(reads, 1);
  // A slow read: the interval does not start a second one meanwhile, and pollNow joins it.
  clock.tick(60_000);
  assert.equal(reads, 1);
  const joined = poll.pollNow();
  assert.equal(reads, 1);
  finish?.();
  assert.deepEqual(await joined, EMPTY);
  assert.equal(reports.length, 1);
  clock.tick(15_000);
  assert.equal(reads, 2, 'the next read an interval after the last ended');
  finish?.();
  await poll.stop();
  clock.tick(60_000);
  assert.equal(reads, 2);
});

test('a read that fails is reported, and the reads go on', async () => {
  const clock = FakeTimers.createClock();
  let reads = 0;
  const repository = {
    pollTritonRepository: () => {
      reads += 1;
      return Promise.reject(new Error('EACCES'));
    },
  };
  const reports: TritonPollReport[] = [];
  const poll = new RepositoryPoll(repository, 1_000, (report) => reports.push(report), clock);
  const report = await poll.pollNow();
  assert.deepEqual(report.failed, [{ name: '(repository)', message: 'EACCES' }]);
  clock.tick(1_000);
  assert.equal(reads, 2);
  await poll.stop();
});
