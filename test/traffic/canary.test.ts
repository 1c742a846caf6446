import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import FakeTimers from '@sinonjs/fake-timers';
import { pino } from 'pino';
import {
  CanaryController,
  type CanaryClock,
  type CanaryEvent,
  type CanaryRecord,
  type CanarySettings,
} from '../../src/traffic/canary.js';
import { VersionRouter } from '../../src/traffic/version-router.js';
import { parseExposition, samplesOf } from '../metrics/prometheus-text.js';
import { loadedVersions, requestWith } from './loaded-versions.js';

const EPOCH = Date.parse('2025-03-01T12:00:00.000Z');
const SECOND = 1_000;
/** The wall time `ms` after the canary's start, as the history writes it. */
const at = (ms: number): string => new Date(EPOCH + ms).toISOString();

/**
 * A canary of affine v2 against v1 (the default) over a real repository, driven by a fake
 * clock: `tick` runs the checks due, `answer` counts finished requests as the server would.
 */
async function canaryOf(t: TestContext) {
  const { repository, metrics } = await loadedVersions(t, ['1', '2']);
  repository.setDefault('affine', '1');
  const fake = FakeTimers.createClock(EPOCH);
  const clock: CanaryClock = {
    now: () => fake.now - EPOCH,
    wallNow: () => fake.now,
    setTimeout: (callback, ms) => fake.setTimeout(callback, ms),
    clearTimeout: (handle) => fake.clearTimeout(handle as FakeTimers.TimerId),
  };
  const router = new VersionRouter(repository);
  let changes = 0;
  const controller = new CanaryController({
    repository,
    router,
    metrics,
    logger: pino({ level: 'silent' }),
    changed: () => void (changes += 1),
    clock,
  });
  t.after(() => controller.close());
  const answer = (version: string, count: number, status = 200, seconds = 0.01): void => {
    const model = repository.get('affine', version);
    for (let index = 0; index < count; index++) controller.requestFinished(model, status, seconds);
  };
  const start = (settings: Partial<CanarySettings>) =>
    controller.start('affine', {
      version: '2',
      steps: [10, 50, 100],
      interval: SECOND * 1_000,
      max_error_rate: 0.01,
      min_requests: 3,
      ...settings,
    });
  const weightMetric = async (): Promise<number | undefined> =>
    samplesOf(parseExposition(await metrics.registry.metrics()), 'batchserve_canary_weight', {
      model: 'affine',
      version: '2',
    })[0]?.value;
  return {
    repository,
    router,
    controller,
    fake,
    answer,
    start,
    weightMetric,
    changes: () => changes,
    history: () => controller.status('affine').history,
  };
}

/** The parts of an event a reader checks: what happened, at which weight, when and why. */
const brief = ({ event, weight, at: when, reason }: CanaryEvent) => ({
  event,
  weight,
  at: when,
  ...(reason === undefined ? {} : { reason }),
});

test('a healthy canary steps up once per interval and is promoted at the last step, recording each step', async (t) => {
  const { repository, router, controller, fake, answer, start, weightMetric, changes, history } = await canaryOf(t);
  const started = start({});
  assert.equal(started.weight, 10);
  assert.equal(started.next_check_at, at(SECOND));
  assert.deepEqual(router.effectiveSplit('affine'), { '1': 90, '2': 10 });
  answer('2', 3);
  answer('1', 3);
  fake.tick(SECOND - 1);
  assert.equal(history().length, 1, 'no check before the interval has passed');
  fake.tick(1);
  const second = controller.status('affine');
  assert.equal(second.weight, 50);
  assert.equal(second.step_started_at, at(SECOND));
  assert.equal(second.live['2']?.requests, 0, 'each step is judged on its own requests');
  assert.deepEqual(router.effectiveSplit('affine'), { '1': 50, '2': 50 });
  assert.equal(await weightMetric(), 50);
  answer('2', 3);
  fake.tick(SECOND);
  assert.deepEqual(router.effectiveSplit('affine'), { '1': 0, '2': 100 });
  answer('2', 3);
  fake.tick(SECOND);

  const ended = controller.status('affine');
  assert.equal(ended.state, 'promoted');
  assert.equal(ended.ended_at, at(3 * SECOND));
  assert.equal(ended.next_check_at, null);
  assert.deepEqual(history().map(brief), [
    { event: 'started', weight: 10, at: at(0) },
    { event: 'advanced', weight: 50, at: at(SECOND) },
    { event: 'advanced', weight: 100, at: at(2 * SECOND) },
    { event: 'promoted', weight: 100, at: at(3 * SECOND), reason: 'every step stayed inside the guardrails' },
  ]);
  assert.deepEqual(
    history().map((event) => [event.candidate?.requests, event.stable?.requests]),
    [
      [undefined, undefined],
      [3, 3],
      [3, 0],
      [3, 0],
    ],
  );
  assert.equal(repository.defaultVersion('affine'), '2');
  assert.equal(router.effectiveSplit('affine'), undefined, 'the promoted version takes all traffic as the default');
  assert.equal(await weightMetric(), 100);
  assert.equal(changes(), 4, 'each change is persisted');
  assert.equal(fake.countTimers(), 0, 'an ended canary checks no more');
});

test('a candidate p99 above max_p99 rolls back at the check, before min_requests, judging the candidate only', async (t) => {
  const { repository, router, controller, fake, answer, start, weightMetric } = await canaryOf(t);
  start({ max_p99: 200_000, max_error_rate: 0.5, min_requests: 100 });
  // Under the limit (150 ms) only holds; the stable version's slowness is not the candidate's.
  answer('2', 5, 200, 0.15);
  answer('1', 5, 200, 5);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').state, 'running');
  answer('2', 1, 200, 0.3);
  fake.tick(SECOND);

  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back');
  assert.match(ended.reason ?? '', /^p99 300\.\d ms above 200ms$/);
  assert.equal(ended.ended_at, at(2 * SECOND));
  assert.equal(ended.weight, 0);
  assert.deepEqual(
    ended.history.map((event) => `${event.event}@${event.weight}`),
    ['started@10', 'held@10', 'rolled_back@0'],
  );
  const verdict = ended.history.at(-1);
  assert.equal(verdict?.reason, ended.reason);
  assert.equal(verdict?.candidate?.requests, 6);
  assert.equal(verdict?.stable?.requests, 5);
  assert.equal(repository.defaultVersion('affine'), '1');
  assert.equal(router.effectiveSplit('affine'), undefined);
  assert.equal(await weightMetric(), 0);
  assert.equal(fake.countTimers(), 0);
});

test('a step short of min_requests holds, keeping one held event, and advances once the requests arrive', async (t) => {
  const { controller, fake, answer, start, router } = await canaryOf(t);
  start({ steps: [20, 100], min_requests: 5 });
  answer('2', 4);
  answer('1', 50);
  fake.tick(SECOND);
  const held = controller.status('affine');
  assert.equal(held.state, 'running');
  assert.equal(held.weight, 20);
  assert.deepEqual(router.effectiveSplit('affine'), { '1': 80, '2': 20 });
  assert.deepEqual(held.history.at(-1)?.reason, '4 of the 5 requests needed to judge the step');
  fake.tick(SECOND + SECOND / 2);
  const stillHeld = controller.status('affine');
  assert.equal(stillHeld.next_check_at, at(3 * SECOND), 'checks keep the step’s pace');
  assert.equal(stillHeld.step_started_at, at(0), 'holding does not restart the step');
  assert.deepEqual(
    stillHeld.history.map(brief),
    [
      { event: 'started', weight: 20, at: at(0) },
      { event: 'held', weight: 20, at: at(2 * SECOND), reason: '4 of the 5 requests needed to judge the step' },
    ],
    'a hold repeated at the same weight replaces the last one',
  );
  answer('2', 1);
  fake.tick(SECOND / 2);
  const advanced = controller.status('affine');
  assert.equal(advanced.weight, 100);
  assert.deepEqual(
    advanced.history.map((event) => `${event.event}@${event.weight}:${event.candidate?.requests ?? '-'}`),
    ['started@20:-', 'held@20:4', 'advanced@100:5'],
  );
});

test('the error rate counts 5xx of the candidate only: at the limit it advances, above it rolls back', async (t) => {
  const { controller, fake, answer, start } = await canaryOf(t);
  start({ steps: [20, 50, 100], max_error_rate: 0.1, min_requests: 1 });
  answer('1', 5, 500);
  answer('2', 9);
  answer('2', 1, 500);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').weight, 50, '1 error in 10 is not above 10 %');
  answer('2', 8, 404);
  answer('2', 1);
  answer('2', 1, 503);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').weight, 100, '4xx are the client’s errors');
  answer('2', 8);
  answer('2', 2, 503);
  fake.tick(SECOND);
  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back');
  assert.equal(ended.reason, 'error rate 20% (2 of 10) above 10%');
});

test('a candidate unloaded mid-canary takes no requests and rolls the canary back at the next check', async (t) => {
  const { repository, router, controller, fake, start } = await canaryOf(t);
  start({ steps: [50, 100] });
  await repository.unload('affine', '2');
  assert.equal(controller.status('affine').state, 'running');
  const url = new URL('http://localhost/v2/models/affine/infer');
  for (let index = 0; index < 20; index++) assert.equal(router.route('affine', requestWith(), url).version, '1');
  fake.tick(SECOND);
  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back');
  assert.equal(ended.reason, 'version 2 is no longer loaded');
  assert.equal(ended.ended_at, at(SECOND));
  assert.equal(repository.defaultVersion('affine'), '1');
  assert.equal(router.effectiveSplit('affine'), undefined);
});

test('a restored running canary resumes its step with a fresh window; an ended one stays ended', async (t) => {
  const { controller, fake, answer } = await canaryOf(t);
  const record = (state: CanaryRecord['state']): CanaryRecord => ({
    model: 'affine',
    stable: '1',
    candidate: '2',
    settings: { version: '2', steps: [5, 20, 100], interval: SECOND * 1_000, max_error_rate: 0.01, min_requests: 1 },
    state,
    step: 1,
    started_at: at(-60 * SECOND),
    step_started_at: at(-30 * SECOND),
    history: [{ at: at(-60 * SECOND), event: 'started', weight: 5 }],
  });
  controller.restore(record('rolled_back'));
  assert.equal(fake.countTimers(), 0);
  assert.equal(controller.isRunning('affine'), false);

  controller.restore(record('running'));
  const resumed = controller.status('affine');
  assert.equal(resumed.weight, 20);
  assert.equal(resumed.step_started_at, at(0));
  assert.equal(resumed.next_check_at, at(SECOND));
  assert.deepEqual(resumed.history.at(-1), {
    at: at(0),
    event: 'resumed',
    weight: 20,
    reason: 'the server restarted; the step starts over',
  });
  answer('2', 1);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').weight, 100);
  controller.close();
  assert.equal(fake.countTimers(), 0, 'close stops every check');
});
