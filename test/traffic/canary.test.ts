import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import FakeTimers from '@sinonjs/fake-timers';
import { pino } from 'pino';
import { renderCanaryStatus } from '../../src/cli/canary.js';
import { CanaryController, type CanaryEvent, type CanaryRecord } from '../../src/traffic/canary.js';
import type { CanarySettings } from '../../src/traffic/canary-settings.js';
import type { ShadowComparison } from '../../src/traffic/shadow-compare.js';
import type { FeedbackQuality } from '../../src/traffic/version-window.js';
import { VersionRouter } from '../../src/traffic/version-router.js';
import { parseExposition, samplesOf } from '../metrics/prometheus-text.js';
import { fakeCanaryClock } from './fake-canary-clock.js';
import { loadedVersions, requestWith, sharedVersions } from './loaded-versions.js';

const EPOCH = Date.parse('2025-03-01T12:00:00.000Z');
const SECOND = 1_000;
/** The wall time `ms` after the canary's start, as the history writes it. */
const at = (ms: number): string => new Date(EPOCH + ms).toISOString();

/** Affine 1 and 2 take part in the canaries; 3 is a bystander whose requests must not count. */
const affine = sharedVersions(['1', '2', '3']);

/**
 * A canary of affine v2 against v1 (the default) over a real repository, driven by a fake
 * clock: `tick` runs the checks due, `answer` counts finished requests as the server would.
 * The repository is shared by the tests unless one asks for its `own` (to unload a version).
 */
async function canaryOf(t: TestContext, own = false) {
  const { repository, metrics } = own ? await loadedVersions(t, ['1', '2', '3']) : await affine();
  repository.setDefault('affine', '1');
  const { fake, clock } = fakeCanaryClock(EPOCH);
  const router = new VersionRouter(repository);
  let changes = 0;
  const logs: ({ level: number; msg: string } & Record<string, unknown>)[] = [];
  const controller = new CanaryController({
    repository,
    router,
    metrics,
    logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line)) }),
    changed: () => void (changes += 1),
    clock,
  });
  t.after(() => controller.close());
  const answer = (version: string, count: number, status = 200, seconds = 0.01): void => {
    const model = repository.get('affine', version);
    for (let index = 0; index < count; index++) controller.requestFinished(model, status, seconds);
  };
  /** `count` mirrored copies of the stable's (v1) requests, answered by `shadow`, compared as `result`. */
  const compare = (result: ShadowComparison, count = 1, served = '1', shadow = '2'): void => {
    for (let index = 0; index < count; index++) {
      controller.answersCompared(repository.get('affine', served), repository.get('affine', shadow), result);
    }
  };
  /** `count` feedbacks joined to predictions of `version`. */
  const feedback = (version: string, quality: FeedbackQuality, count = 1): void => {
    for (let index = 0; index < count; index++) controller.feedbackReceived(repository.get('affine', version), quality);
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
    compare,
    feedback,
    start,
    weightMetric,
    changes: () => changes,
    /** What was logged, as `level message` lines. */
    logs: () => logs.map(({ level, msg }) => `${level} ${msg}`),
    /** What was logged, each line with its fields but without pino's own. */
    logFields: () =>
      logs.map((line) =>
        Object.fromEntries(Object.entries(line).filter(([key]) => !['level', 'time', 'pid', 'hostname'].includes(key))),
      ),
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
  // min_requests 10: judged as they arrive, 1 error in the first 9 answers would already be over 10 %.
  start({ steps: [20, 50, 100], max_error_rate: 0.1, min_requests: 10 });
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
  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back', 'at the 10th answer, before the check');
  assert.equal(ended.reason, 'error rate 20% (2 of 10) above 10%');
});

test('a candidate unloaded mid-canary takes no requests and rolls the canary back at the next check', async (t) => {
  const { repository, router, controller, fake, start } = await canaryOf(t, true);
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
  // A version on its way out (unloaded, still listed) cannot become a candidate.
  await repository.get('affine', '3').unload();
  assert.throws(() => start({ version: '3' }), { code: 'BS_ERR_CANARY_CONFLICT', message: 'version 3 is unloaded' });
  assert.equal(controller.status('affine').state, 'rolled_back', 'the refused start left the last canary as it was');
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
  // Closed (the server shutting down), the canary stays running in its record, and a rollback
  // that arrives meanwhile still ends it.
  assert.equal(controller.recordOf('affine')?.state, 'running');
  assert.equal(controller.rollback('affine').state, 'rolled_back');
});

test('status shows the settings as written, the live figures per version while running, and none once ended', async (t) => {
  const { controller, answer, start, fake, logs, logFields } = await canaryOf(t);
  start({ max_p99: 250_000, max_error_rate: 0.005, interval: 90 * SECOND * 1_000 });
  answer('2', 2, 500, 0.02);
  answer('1', 1);
  answer('3', 5, 503);
  fake.tick(30 * SECOND);
  const { history, live, ...running } = controller.status('affine');
  assert.deepEqual(running, {
    model: 'affine',
    state: 'running',
    stable: '1',
    candidate: '2',
    step: 1,
    steps: [10, 50, 100],
    weight: 10,
    interval: '90s',
    max_error_rate: '0.5%',
    max_p99: '250ms',
    min_requests: 3,
    min_agreement: null,
    agreement_tolerance: null,
    max_quality_drop: null,
    started_at: at(0),
    step_started_at: at(0),
    next_check_at: at(90 * SECOND),
    ended_at: null,
    reason: null,
  });
  assert.deepEqual(Object.keys(live).sort(), ['1', '2'], 'a version outside the canary is not counted');
  assert.deepEqual([live['1']?.requests, live['1']?.errors, live['2']?.requests, live['2']?.errors], [1, 0, 2, 2]);
  assert.equal(history.length, 1);

  const ended = controller.rollback('affine');
  assert.deepEqual(ended.live, {});
  assert.equal(ended.next_check_at, null);
  assert.equal(ended.reason, 'rolled back by request');
  assert.equal(ended.ended_at, at(30 * SECOND));
  assert.deepEqual(
    ended.history.map((event) => [event.event, event.reason, event.candidate?.errors, event.stable?.requests]),
    [
      ['started', undefined, undefined, undefined],
      ['rolled_back', 'rolled back by request', 2, 1],
    ],
    'a rollback by request records the figures it ended on',
  );
  assert.equal(controller.status('affine').max_p99, '250ms');
  assert.deepEqual(logs(), ['30 canary started', '40 canary rolled back']);
  assert.deepEqual(logFields(), [
    { model: 'affine', stable: '1', candidate: '2', steps: [10, 50, 100], msg: 'canary started' },
    { model: 'affine', stable: '1', candidate: '2', reason: 'rolled back by request', msg: 'canary rolled back' },
  ]);
});

test('starting twice, a candidate that already is the default, and ending an ended canary are refused', async (t) => {
  const { repository, controller, start, fake, logs, answer } = await canaryOf(t);
  answer('2', 1, 500);
  answer('1', 1);
  assert.throws(() => start({ version: '1' }), {
    code: 'BS_ERR_CANARY_CONFLICT',
    message: 'version 1 already is the default of affine; a canary needs another version to compare with',
  });
  assert.throws(() => start({ version: '9' }), { code: 'BS_ERR_MODEL_NOT_FOUND' });
  assert.throws(() => controller.status('affine'), {
    code: 'BS_ERR_CANARY_NOT_FOUND',
    message: 'model affine has no canary',
  });
  assert.throws(() => controller.rollback('affine'), {
    code: 'BS_ERR_CANARY_NOT_FOUND',
    message: 'model affine has no canary',
  });
  assert.throws(() => controller.promote('affine'), { code: 'BS_ERR_CANARY_NOT_FOUND' });
  assert.equal(controller.isRunning('affine'), false);
  assert.equal(controller.recordOf('affine'), undefined);

  start({ max_p99: undefined });
  assert.equal(controller.isRunning('affine'), true);
  assert.equal(controller.status('affine').live['2']?.requests, 0, 'requests before the start do not count');
  assert.equal(controller.status('affine').max_p99, null);
  assert.throws(() => start({}), {
    code: 'BS_ERR_CANARY_CONFLICT',
    message: 'model affine already has a running canary; promote or roll it back first',
  });
  const promoted = controller.promote('affine');
  assert.equal(promoted.reason, 'promoted by request');
  assert.equal(promoted.weight, 100);
  assert.equal(repository.defaultVersion('affine'), '2');
  assert.equal(fake.countTimers(), 0);
  assert.throws(() => controller.rollback('affine'), {
    code: 'BS_ERR_CANARY_CONFLICT',
    message: 'the canary of affine already ended (promoted)',
  });
  repository.setDefault('affine', '1');
  start({});
  controller.rollback('affine');
  assert.throws(() => controller.promote('affine'), {
    code: 'BS_ERR_CANARY_CONFLICT',
    message: 'the canary of affine already ended (rolled back)',
  });
  assert.equal(repository.defaultVersion('affine'), '1');
  assert.deepEqual(logs(), ['30 canary started', '30 canary promoted', '30 canary started', '40 canary rolled back']);
});

test('the error rate in a rollback reason is rounded to three digits; advancing is logged', async (t) => {
  const { controller, answer, start, fake, logs, logFields } = await canaryOf(t);
  start({ steps: [10, 100], max_error_rate: 0.2 });
  answer('2', 3);
  fake.tick(SECOND);
  answer('2', 2);
  answer('2', 1, 500);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').reason, 'error rate 33.3% (1 of 3) above 20%');
  assert.deepEqual(logs(), ['30 canary started', '30 canary advanced', '40 canary rolled back']);
  assert.deepEqual(logFields()[1], { model: 'affine', weight: 100, msg: 'canary advanced' });
});

test('a long history keeps its first event and the latest ones, 200 in all', async (t) => {
  const { controller } = await canaryOf(t);
  const history: CanaryEvent[] = Array.from({ length: 250 }, (_, index) => ({
    at: at(index),
    event: index === 0 ? 'started' : 'held',
    weight: 5,
  }));
  controller.restore({
    model: 'affine',
    stable: '1',
    candidate: '2',
    settings: { version: '2', steps: [5, 100], interval: SECOND * 1_000, max_error_rate: 0.01, min_requests: 1 },
    state: 'running',
    step: 0,
    started_at: at(0),
    step_started_at: at(0),
    history,
  });
  const kept = controller.status('affine').history;
  assert.equal(kept.length, 200);
  assert.equal(kept[0]?.event, 'started');
  assert.equal(kept[1]?.at, at(52), 'the oldest after the first go');
  assert.equal(kept.at(-1)?.event, 'resumed');
});

test('a restored canary past its last step is promoted at its next check', async (t) => {
  const { controller, answer, fake, repository } = await canaryOf(t);
  controller.restore({
    model: 'affine',
    stable: '1',
    candidate: '2',
    settings: { version: '2', steps: [5, 50], interval: 1, max_error_rate: 0.01, min_requests: 1 },
    state: 'running',
    step: 2,
    started_at: at(0),
    step_started_at: at(0),
    history: [],
  });
  assert.equal(controller.status('affine').weight, 100, 'beyond the steps the candidate has everything');
  answer('2', 1);
  fake.tick(0);
  assert.equal(controller.status('affine').state, 'running', 'an interval under 1 ms still waits 1 ms');
  fake.tick(1);
  assert.equal(controller.status('affine').state, 'promoted');
  assert.equal(repository.defaultVersion('affine'), '2');
});

test('a hold after an advance is kept apart from the hold before it; repeated holds at one weight stay one', async (t) => {
  const { answer, start, fake, history } = await canaryOf(t);
  start({ steps: [10, 50, 100], min_requests: 2 });
  fake.tick(SECOND);
  answer('2', 2);
  fake.tick(SECOND);
  fake.tick(SECOND);
  fake.tick(SECOND);
  assert.deepEqual(
    history().map((event) => `${event.event}@${event.weight}`),
    ['started@10', 'held@10', 'advanced@50', 'held@50'],
  );
});

test('a candidate at exactly max_p99 passes; the guardrail is for slower ones', async (t) => {
  const { controller, answer, start, fake } = await canaryOf(t);
  // 1 ms is recorded exactly (latencies under about 2 ms are), so p99 is exactly the limit.
  start({ steps: [10, 100], max_p99: 1_000, min_requests: 1 });
  answer('2', 5, 200, 0.001);
  assert.equal(controller.status('affine').live['2']?.p99_ms, 1);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').weight, 100);
  answer('2', 5, 200, 0.0011);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').state, 'rolled_back');
  assert.equal(controller.status('affine').reason, 'p99 1.1 ms above 1ms');
});

test('promoting a resumed canary whose candidate is no longer loaded leaves the default alone', async (t) => {
  const { controller, repository } = await canaryOf(t);
  controller.restore({
    model: 'affine',
    stable: '1',
    candidate: '9',
    settings: { version: '9', steps: [5, 100], interval: SECOND * 1_000, max_error_rate: 0.01, min_requests: 1 },
    state: 'running',
    step: 0,
    started_at: at(0),
    step_started_at: at(0),
    history: [],
  });
  const promoted = controller.promote('affine');
  assert.equal(promoted.state, 'promoted');
  assert.equal(repository.defaultVersion('affine'), '1');
});

test('without an injected clock a canary runs on real time', async () => {
  const { repository, metrics } = await affine();
  repository.setDefault('affine', '1');
  const clock = FakeTimers.install({ now: EPOCH, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
  try {
    const controller = new CanaryController({
      repository,
      router: new VersionRouter(repository),
      metrics,
      logger: pino({ level: 'silent' }),
      changed: () => undefined,
    });
    const started = controller.start('affine', {
      version: '2',
      steps: [50, 100],
      interval: SECOND * 1_000,
      max_error_rate: 0.01,
      min_requests: 1,
    });
    assert.equal(started.started_at, at(0));
    assert.equal(started.next_check_at, at(SECOND));
    controller.requestFinished(repository.get('affine', '2'), 200, 0.01);
    clock.tick(SECOND);
    assert.equal(controller.status('affine').weight, 100);
    assert.equal(controller.status('affine').step_started_at, at(SECOND));
    controller.close();
    assert.equal(clock.countTimers(), 0);
  } finally {
    clock.uninstall();
  }
});

test('min_agreement mirrors the stable’s requests to the candidate and rolls back on low agreement, once the comparisons reach min_requests', async (t) => {
  const { repository, router, controller, fake, answer, compare, start } = await canaryOf(t);
  const v1 = repository.get('affine', '1');
  router.setTraffic('affine', { shadow: '3', shadow_tolerance: 0.5 });
  const started = start({ steps: [10, 50, 100], min_requests: 5, min_agreement: 0.98 });
  assert.deepEqual([started.min_agreement, started.agreement_tolerance], ['98%', 0.5]);
  const target = router.shadowFor(v1);
  assert.equal(target?.model.version, '2', 'the canary’s shadow wins over the policy’s');
  assert.equal(target?.tolerance, 0.5, 'the tolerance defaults to the policy’s shadow_tolerance');
  assert.equal(
    router.shadowFor(repository.get('affine', '2')),
    undefined,
    'the candidate’s own answers are not mirrored',
  );

  answer('2', 5);
  compare('disagree', 4);
  // Copies the canary did not ask for: another served version, another shadow.
  compare('disagree', 3, '3', '2');
  compare('disagree', 3, '1', '3');
  fake.tick(SECOND);
  const held = controller.status('affine');
  assert.equal(held.state, 'running', '4 comparisons, all disagreeing, are below the minimum of 5');
  assert.equal(held.history.at(-1)?.reason, '4 of the 5 mirrored answers needed to judge agreement');
  assert.deepEqual(
    [held.live['2']?.compared, held.live['2']?.agreed, held.live['2']?.agreement],
    [4, 0, 0],
    'the candidate’s figures count the comparisons',
  );
  assert.ok(!('compared' in (held.live['1'] ?? {})), 'the stable version is not compared');

  // The fifth comparison brings the sample in: judged as it arrives, without waiting for the check.
  compare('agree', 1);
  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back');
  assert.equal(ended.reason, 'agreement 20% (1 of 5 mirrored answers) below 98%');
  const verdict = ended.history.at(-1);
  assert.deepEqual([verdict?.event, verdict?.candidate?.compared, verdict?.candidate?.agreed], ['rolled_back', 5, 1]);
  compare('agree', 45);
  assert.equal(controller.status('affine').history.length, ended.history.length, 'nothing is judged after the end');
  assert.deepEqual(
    [router.shadowFor(v1)?.model.version, router.shadowFor(v1)?.tolerance],
    ['3', 0.5],
    'the policy’s shadow is back once the canary ends',
  );
  compare('disagree');
  assert.deepEqual(
    controller.status('affine').history.at(-1)?.candidate?.compared,
    5,
    'an ended canary counts nothing',
  );
});

test('agreement at exactly min_agreement advances; a 100 % step needs no comparisons; the shadow ends with the canary', async (t) => {
  const { repository, router, controller, fake, answer, compare, start } = await canaryOf(t);
  const v1 = repository.get('affine', '1');
  start({ steps: [50, 100], min_requests: 2, min_agreement: 0.5 });
  assert.equal(
    controller.status('affine').agreement_tolerance,
    1e-5,
    'without a traffic policy: shadow_tolerance’s default',
  );
  assert.equal(router.shadowFor(v1)?.tolerance, 1e-5);
  answer('2', 2);
  compare('agree');
  compare('disagree');
  fake.tick(SECOND);
  assert.equal(controller.status('affine').weight, 100);
  // The stable version answers nothing at 100 %, so nothing is mirrored; agreement was judged before.
  answer('2', 2);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').state, 'promoted');
  assert.equal(router.shadowFor(v1), undefined);
});

test('a restored canary with min_agreement mirrors again, with its saved tolerance', async (t) => {
  const { repository, router, controller, fake, answer, compare } = await canaryOf(t);
  controller.restore({
    model: 'affine',
    stable: '1',
    candidate: '2',
    settings: {
      version: '2',
      steps: [5, 100],
      interval: SECOND * 1_000,
      max_error_rate: 0.01,
      min_requests: 2,
      min_agreement: 0.9,
      agreement_tolerance: 0.25,
    },
    state: 'running',
    step: 0,
    started_at: at(0),
    step_started_at: at(0),
    history: [],
  });
  const target = router.shadowFor(repository.get('affine', '1'));
  assert.deepEqual([target?.model.version, target?.tolerance], ['2', 0.25]);
  answer('2', 2);
  compare('agree');
  compare('failed');
  fake.tick(SECOND);
  assert.equal(controller.status('affine').reason, 'agreement 50% (1 of 2 mirrored answers) below 90%');
});

test('with max_quality_drop a step holds until both versions have min_requests feedbacks; a drop before that is no breach', async (t) => {
  const { controller, fake, answer, feedback, start } = await canaryOf(t);
  feedback('2', { correct: false }, 10);
  start({ steps: [10, 100], min_requests: 3, max_quality_drop: 0.02 });
  assert.equal(controller.status('affine').max_quality_drop, '0.02');
  answer('2', 3);
  feedback('2', { correct: false }, 2);
  feedback('1', { correct: true }, 5);
  feedback('3', { correct: false }, 5);
  fake.tick(SECOND);
  const held = controller.status('affine');
  assert.equal(held.state, 'running');
  assert.equal(held.weight, 10);
  assert.equal(
    held.history.at(-1)?.reason,
    'feedback short of the 3 per version needed to judge quality (labels: candidate 2, stable 5; rewards: candidate 0, stable 0)',
  );
  assert.deepEqual(
    [held.live['2']?.labels, held.live['2']?.correct, held.live['2']?.accuracy, held.live['1']?.accuracy],
    [2, 0, 0, 1],
    'feedback before the start and on other versions does not count',
  );
  feedback('2', { correct: true }, 3);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').state, 'rolled_back', 'with the sample in, the drop counts');
});

test('a candidate accuracy within max_quality_drop of the stable’s advances; a larger drop rolls back, saying both figures', async (t) => {
  const { controller, fake, answer, feedback, start } = await canaryOf(t);
  start({ steps: [10, 50, 100], min_requests: 100, max_quality_drop: 0.02 });
  answer('2', 100);
  feedback('1', { correct: true }, 92);
  feedback('1', { correct: false }, 8);
  feedback('2', { correct: true }, 90);
  feedback('2', { correct: false }, 10);
  fake.tick(SECOND);
  const advanced = controller.status('affine');
  assert.equal(advanced.weight, 50, 'a drop of exactly 0.02 is inside the guardrail');
  assert.deepEqual(
    [advanced.history.at(-1)?.candidate?.accuracy, advanced.history.at(-1)?.stable?.accuracy],
    [0.9, 0.92],
  );
  answer('2', 100);
  feedback('1', { correct: true }, 92);
  feedback('1', { correct: false }, 8);
  feedback('2', { correct: true }, 89);
  feedback('2', { correct: false }, 11);
  fake.tick(SECOND);
  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back');
  assert.equal(
    ended.reason,
    "accuracy 89% (89 of 100 labels) is 0.03 below the stable's 92% (92 of 100), more than the 0.02 allowed",
  );
  assert.deepEqual([ended.history.at(-1)?.candidate?.labels, ended.history.at(-1)?.stable?.correct], [100, 92]);
});

test('without label feedback on both versions, mean reward is compared', async (t) => {
  const { controller, fake, answer, feedback, start } = await canaryOf(t);
  start({ steps: [10, 50, 100], min_requests: 2, max_quality_drop: 0.1 });
  answer('2', 2);
  feedback('2', { correct: true });
  feedback('2', { reward: 0.8 });
  feedback('2', { reward: 1 });
  feedback('1', { reward: 1 }, 2);
  fake.tick(SECOND);
  const advanced = controller.status('affine');
  assert.equal(advanced.weight, 50, 'a mean reward 0.1 below the stable’s is inside the guardrail');
  const figures = advanced.history.at(-1)?.candidate;
  assert.equal(figures?.mean_reward, 0.9);
  assert.ok(figures?.reward_sd !== undefined && Math.abs(figures.reward_sd - Math.SQRT1_2 / 5) < 1e-12);
  answer('2', 2);
  feedback('2', { reward: 0.5 });
  feedback('2', { reward: 0.7 });
  feedback('1', { reward: 1 });
  fake.tick(SECOND);
  assert.equal(controller.status('affine').weight, 50, 'one stable reward is short of the sample');
  feedback('1', { reward: 1 });
  fake.tick(SECOND);
  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back');
  assert.equal(ended.reason, "mean reward 0.6 (2 rewards) is 0.4 below the stable's 1 (2), more than the 0.1 allowed");
});

test('a 100 % step is not held for feedback: the stable version has no new predictions to get it on', async (t) => {
  const { controller, fake, answer, feedback, start } = await canaryOf(t);
  start({ steps: [50, 100], min_requests: 1, max_quality_drop: 0.05 });
  answer('2', 1);
  feedback('2', { correct: true });
  feedback('1', { correct: true });
  fake.tick(SECOND);
  assert.equal(controller.status('affine').weight, 100);
  answer('2', 1);
  fake.tick(SECOND);
  assert.equal(controller.status('affine').state, 'promoted');
});

test('the CLI renders the agreement and quality guardrails with their live figures', async (t) => {
  const { controller, answer, compare, feedback, start } = await canaryOf(t);
  // min_requests 5: the samples below stay short of it, so the canary runs on to be rendered.
  start({ min_agreement: 0.98, max_quality_drop: 0.02, min_requests: 5 });
  const quiet = renderCanaryStatus(controller.status('affine'));
  assert.match(
    quiet,
    /guardrails: error rate ≤ 1%, agreement ≥ 98% \(tolerance 0\.00001\), accuracy or mean reward at most 0\.02 below stable; each step runs 1s and needs 5 each of candidate requests, mirrored answers and feedbacks per version;/,
  );
  assert.match(quiet, /2 \(candidate\) .*│ 0 compared +│ — +│ — +│/);
  answer('2', 2);
  compare('agree', 3);
  compare('disagree');
  feedback('2', { correct: true }, 3);
  feedback('2', { correct: false });
  feedback('1', { reward: 0.5 }, 2);
  feedback('1', { reward: 1 });
  const busy = renderCanaryStatus(controller.status('affine'));
  assert.match(busy, /2 \(candidate\) .*│ 75\.00% \(3 of 4\) +│ 75\.00% \(3 of 4\) +│ — +│/);
  assert.match(busy, /1 \(stable\) .*│ — +│ — +│ 0\.667 \(3\) +│/);
});

test('guardrails are judged as results arrive: the first breach once min_requests are in rolls back before the check', async (t) => {
  const { controller, fake, answer, start, history } = await canaryOf(t);
  start({ min_requests: 10, interval: 60 * SECOND, max_error_rate: 0.001 });
  // Before its sample is in, an error waits for the step's check (where no minimum applies).
  answer('2', 1, 500);
  answer('2', 8);
  assert.equal(controller.status('affine').state, 'running', '9 requests: short of min_requests');
  answer('2', 1);
  const ended = controller.status('affine');
  assert.equal(ended.state, 'rolled_back', 'the 10th answer brought the sample in, and the breach ended it');
  assert.equal(ended.weight, 0);
  assert.equal(ended.reason, 'error rate 10% (1 of 10) above 0.1%');
  assert.equal(history().at(-1)?.at, at(0), 'at once, not at the end of the 60 s interval');
  fake.tick(60 * SECOND);
  assert.equal(history().length, 2, 'started, rolled back: the check never ran');
});

test('every guardrail broken at once is recorded, not only the first', async (t) => {
  const { controller, answer, compare, start } = await canaryOf(t);
  start({ min_requests: 3, max_p99: 50_000, min_agreement: 0.9, max_error_rate: 0.01 });
  // The swapped-scores report: slow, failing and disagreeing at once, recorded as all three.
  compare('disagree', 2);
  answer('2', 2, 500, 0.2);
  assert.equal(controller.status('affine').state, 'running', 'no sample is in yet');
  compare('disagree', 1);
  const { state, reason } = controller.status('affine');
  assert.equal(state, 'rolled_back', 'the third mirrored answer brought agreement in');
  assert.equal(
    reason,
    'error rate 100% (2 of 2) above 1%; p99 200.1 ms above 50ms; agreement 0% (0 of 3 mirrored answers) below 90%',
  );
});
