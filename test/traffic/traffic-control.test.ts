import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import * as ort from 'onnxruntime-node';
import { pino } from 'pino';
import type { CanaryRecord } from '../../src/traffic/canary.js';
import { RoutingStateFile, type ModelRouting } from '../../src/traffic/routing-state.js';
import { TrafficControl } from '../../src/traffic/traffic-control.js';
import type { ModelPolicy } from '../../src/config/model-policy.js';
import { parseExposition, samplesOf } from '../metrics/prometheus-text.js';
import { tempDir } from '../fixtures/temp.js';
import { fakeCanaryClock } from './fake-canary-clock.js';
import { requestWith, sharedVersions } from './loaded-versions.js';

const EPOCH = Date.parse('2025-03-01T12:00:00.000Z');
const SECOND = 1_000;
const URL_NO_QUERY = new URL('http://localhost/v2/models/affine/infer');

interface Setup {
  readonly policies?: Record<string, ModelPolicy>;
  readonly saved?: Map<string, ModelRouting>;
  /** Where the state file goes; default: a fresh temp folder. */
  readonly statePath?: string;
  readonly feedbackJoins?: (model: string) => boolean;
}

const affine = sharedVersions(['1', '2', '3']);

/**
 * Traffic control over a real repository holding affine 1, 2 and 3 (shared by the tests; each
 * starts with 3, the highest, as the chosen default), a real state file and a fake clock for
 * the canaries. `saved()` reads back what the state file holds now.
 */
async function controlOf(t: TestContext, setup: Setup = {}) {
  const { repository, metrics } = await affine();
  repository.chooseDefault('affine', '3');
  const statePath = setup.statePath ?? join(await tempDir(t), 'state.json');
  const stateFile = new RoutingStateFile(statePath);
  const { fake, clock } = fakeCanaryClock(EPOCH);
  const logged: Record<string, unknown>[] = [];
  const logger = pino({ level: 'error' }, { write: (line: string) => void logged.push(JSON.parse(line)) });
  const control = TrafficControl.open({
    repository,
    metrics,
    logger,
    policies: setup.policies ?? {},
    stateFile,
    saved: setup.saved ?? new Map(),
    clock,
    ...(setup.feedbackJoins ? { feedbackJoins: setup.feedbackJoins } : {}),
  });
  t.after(() => control.close());
  const saved = async (): Promise<unknown> => JSON.parse(await readFile(statePath, 'utf8'));
  const shadowCount = async (version: string, result: string): Promise<number | undefined> =>
    samplesOf(parseExposition(await metrics.registry.metrics()), 'batchserve_shadow_requests_total', {
      model: 'affine',
      version,
      result,
    })[0]?.value;
  const shadowSeconds = async (version: string): Promise<number | undefined> =>
    samplesOf(parseExposition(await metrics.registry.metrics()), 'batchserve_shadow_duration_seconds_sum', {
      model: 'affine',
      version,
    })[0]?.value;
  return { repository, control, fake, saved, logged, statePath, shadowCount, shadowSeconds };
}

const routes = (control: TrafficControl, count: number): string[] =>
  Array.from({ length: count }, () => control.router.route('affine', requestWith(), URL_NO_QUERY).version);

const canaryRecord = (state: CanaryRecord['state']): CanaryRecord => ({
  model: 'affine',
  stable: '1',
  candidate: '2',
  settings: { version: '2', steps: [25, 100], interval: SECOND * 1_000, max_error_rate: 0.01, min_requests: 1 },
  state,
  step: 0,
  started_at: new Date(EPOCH - 60 * SECOND).toISOString(),
  step_started_at: new Date(EPOCH - 30 * SECOND).toISOString(),
  history: [{ at: new Date(EPOCH - 60 * SECOND).toISOString(), event: 'started', weight: 25 }],
});

test('open applies server.yaml policies, and the state file’s saved changes over them', async (t) => {
  const { repository, control } = await controlOf(t, {
    policies: {
      affine: { default_version: '1', traffic: { split: { '1': 1, '3': 1 }, shadow_tolerance: 0 } },
      other: { default_version: '7' },
    },
    saved: new Map([
      ['affine', { default_version: '2' }],
      ['gone', { default_version: '4', traffic: { shadow: '4', shadow_tolerance: 0 } }],
    ]),
  });
  // The saved default wins over the configured one; the configured traffic stays, as nothing replaced it.
  assert.equal(repository.chosenDefault('affine'), '2');
  assert.deepEqual(control.router.traffic('affine'), { split: { '1': 1, '3': 1 }, shadow_tolerance: 0 });
  // Models that are not loaded keep their configured or saved routing for when they load.
  assert.equal(repository.chosenDefault('other'), '7');
  assert.equal(repository.chosenDefault('gone'), '4');
  assert.deepEqual(control.router.traffic('gone'), { shadow: '4', shadow_tolerance: 0 });
  assert.deepEqual(control.view('affine'), {
    model: 'affine',
    default_version: '2',
    versions: [
      { version: '1', state: 'ready' },
      { version: '2', state: 'ready' },
      { version: '3', state: 'ready' },
    ],
    traffic: { split: { '1': 1, '3': 1 }, shadow_tolerance: 0 },
    split: { '1': 1, '3': 1 },
    canary: null,
  });
});

test('saved traffic replaces the configured traffic, and a saved default alone keeps the configured traffic', async (t) => {
  const { repository, control } = await controlOf(t, {
    policies: { affine: { default_version: '1', traffic: { split: { '2': 1 }, shadow_tolerance: 0 } } },
    saved: new Map([['affine', { traffic: { shadow: '3', shadow_tolerance: 0.5 } }]]),
  });
  assert.equal(repository.chosenDefault('affine'), '1', 'the configured default holds without a saved one');
  assert.deepEqual(control.router.traffic('affine'), { shadow: '3', shadow_tolerance: 0.5 });
  assert.deepEqual(routes(control, 5), ['1', '1', '1', '1', '1']);
});

test('a model with no traffic is served by its default version; an unknown model has no view', async (t) => {
  // A policy that names no default, and no saved one: the first version loaded answers.
  const { repository, control } = await controlOf(t, { policies: { affine: { version_policy: { latest: 3 } } } });
  assert.equal(repository.chosenDefault('affine'), undefined);
  assert.equal(repository.defaultVersion('affine'), '1');
  assert.equal(control.router.traffic('affine'), undefined);
  const view = control.view('affine');
  assert.equal(view.default_version, '1');
  assert.equal(view.traffic, null);
  assert.equal(view.split, null);
  assert.equal(view.canary, null);
  assert.throws(() => control.view('nope'), { code: 'BS_ERR_MODEL_NOT_FOUND', message: 'unknown model "nope"' });
});

test('open resumes a saved running canary at its step; an ended one is only shown', async (t) => {
  const running = await controlOf(t, {
    saved: new Map([['affine', { default_version: '1', canary: canaryRecord('running') }]]),
  });
  assert.equal(running.control.view('affine').canary, 'running');
  assert.deepEqual(running.control.view('affine').split, { '1': 75, '2': 25 });
  assert.equal(running.control.canaryStatus('affine').weight, 25);
  assert.equal(running.fake.countTimers(), 1);

  const ended = await controlOf(t, { saved: new Map([['affine', { canary: canaryRecord('rolled_back') }]]) });
  assert.equal(ended.control.view('affine').canary, 'rolled_back');
  assert.equal(ended.control.view('affine').split, null);
  assert.equal(ended.fake.countTimers(), 0);
});

test('setTraffic validates, applies at once and saves; {} clears it', async (t) => {
  const { control, saved } = await controlOf(t);
  const view = await control.setTraffic('affine', { split: { '1': 0, '2': 1 }, sticky_key: 'header:X-User' });
  assert.deepEqual(view.traffic, { split: { '1': 0, '2': 1 }, sticky_key: 'header:X-User', shadow_tolerance: 1e-5 });
  assert.deepEqual(view.split, { '1': 0, '2': 1 });
  assert.deepEqual(routes(control, 5), ['2', '2', '2', '2', '2']);
  assert.deepEqual(await saved(), {
    format: 1,
    models: {
      affine: {
        default_version: '3',
        traffic: { split: { '1': 0, '2': 1 }, sticky_key: 'header:X-User', shadow_tolerance: 1e-5 },
      },
    },
  });

  const cleared = await control.setTraffic('affine', {});
  assert.equal(cleared.traffic, null);
  assert.equal(cleared.split, null);
  assert.deepEqual(routes(control, 3), ['3', '3', '3']);
  assert.deepEqual(await saved(), { format: 1, models: { affine: { default_version: '3' } } });
});

test('setTraffic keeps a policy that only splits, only shadows or only names a sticky key; a tolerance alone clears', async (t) => {
  const { control } = await controlOf(t);
  assert.deepEqual((await control.setTraffic('affine', { split: { '1': 1 } })).traffic, {
    split: { '1': 1 },
    shadow_tolerance: 1e-5,
  });
  assert.deepEqual(routes(control, 3), ['1', '1', '1']);
  assert.deepEqual((await control.setTraffic('affine', { shadow: '1' })).traffic, {
    shadow: '1',
    shadow_tolerance: 1e-5,
  });
  assert.deepEqual((await control.setTraffic('affine', { sticky_key: 'query:user' })).traffic, {
    sticky_key: 'query:user',
    shadow_tolerance: 1e-5,
  });
  assert.equal((await control.setTraffic('affine', { shadow_tolerance: 0.5 })).traffic, null);
});

test('setTraffic refuses an unknown model, a bad policy, versions not loaded and a split under a canary', async (t) => {
  const { control, saved, statePath } = await controlOf(t);
  await assert.rejects(control.setTraffic('nope', {}), {
    code: 'BS_ERR_MODEL_NOT_FOUND',
    message: 'unknown model "nope"',
  });
  const refusal = async (raw: unknown): Promise<readonly string[]> => {
    let problems: readonly string[] = [];
    await assert.rejects(control.setTraffic('affine', raw), (error: Error & { code?: string; problems?: string[] }) => {
      assert.equal(error.code, 'BS_ERR_CONFIG_INVALID');
      assert.match(error.message, /^the traffic request: /);
      problems = error.problems ?? [];
      return true;
    });
    return problems;
  };
  assert.deepEqual(await refusal(null), ['traffic: expected a mapping, got null']);
  assert.deepEqual(await refusal({ split: { '1': -1 } }), [
    'traffic.split.1: expected a value ≥ 0, got -1',
    'traffic.split: at least one weight must be above 0',
  ]);
  assert.deepEqual(await refusal({ split: { '1': 0, '2': 0 } }), [
    'traffic.split: at least one weight must be above 0',
  ]);
  assert.deepEqual(await refusal({ split: { '1': 1, '9': 1 }, shadow: '8' }), [
    'traffic: version "9" of affine is not loaded (loaded: 1, 2, 3)',
    'traffic: version "8" of affine is not loaded (loaded: 1, 2, 3)',
  ]);
  assert.deepEqual(await refusal({ shadow: '8' }), ['traffic: version "8" of affine is not loaded (loaded: 1, 2, 3)']);
  await assert.rejects(readFile(statePath), { code: 'ENOENT' }, 'a refused change saves nothing');
  assert.equal(control.router.traffic('affine'), undefined);

  await control.startCanary('affine', { version: '2' });
  await assert.rejects(control.setTraffic('affine', { split: { '1': 1 } }), {
    code: 'BS_ERR_CANARY_CONFLICT',
    message: 'a canary owns the split of affine; promote or roll it back first',
  });
  // A shadow does not touch the split, so it may change under a canary.
  const view = await control.setTraffic('affine', { shadow: '3' });
  assert.equal(view.canary, 'running');
  assert.deepEqual(view.split, { '3': 95, '2': 5 });
  const file = (await saved()) as { models: { affine: Record<string, unknown> } };
  assert.deepEqual(Object.keys(file.models.affine), ['default_version', 'traffic', 'canary']);
  assert.equal(file.models.affine.default_version, '3');
  assert.deepEqual(file.models.affine.traffic, { shadow: '3', shadow_tolerance: 1e-5 });
  assert.equal((await recordFrom(saved)).candidate, '2');
});

/** The canary record the state file holds for affine. */
async function recordFrom(saved: () => Promise<unknown>): Promise<CanaryRecord> {
  return ((await saved()) as { models: { affine: { canary: CanaryRecord } } }).models.affine.canary;
}

test('setDefault moves the default and saves it; an unknown version is refused and saves nothing', async (t) => {
  const { repository, control, saved, statePath } = await controlOf(t);
  await assert.rejects(control.setDefault('affine', '9'), { code: 'BS_ERR_MODEL_NOT_FOUND' });
  await assert.rejects(readFile(statePath), { code: 'ENOENT' });
  await control.setDefault('affine', '1');
  assert.equal(repository.defaultVersion('affine'), '1');
  assert.deepEqual(routes(control, 3), ['1', '1', '1']);
  assert.deepEqual(await saved(), { format: 1, models: { affine: { default_version: '1' } } });
});

test('saving keeps every model with run-time state, loaded or not, sorted; server.yaml defaults stay out of the file', async (t) => {
  const { control, saved } = await controlOf(t, {
    policies: { zeta: { default_version: '1' }, plain: {} },
    saved: new Map<string, ModelRouting>([
      ['alpha', { traffic: { shadow: '2', shadow_tolerance: 0 } }],
      ['beta', { canary: { ...canaryRecord('promoted'), model: 'beta' } }],
    ]),
  });
  await control.setDefault('affine', '2');
  const file = (await saved()) as { models: Record<string, unknown> };
  // zeta's default is server.yaml's: saving it would pin it past a later edit of server.yaml.
  assert.deepEqual(Object.keys(file.models), ['affine', 'alpha', 'beta']);
  assert.deepEqual(file.models, {
    affine: { default_version: '2' },
    alpha: { traffic: { shadow: '2', shadow_tolerance: 0 } },
    beta: { canary: JSON.parse(JSON.stringify({ ...canaryRecord('promoted'), model: 'beta' })) },
  });
});

test('a state file that cannot be written is logged with its path; the change still holds', async (t) => {
  const dir = await tempDir(t);
  const statePath = join(dir, 'missing-folder', 'state.json');
  const { repository, control, logged } = await controlOf(t, { statePath });
  await control.setDefault('affine', '1');
  assert.equal(repository.defaultVersion('affine'), '1');
  assert.equal(logged.length, 1);
  assert.equal(logged[0]?.msg, 'could not write the state file; the change holds until restart');
  assert.equal(logged[0]?.file, statePath);
  assert.equal(logged[0]?.level, 50);
});

test('a canary is refused over a configured split, and started, rolled back or promoted with each step saved', async (t) => {
  const { repository, control, fake, saved } = await controlOf(t, {
    policies: { affine: { default_version: '1', traffic: { split: { '1': 1, '2': 1 }, shadow_tolerance: 0 } } },
  });
  await assert.rejects(control.startCanary('affine', { version: '2' }), {
    code: 'BS_ERR_CANARY_CONFLICT',
    message: 'model affine has a traffic split; clear it (batchserve traffic clear affine) before starting a canary',
  });
  await assert.rejects(control.startCanary('affine', { version: '2', steps: [] }), { code: 'BS_ERR_USAGE' });
  await control.setTraffic('affine', {});
  assert.throws(() => control.canaryStatus('affine'), { code: 'BS_ERR_CANARY_NOT_FOUND' });

  const started = await control.startCanary('affine', {
    version: '2',
    steps: '50,100',
    interval: '1s',
    min_requests: 1,
  });
  assert.equal(started.state, 'running');
  assert.equal(started.weight, 50);
  assert.equal((await recordFrom(saved)).state, 'running');
  assert.equal(control.canaryStatus('affine').candidate, '2');

  const rolledBack = await control.rollback('affine');
  assert.equal(rolledBack.state, 'rolled_back');
  assert.equal((await recordFrom(saved)).state, 'rolled_back');
  assert.equal(repository.defaultVersion('affine'), '1');
  assert.equal(fake.countTimers(), 0);

  await control.startCanary('affine', { version: '3', interval: '1s' });
  const promoted = await control.promote('affine');
  assert.equal(promoted.state, 'promoted');
  assert.equal((await recordFrom(saved)).state, 'promoted');
  assert.equal(repository.defaultVersion('affine'), '3');
  assert.deepEqual(routes(control, 3), ['3', '3', '3']);
  await assert.rejects(control.promote('affine'), { code: 'BS_ERR_CANARY_CONFLICT' });
});

test('finished requests reach the canary: a failing candidate rolls back once its sample is in, and that is saved', async (t) => {
  const { repository, control, fake, saved } = await controlOf(t);
  await control.setDefault('affine', '1');
  await control.startCanary('affine', { version: '2', interval: '1s', min_requests: 2 });
  control.requestFinished(repository.get('affine', '1'), 200, 0.01);
  control.requestFinished(repository.get('affine', '2'), 500, 0.01);
  assert.equal(control.canaryStatus('affine').live['2']?.errors, 1);
  assert.equal(control.canaryStatus('affine').live['1']?.requests, 1);
  control.requestFinished(repository.get('affine', '2'), 500, 0.01);
  assert.equal(control.canaryStatus('affine').state, 'rolled_back', 'at the second answer, before the check');
  assert.equal(fake.countTimers(), 0);
  // The rollback saves on its own, without a request to the management API.
  await waitFor(async () => (await recordFrom(saved)).state === 'rolled_back');
  assert.equal(repository.defaultVersion('affine'), '1');
});

test('close stops the canaries’ checks', async (t) => {
  const { control, fake } = await controlOf(t);
  await control.startCanary('affine', { version: '2' });
  assert.equal(fake.countTimers(), 1);
  control.close();
  assert.equal(fake.countTimers(), 0);
});

/** Turns of the event loop until `check` holds, for writes that finish on their own. */
async function waitFor(check: () => Promise<boolean>): Promise<void> {
  for (let turn = 0; turn < 200; turn++) {
    if (await check().catch(() => false)) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  assert.fail('never happened');
}

const tensorOf = (value: number): { y: ort.Tensor } => ({
  y: new ort.Tensor('float32', Float32Array.of(value), [1, 1]),
});

test('mirror sends a copy to the shadow version and counts agreement within its tolerance', async (t) => {
  const { repository, control, shadowCount, shadowSeconds } = await controlOf(t);
  const served = repository.get('affine', '1');
  assert.equal(
    control.mirror(served, () => assert.fail('no shadow, no copy')),
    undefined,
  );
  await control.setTraffic('affine', { shadow: '2', shadow_tolerance: 0.01 });
  assert.equal(
    control.mirror(repository.get('affine', '2'), () => assert.fail('the shadow does not shadow itself')),
    undefined,
  );
  const shadowed: string[] = [];
  const settle = async (served: number, shadow: number | Error): Promise<void> => {
    const take = control.mirror(repository.get('affine', '1'), async (target) => {
      shadowed.push(target.version);
      if (shadow instanceof Error) throw shadow;
      return { response: tensorOf(shadow) };
    });
    assert.ok(take !== undefined);
    take(tensorOf(served));
    for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
  };
  await settle(1, 1.005);
  assert.equal(await shadowCount('2', 'agree'), 1, 'within 1 % agrees');
  await settle(1, 1.02);
  assert.equal(await shadowCount('2', 'disagree'), 1, 'beyond 1 % disagrees');
  await settle(1, new Error('the shadow failed'));
  assert.equal(await shadowCount('2', 'failed'), 1);
  assert.deepEqual(shadowed, ['2', '2', '2']);
  const seconds = await shadowSeconds('2');
  // Two answers timed (a failed one is not): each took some time, and far less than seconds.
  assert.ok(seconds !== undefined && seconds > 0 && seconds < 5, `shadow seconds ${seconds}`);
});

test('a min_agreement canary counts the mirrored pairs traffic control compares, and the shadow metrics still count', async (t) => {
  const { repository, control, fake, shadowCount } = await controlOf(t);
  await control.setDefault('affine', '1');
  await control.startCanary('affine', {
    version: '2',
    steps: [50, 100],
    interval: '1s',
    min_requests: 3,
    min_agreement: '90%',
    agreement_tolerance: 0.01,
  });
  const counted = async (): Promise<number> =>
    ((await shadowCount('2', 'agree')) ?? 0) +
    ((await shadowCount('2', 'disagree')) ?? 0) +
    ((await shadowCount('2', 'failed')) ?? 0);
  const before = await counted();
  assert.equal(
    control.mirror(repository.get('affine', '2'), () => assert.fail('the candidate’s answers are not mirrored')),
    undefined,
  );
  for (const shadow of [1.005, 2, new Error('the candidate failed')]) {
    const take = control.mirror(repository.get('affine', '1'), async (target) => {
      assert.equal(target.version, '2');
      if (shadow instanceof Error) throw shadow;
      return { response: tensorOf(shadow) };
    });
    assert.ok(take !== undefined);
    take(tensorOf(1));
  }
  // The third comparison brings the sample in: the canary rolls back then, before its check.
  await waitFor(async () => control.canaryStatus('affine').state === 'rolled_back');
  const ended = control.canaryStatus('affine');
  const verdict = ended.history.at(-1)?.candidate;
  assert.deepEqual([verdict?.compared, verdict?.agreed], [3, 1], 'within the 1 % tolerance agrees');
  assert.equal(await counted(), before + 3);
  assert.equal(fake.countTimers(), 0, 'no check is left to run');
  assert.equal(ended.reason, 'agreement 33.3% (1 of 3 mirrored answers) below 90%');
  assert.equal(
    control.mirror(repository.get('affine', '1'), () => assert.fail('no shadow after the canary')),
    undefined,
  );
});

test('max_quality_drop needs feedback that joins; feedback reaches the canary; the guardrails survive the state file', async (t) => {
  const refused = await controlOf(t);
  await refused.control.setDefault('affine', '1');
  await assert.rejects(refused.control.startCanary('affine', { version: '2', max_quality_drop: 0.02 }), {
    code: 'BS_ERR_CANARY_CONFLICT',
    message:
      'max_quality_drop needs the prediction log of affine (prediction_log in its config or serve --prediction-log DIR): feedback joins to predictions through it',
  });
  assert.throws(() => refused.control.canaryStatus('affine'), { code: 'BS_ERR_CANARY_NOT_FOUND' });

  const { repository, control, saved, statePath } = await controlOf(t, {
    policies: { affine: { default_version: '1', traffic: { shadow: '3', shadow_tolerance: 0.5 } } },
    feedbackJoins: (model) => model === 'affine',
  });
  const started = await control.startCanary('affine', {
    version: '2',
    min_agreement: '98%',
    max_quality_drop: '2%',
  });
  assert.deepEqual(
    [started.min_agreement, started.agreement_tolerance, started.max_quality_drop],
    ['98%', 0.5, '0.02'],
  );
  control.feedbackReceived(repository.get('affine', '2'), { correct: true });
  control.feedbackReceived(repository.get('affine', '1'), { reward: 0.5 });
  const live = control.canaryStatus('affine').live;
  assert.deepEqual([live['2']?.labels, live['1']?.rewards], [1, 1]);
  const { settings } = await recordFrom(saved);
  assert.deepEqual(
    [settings.min_agreement, settings.agreement_tolerance, settings.max_quality_drop],
    [0.98, 0.5, 0.02],
  );

  const reopened = await controlOf(t, { saved: await new RoutingStateFile(statePath).read() });
  assert.deepEqual(reopened.control.canaryStatus('affine').agreement_tolerance, 0.5);
  const target = reopened.control.router.shadowFor(repository.get('affine', '1'));
  assert.deepEqual([target?.model.version, target?.tolerance], ['2', 0.5], 'the resumed canary mirrors again');
});
