import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import * as ort from 'onnxruntime-node';
import { validateField } from '../../src/config/schema-kit.js';
import type { CanaryRecord } from '../../src/traffic/canary.js';
import { parseCanarySettings, parseRate } from '../../src/traffic/canary-settings.js';
import { RoutingStateFile } from '../../src/traffic/routing-state.js';
import { answersAgree } from '../../src/traffic/shadow-compare.js';
import { modelPolicyProblems, modelPolicySpec, trafficProblems, trafficSpec } from '../../src/config/model-policy.js';
import { VersionWindow } from '../../src/traffic/version-window.js';
import { tempDir } from '../fixtures/temp.js';

/** The message a UsageError from `parseCanarySettings(raw)` carries. */
function refusal(raw: unknown): string {
  try {
    parseCanarySettings(raw);
  } catch (error) {
    assert.equal((error as { code?: string }).code, 'BS_ERR_USAGE', String(error));
    return (error as Error).message;
  }
  assert.fail(`accepted ${JSON.stringify(raw)}`);
}

test('a canary request that is not an object, names unknown keys or no version is refused, saying what is expected', () => {
  for (const raw of ['2', null, [], 2]) {
    assert.equal(refusal(raw), 'a canary needs a JSON object such as {"version": "2"}', JSON.stringify(raw));
  }
  assert.equal(
    refusal({ version: '2', extra: 1, more: 2 }),
    'unknown canary key(s) extra, more (expected version, steps, interval, max_error_rate, max_p99, min_requests, min_agreement, agreement_tolerance, max_quality_drop)',
  );
  for (const raw of [{}, { version: true }, { version: null }]) {
    assert.equal(refusal(raw), 'a canary needs "version": the candidate version', JSON.stringify(raw));
  }
  assert.equal(parseCanarySettings({ version: 3 }).version, '3');
});

test('canary interval, max_p99 and min_requests: the smallest accepted values and the first refused ones', () => {
  assert.equal(parseCanarySettings({ version: '2', interval: '1ms' }).interval, 1_000);
  assert.equal(parseCanarySettings({ version: '2', interval: 1_000 }).interval, 1_000);
  for (const interval of ['999us', 999, 'soon']) {
    assert.equal(
      refusal({ version: '2', interval }),
      `interval must be a duration of at least 1ms, such as "60s"; got ${JSON.stringify(interval)}`,
    );
  }
  assert.equal(parseCanarySettings({ version: '2', max_p99: '1us' }).max_p99, 1);
  assert.ok(!('max_p99' in parseCanarySettings({ version: '2', max_p99: null })), 'null means no p99 guardrail');
  assert.ok(!('max_p99' in parseCanarySettings({ version: '2' })));
  for (const maxP99 of ['0ms', 0, 'fast', true]) {
    assert.equal(
      refusal({ version: '2', max_p99: maxP99 }),
      `max_p99 must be a duration such as "200ms", got ${JSON.stringify(maxP99)}`,
    );
  }
  assert.equal(parseCanarySettings({ version: '2', min_requests: 1 }).min_requests, 1);
  for (const minRequests of [0, -1, 1.5, '3']) {
    assert.equal(
      refusal({ version: '2', min_requests: minRequests }),
      `min_requests must be a positive integer, got ${JSON.stringify(minRequests)}`,
    );
  }
});

test('canary steps must rise strictly, each above 0 and at most 100, as numbers or one comma-separated string', () => {
  assert.deepEqual(parseCanarySettings({ version: '2', steps: ' 1 , 50,100 ' }).steps, [1, 50, 100]);
  assert.deepEqual(parseCanarySettings({ version: '2', steps: [100] }).steps, [100]);
  assert.deepEqual(parseCanarySettings({ version: '2', steps: [0.5, 99.5] }).steps, [0.5, 99.5]);
  for (const steps of [[10, 10], ['10', 100], [10, '100'], [], '', '10,,100', [5, 50, 20], 'all', 7]) {
    assert.equal(
      refusal({ version: '2', steps }),
      `steps must be rising percentages above 0 and at most 100, such as 5,20,50,100; got ${JSON.stringify(steps)}`,
    );
  }
});

test('error rates: fractions and percentages from 0 to 1, spaces trimmed, anything else refused', () => {
  assert.equal(parseRate(0), 0);
  assert.equal(parseRate(1), 1);
  assert.equal(parseRate('100%'), 1);
  assert.equal(parseRate('0%'), 0);
  assert.equal(parseRate(' 12.5% '), 0.125);
  assert.equal(parseRate('0.25'), 0.25);
  for (const bad of [1.01, -0.01, '101%', '5%x', 'x5%', '5 %', '%', '.5', '-0', null, undefined, true, {}]) {
    assert.throws(
      () => parseRate(bad),
      {
        code: 'BS_ERR_USAGE',
        message: `max_error_rate must be a percentage such as "0.1%" or a fraction from 0 to 1, got ${JSON.stringify(bad)}`,
      },
      JSON.stringify(bad) ?? 'undefined',
    );
  }
  assert.equal(parseCanarySettings({ version: '2', max_error_rate: '10%' }).max_error_rate, 0.1);
});

test('min_agreement, agreement_tolerance and max_quality_drop: the forms accepted and clear refusals', () => {
  const parsed = parseCanarySettings({
    version: '2',
    min_agreement: '98%',
    agreement_tolerance: ' 1e-3 ',
    max_quality_drop: '2%',
  });
  assert.deepEqual([parsed.min_agreement, parsed.agreement_tolerance, parsed.max_quality_drop], [0.98, 0.001, 0.02]);
  const numbers = parseCanarySettings({
    version: '2',
    min_agreement: 1,
    agreement_tolerance: 0,
    max_quality_drop: 1.5,
  });
  assert.deepEqual(
    [numbers.min_agreement, numbers.agreement_tolerance, numbers.max_quality_drop],
    [1, 0, 1.5],
    'a reward may drop by more than 1',
  );
  const none = parseCanarySettings({ version: '2', min_agreement: null, max_quality_drop: null });
  for (const key of ['min_agreement', 'agreement_tolerance', 'max_quality_drop']) {
    assert.ok(!(key in none), `null means no ${key}`);
  }
  for (const minAgreement of ['101%', 1.5, '-1', 'most', true]) {
    assert.equal(
      refusal({ version: '2', min_agreement: minAgreement }),
      `min_agreement must be a percentage such as "0.1%" or a fraction from 0 to 1, got ${JSON.stringify(minAgreement)}`,
    );
  }
  for (const tolerance of [-1, 'close', '', true, Infinity]) {
    assert.equal(
      refusal({ version: '2', min_agreement: 0.9, agreement_tolerance: tolerance }),
      `agreement_tolerance must be a number of at least 0, such as 1e-5, got ${JSON.stringify(tolerance)}`,
    );
  }
  assert.equal(
    refusal({ version: '2', agreement_tolerance: 0.1 }),
    'agreement_tolerance needs min_agreement: it is the tolerance of that guardrail',
  );
  for (const drop of [-0.1, '-2%', 'some', true, NaN, Infinity, {}]) {
    assert.equal(
      refusal({ version: '2', max_quality_drop: drop }),
      `max_quality_drop must be an amount of at least 0, such as 0.02 or "2%", got ${JSON.stringify(drop)}`,
    );
  }
});

test('version names and sticky keys: the patterns accept whole names and refuse anything around them', () => {
  const check = (raw: unknown): string[] => {
    const problems: string[] = [];
    validateField(trafficSpec, raw, 'traffic', problems);
    return problems;
  };
  assert.deepEqual(check({ split: { '1.2-rc_10': 1, '10': 1 }, shadow: '10', sticky_key: 'header:X-User_Id.2' }), []);
  assert.deepEqual(check({ sticky_key: "query:a!#$%&'*+.^_`|~-z" }), []);
  for (const shadow of ['a/b', '1 ', ' 1', '']) assert.equal(check({ shadow }).length, 1, JSON.stringify(shadow));
  assert.equal(check({ split: { 'v/1': 1 } }).length, 1);
  for (const key of ['header:', 'header:a b', 'header:a/b', 'xheader:a', 'header:a,', 'cookie:a', 'header']) {
    assert.equal(check({ sticky_key: key }).length, 1, key);
  }
  const policy: string[] = [];
  validateField(modelPolicySpec, { default_version: '2/3' }, 'models.m', policy);
  assert.equal(policy.length, 1);
});

test('policy problems a schema cannot express: two version-policy forms, all: false, a split without weight', () => {
  assert.deepEqual(modelPolicyProblems({}, 'models.m'), []);
  assert.deepEqual(modelPolicyProblems({ version_policy: { latest: 2 } }, 'models.m'), []);
  assert.deepEqual(modelPolicyProblems({ version_policy: { all: true } }, 'models.m'), []);
  assert.deepEqual(modelPolicyProblems({ version_policy: { all: true, latest: 2, specific: ['1'] } }, 'models.m'), [
    'models.m.version_policy: give one of all, latest or specific, not all and latest and specific',
  ]);
  assert.deepEqual(modelPolicyProblems({ version_policy: { all: false } }, 'models.m'), [
    'models.m.version_policy.all: only `all: true` means anything',
  ]);
  assert.deepEqual(modelPolicyProblems({ traffic: { split: { '1': 0 }, shadow_tolerance: 0 } }, 'models.m'), [
    'models.m.traffic.split: at least one weight must be above 0',
  ]);
  assert.deepEqual(modelPolicyProblems({ traffic: { split: { '1': 0, '2': 0.5 }, shadow_tolerance: 0 } }, 'm'), []);
  assert.deepEqual(trafficProblems({ split: {}, shadow_tolerance: 0 }, 't'), [
    't.split: at least one weight must be above 0',
  ]);
  assert.deepEqual(trafficProblems({ shadow: '2', shadow_tolerance: 0 }, 't'), []);
});

const tensor = (type: 'float32' | 'float64', data: number[], dims = [1, data.length]): ort.Tensor =>
  type === 'float32'
    ? new ort.Tensor('float32', Float32Array.from(data), dims)
    : new ort.Tensor('float64', Float64Array.from(data), dims);

test('shadow answers: every output must agree, exact at tolerance 0, NaN agrees only with NaN', () => {
  const y = (data: number[]) => tensor('float32', data);
  assert.ok(answersAgree({ y: y([1, 2]) }, { y: y([1, 2]) }, 0), 'equal answers agree at tolerance 0');
  assert.ok(answersAgree({ y: y([NaN, 2]) }, { y: y([NaN, 2]) }, 0));
  assert.ok(!answersAgree({ y: y([NaN, 2]) }, { y: y([1, 2]) }, 0));
  assert.ok(!answersAgree({ y: y([1, 2]) }, { y: y([NaN, 2]) }, 0.5));
  // Relative to max(1, |a|, |b|): 0.01 apart agrees at 1 % near 1, 2 apart agrees at 1 % near 200.
  assert.ok(answersAgree({ y: y([0]) }, { y: y([0.01]) }, 0.01));
  assert.ok(!answersAgree({ y: y([0]) }, { y: y([0.02]) }, 0.01));
  assert.ok(answersAgree({ y: y([200]) }, { y: y([202]) }, 0.01));
  assert.ok(!answersAgree({ y: y([200]) }, { y: y([203]) }, 0.01));
  assert.ok(!answersAgree({ y: y([1]), z: y([1]) }, { y: y([1]), z: y([2]) }, 0), 'one output that differs is enough');
  assert.ok(!answersAgree({ y: y([1]), z: y([1]) }, { y: y([1]), w: y([1]) }, 0));
  assert.ok(!answersAgree({ y: y([1, 2]) }, { y: tensor('float64', [1, 2]) }, 0), 'types must match');
  assert.ok(!answersAgree({ y: y([1, 2]) }, { y: tensor('float32', [1, 2], [2]) }, 0), 'ranks must match');
  assert.ok(!answersAgree({ y: y([1, 2]) }, { y: tensor('float32', [1, 2], [2, 1]) }, 0), 'dims must match');
  assert.ok(!answersAgree({ y: y([1, 2]) }, { y: tensor('float32', [1, 2], [1, 2, 1]) }, 0), 'a longer shape differs');
  const cube = (dims: number[]) => ({ y: tensor('float32', [1, 2, 3, 4, 5, 6], dims) });
  assert.ok(!answersAgree(cube([2, 1, 3]), cube([2, 3, 1]), 0), 'one dimension that differs is enough');
  assert.ok(answersAgree(cube([2, 1, 3]), cube([2, 1, 3]), 0));
});

test('shadow answers that are not numbers compare exactly; a missing answer never agrees', () => {
  const strings = (data: string[]) => ({ label: new ort.Tensor('string', data, [data.length]) });
  assert.ok(answersAgree(strings(['cat', 'dog']), strings(['cat', 'dog']), 0.5));
  assert.ok(!answersAgree(strings(['cat', 'dog']), strings(['cat', 'cow']), 0.5));
  const ints = (data: bigint[]) => ({ n: new ort.Tensor('int64', BigInt64Array.from(data), [data.length]) });
  assert.ok(answersAgree(ints([1n, 2n]), ints([1n, 2n]), 0));
  assert.ok(!answersAgree(ints([1n, 2n]), ints([1n, 3n]), 0.5));
  const served = { y: tensor('float32', [1]) };
  assert.ok(!answersAgree(served, undefined, 0));
  assert.ok(!answersAgree(undefined, served, 0));
  assert.ok(answersAgree(undefined, undefined, 0));
  assert.ok(answersAgree({}, {}, 0));
  assert.ok(!answersAgree({ label: 'cat' }, { label: 'cat', extra: 1 }, 0));
});

test('a classification agrees on its top label; other JSON numbers agree within the tolerance', () => {
  // What the image classifier answered for one image in fp32 and in fp16: same decision.
  const fp32 = [
    { label: '0', score: 0.93121 },
    { label: '180', score: 0.06879 },
  ];
  const fp16 = [
    { label: '0', score: 0.93066 },
    { label: '180', score: 0.06934 },
  ];
  assert.ok(answersAgree(fp32, fp16, 0), 'the same top-1 label agrees whatever the scores');
  assert.ok(!answersAgree(fp32, [...fp16].reverse(), 1), 'another top label never agrees');
  assert.ok(
    answersAgree(
      [{ label: 'cat', score: 0.9 }],
      [
        { label: 'cat', score: 0.5 },
        { label: 'dog', score: 0.4 },
      ],
      0,
    ),
  );
  const scores = { probabilities: [0.5, 0.25], name: 'x' };
  assert.ok(answersAgree(scores, { probabilities: [0.5004, 0.2502], name: 'x' }, 1e-3));
  assert.ok(!answersAgree(scores, { probabilities: [0.502, 0.25], name: 'x' }, 1e-3));
  assert.ok(!answersAgree(scores, { probabilities: [0.5, 0.25], name: 'y' }, 1), 'text still compares exactly');
  assert.ok(!answersAgree(scores, { probabilities: [0.5], name: 'x' }, 1), 'so do shapes');
  assert.ok(!answersAgree(Buffer.from('ab'), Buffer.from('ac'), 1));
  assert.ok(answersAgree(Buffer.from('ab'), Buffer.from('ab'), 0));
});

test('a version window counts a 500 as an error and 499 as none; figures start over on reset', () => {
  const window = new VersionWindow();
  window.record(499, 0.001);
  window.record(500, 0.001);
  window.record(200, 3_000);
  const figures = window.figures();
  assert.equal(figures.errors, 1);
  assert.equal(figures.error_rate, 1 / 3);
  assert.ok(figures.p99_ms !== undefined && Math.abs(figures.p99_ms - 3_000_000) / 3_000_000 < 0.001);
  window.reset();
  assert.deepEqual(window.figures(), {
    requests: 0,
    errors: 0,
    error_rate: 0,
    p99_ms: undefined,
    labels: 0,
    correct: 0,
    accuracy: undefined,
    rewards: 0,
    mean_reward: undefined,
    reward_sd: undefined,
  });
  window.record(200, 0);
  assert.equal(window.figures().p99_ms, 0.001, 'an instant answer counts as 1 µs');
});

test('a comparing window counts a failed copy as not agreeing; feedback gives accuracy, mean reward and its spread', () => {
  const plain = new VersionWindow();
  plain.recordComparison('agree');
  assert.ok(!('compared' in plain.figures()), 'a window that does not compare shows no agreement');
  const window = new VersionWindow({ compares: true });
  const agreement = () => {
    const { compared, agreed, agreement: rate } = window.figures();
    return { compared, agreed, agreement: rate };
  };
  assert.deepEqual(agreement(), { compared: 0, agreed: 0, agreement: undefined });
  for (const result of ['agree', 'agree', 'agree', 'disagree', 'failed'] as const) window.recordComparison(result);
  assert.deepEqual(agreement(), { compared: 5, agreed: 3, agreement: 0.6 });
  for (const quality of [
    { correct: true },
    { correct: true },
    { correct: false },
    { reward: 1 },
    { reward: 3 },
    { correct: true, reward: 2 },
    { reward: NaN },
    {},
  ])
    window.recordFeedback(quality);
  const { labels, correct, accuracy, rewards, mean_reward, reward_sd } = window.figures();
  assert.deepEqual(
    { labels, correct, accuracy, rewards, mean_reward, reward_sd },
    {
      labels: 4,
      correct: 3,
      accuracy: 0.75,
      rewards: 3,
      mean_reward: 2,
      reward_sd: 1,
    },
  );
  window.recordFeedback({ reward: 5 });
  window.reset();
  window.recordFeedback({ reward: 4 });
  assert.deepEqual([window.figures().mean_reward, window.figures().reward_sd, agreement().compared], [4, undefined, 0]);
});

const canary: CanaryRecord = {
  model: 'm',
  stable: '1',
  candidate: '2',
  settings: { version: '2', steps: [5, 100], interval: 1_000_000, max_error_rate: 0.01, min_requests: 1 },
  state: 'running',
  step: 0,
  started_at: '2025-03-01T12:00:00.000Z',
  step_started_at: '2025-03-01T12:00:00.000Z',
  history: [],
};

const guardedOnQuality = {
  ...canary.settings,
  max_p99: 200_000,
  min_agreement: 0.98,
  agreement_tolerance: 1e-5,
  max_quality_drop: 0.02,
};

/** The problems `RoutingStateFile.read` reports for a file holding `text`. */
async function problemsOf(path: string, text: string): Promise<readonly string[]> {
  await writeFile(path, text);
  let problems: readonly string[] = [];
  await assert.rejects(new RoutingStateFile(path).read(), (error: Error & { code?: string; problems?: string[] }) => {
    assert.equal(error.code, 'BS_ERR_CONFIG_INVALID');
    assert.ok(error.message.startsWith(`${path}: `), error.message);
    problems = error.problems ?? [];
    return true;
  });
  return problems;
}

test('the state file reads back what was written: defaults, traffic and canaries, nothing added', async (t) => {
  const dir = await tempDir(t);
  const file = new RoutingStateFile(join(dir, 'state.json'));
  const state = new Map([
    ['a', { default_version: '2' }],
    ['b', { traffic: { shadow: '3', shadow_tolerance: 0 } }],
    ['c', { canary }],
    ['d', {}],
    ['e', { canary: { ...canary, settings: guardedOnQuality } }],
  ]);
  await file.write(state);
  assert.deepEqual(await file.read(), state);
  const text = await readFile(file.path, 'utf8');
  assert.equal(text, `${JSON.stringify({ format: 1, models: Object.fromEntries(state) }, null, 2)}\n`);
  assert.equal((await stat(file.path)).mode & 0o777, 0o600, 'the state file is private to the server');
});

test('the state file names each broken part: format, JSON, traffic, default version, canary record', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'state.json');
  const shape = ['expected {"format": 1, "models": {...}}'];
  for (const text of ['null', '{}', '{"format": 2, "models": {}}', '{"format": 1}', '{"format": 1, "models": null}']) {
    assert.deepEqual(await problemsOf(path, text), shape, text);
  }
  assert.deepEqual(await problemsOf(path, '{"format": 1, "models": 5}'), shape);
  const [notJson, ...more] = await problemsOf(path, '{"format": 1,');
  assert.deepEqual(more, []);
  assert.match(notJson ?? '', /^not JSON: .+; delete the file to start over$/);
  const models = (value: unknown) => JSON.stringify({ format: 1, models: value });
  assert.deepEqual(await problemsOf(path, models({ m: { traffic: { split: { '1': 0 } } } })), [
    'models.m.traffic.split: at least one weight must be above 0',
  ]);
  assert.deepEqual(await problemsOf(path, models({ m: { default_version: 2 } })), [
    'models.m.default_version: expected a string',
  ]);
  const broken: unknown[] = [
    null,
    'canary',
    { ...canary, model: 1 },
    { ...canary, stable: undefined },
    { ...canary, candidate: 2 },
    { ...canary, state: 'paused' },
    { ...canary, step: '0' },
    { ...canary, history: {} },
    { ...canary, settings: undefined },
    { ...canary, settings: { ...canary.settings, steps: '5,100' } },
    { ...canary, settings: { ...canary.settings, interval: '1s' } },
    { ...canary, settings: { ...guardedOnQuality, min_agreement: '98%' } },
    { ...canary, settings: { ...guardedOnQuality, max_quality_drop: null } },
  ];
  for (const record of broken) {
    assert.deepEqual(
      await problemsOf(path, models({ m: { canary: record } })),
      ['models.m.canary: not a canary record'],
      JSON.stringify(record),
    );
  }
  for (const state of ['running', 'promoted', 'rolled_back'] as const) {
    await writeFile(path, models({ m: { canary: { ...canary, state } } }));
    assert.equal((await new RoutingStateFile(path).read()).get('m')?.canary?.state, state);
  }
});

test('a state file that cannot be read for another reason than being absent is an error, not empty', async (t) => {
  const dir = await tempDir(t);
  assert.equal((await new RoutingStateFile(join(dir, 'absent.json')).read()).size, 0);
  await assert.rejects(new RoutingStateFile(dir).read(), { code: 'EISDIR' });
});

test('state writes queue up: the last one wins, a failed one does not stop the next, no partial file stays', async (t) => {
  const dir = await tempDir(t);
  const file = new RoutingStateFile(join(dir, 'state.json'));
  const first = file.write(new Map([['m', { default_version: '1' }]]));
  const second = file.write(new Map([['m', { default_version: '2' }]]));
  await Promise.all([first, second]);
  assert.equal((await file.read()).get('m')?.default_version, '2');

  // A folder in the file's place: the rename fails, the temporary file is cleaned away.
  const blocked = new RoutingStateFile(join(dir, 'blocked'));
  await mkdir(join(dir, 'blocked', 'inside'), { recursive: true });
  await assert.rejects(blocked.write(new Map()));
  assert.deepEqual((await readdir(dir)).sort(), ['blocked', 'state.json']);
  await rm(join(dir, 'blocked'), { recursive: true });
  await blocked.write(new Map([['m', { default_version: '4' }]]));
  assert.equal((await blocked.read()).get('m')?.default_version, '4');
  assert.deepEqual((await readdir(dir)).sort(), ['blocked', 'state.json']);
});
