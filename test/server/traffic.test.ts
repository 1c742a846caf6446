import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { validateServerConfig } from '../../src/server/server-config.js';
import { renderStartupBlock, renderStartupLine } from '../../src/server/startup-block.js';
import { test, type TestContext } from 'node:test';
import { runLoad } from '../../src/bench/load-generator.js';
import type { BatchServer } from '../../src/server/server.js';
import { samplesOf } from '../metrics/prometheus-text.js';
import {
  affineRequest,
  call,
  packAffine,
  scrapeMetrics,
  startTestServer,
  type JsonAnswer,
} from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const ROW = [1, 2, 3, 4];
/** v1 answers y = 2x + 1, v2 y = 2x + 2. */
const EXPECTED: Record<string, number[]> = { '1': [3, 5, 7, 9], '2': [4, 6, 8, 10] };
const AUTH = { authorization: 'Bearer test-token' };
/** A handler that fails every request whose first value is 1 (warm-up feeds zeros, so it loads). */
const FAILING = `export async function preprocess(requests, context) {
  if (requests.some((request) => request.inputs.x.data[0] === 1)) throw new Error('candidate is broken');
  return context.builtins.tensor.preprocess(requests, context);
}
`;

async function twoVersions(
  t: TestContext,
  options: { v2?: { offset?: number; handlerSource?: string }; config?: Record<string, unknown>; root?: string } = {},
): Promise<{ server: BatchServer; root: string }> {
  const root = options.root ?? (await tempDir(t));
  const v1 = await packAffine(join(root, 'v1'), { version: '1' });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2, ...options.v2 });
  const server = await startTestServer(t, { models: [`affine=${v1}`, `affine=${v2}`], ...options.config });
  return { server, root };
}

/** One unversioned v2 request; returns the version that answered, after checking its output. */
async function ask(server: BatchServer, headers: Record<string, string> = {}): Promise<string> {
  const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([ROW]), headers });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  const version = answer.headers['x-model-version'] as string;
  assert.equal(answer.body.model_version, version);
  assert.deepEqual(answer.body.outputs[0].data, EXPECTED[version], `version ${version} answered its own output`);
  return version;
}

function manage(server: BatchServer, path: string, method = 'GET', body?: unknown): Promise<JsonAnswer> {
  return call(`${server.urls.management}${path}`, {
    method,
    headers: AUTH,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms));

/** Polls `condition` until it holds; fails naming `what` after `ms`, a bound only a hang reaches. */
async function waitFor(what: string, condition: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${ms} ms waiting for ${what}`);
    await sleep(10);
  }
}

/** One sample's value from a fresh scrape; undefined when the series is absent. */
const metric = async (server: BatchServer, name: string, labels: Record<string, string>): Promise<number | undefined> =>
  samplesOf(await scrapeMetrics(server), name, labels)[0]?.value;

/** Sends unversioned requests until `done` says stop (or `ms` pass); returns the versions that answered. */
async function drive(server: BatchServer, done: () => Promise<boolean>, ms: number): Promise<string[]> {
  const deadline = Date.now() + ms;
  const versions: string[] = [];
  while (Date.now() < deadline) {
    const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([ROW]) });
    versions.push(`${String(answer.headers['x-model-version'])}:${answer.status}`);
    if (await done()) return versions;
  }
  throw new Error(`gave up after ${ms} ms; answers: ${versions.slice(-10).join(', ')}`);
}

test('two versions with different outputs serve at once; the default is the first loaded, others by name', async (t) => {
  const { server } = await twoVersions(t);
  assert.equal(await ask(server), '1', 'v2, loaded second, takes no traffic by itself');
  for (const version of ['1', '2']) {
    const answer = await call(`${server.urls.inference}/v2/models/affine/versions/${version}/infer`, {
      body: affineRequest([ROW]),
    });
    assert.equal(answer.headers['x-model-version'], version);
    assert.deepEqual(answer.body.outputs[0].data, EXPECTED[version]);
    const predicted = await call(`${server.urls.inference}/predictions/affine/${version}`, {
      body: JSON.stringify({ x: [ROW] }),
    });
    assert.equal(predicted.headers['x-model-version'], version);
  }
  const view = await manage(server, '/models/affine/traffic');
  assert.equal(view.status, 200);
  assert.equal(view.body.default_version, '1');
  assert.deepEqual(
    view.body.versions.map((entry: { version: string }) => entry.version),
    ['1', '2'],
  );
  const block = renderStartupBlock(server, validateServerConfig({}, 'test'));
  assert.match(block, /affine v1 .*\[default: answers requests that name no version\]/);
  assert.match(block, /affine v2 .*\[no traffic until set-default, a split or a canary gives it some\]/);
  assert.deepEqual(
    (
      JSON.parse(renderStartupLine(server, validateServerConfig({}, 'test'))) as { models: { default: boolean }[] }
    ).models.map((model) => model.default),
    [true, false],
  );
});

test('a sticky 50/50 split: one key always meets one version, 10,000 keys split within ±3 %', async (t) => {
  const { server } = await twoVersions(t, {
    config: {
      model_policies: { affine: { traffic: { split: { '1': 50, '2': 50 }, sticky_key: 'header:X-User-Id' } } },
    },
  });
  const url = new URL('http://localhost/v2/models/affine/infer');
  const counts: Record<string, number> = { '1': 0, '2': 0 };
  for (let user = 0; user < 10_000; user++) {
    const req = { headers: { 'x-user-id': `user-${user}` } } as unknown as IncomingMessage;
    const version = server.traffic.router.route('affine', req, url).version;
    counts[version] = (counts[version] ?? 0) + 1;
  }
  for (const version of ['1', '2']) {
    assert.ok(Math.abs((counts[version] as number) / 10_000 - 0.5) <= 0.03, JSON.stringify(counts));
  }
  // Over HTTP: each key's requests all go to one version, and both versions are in use.
  const seen = new Set<string>();
  for (let user = 0; user < 30; user++) {
    const versions = new Set<string>();
    for (let repeat = 0; repeat < 4; repeat++) versions.add(await ask(server, { 'x-user-id': `user-${user}` }));
    assert.equal(versions.size, 1, `user-${user} met ${[...versions].join(' and ')}`);
    seen.add([...versions][0] as string);
  }
  assert.deepEqual([...seen].sort(), ['1', '2']);
  // Without the key, requests are split at random: both versions answer.
  const unkeyed = new Set<string>();
  for (let index = 0; index < 40 && unkeyed.size < 2; index++) unkeyed.add(await ask(server));
  assert.deepEqual([...unkeyed].sort(), ['1', '2']);
  // Each variant has its own request counts in the metrics.
  for (const version of ['1', '2']) {
    const sample = await metric(server, 'batchserve_requests_total', { model: 'affine', version, status: '200' });
    assert.ok((sample ?? 0) > 0, `requests of version ${version}`);
  }
});

// The one canary test on real time, end to end: the split, the 5xx counted from real answers,
// the verdict as they arrive and the next request. Steps, holds and p99 are judged on a fake
// clock in test/traffic/canary.test.ts.
test('a canary whose candidate fails rolls back on its own at its first failed answer, not at the interval, recording why', async (t) => {
  const { server } = await twoVersions(t, {
    v2: { handlerSource: FAILING },
    config: { model_policies: { affine: { default_version: '1' } } },
  });
  const started = await manage(server, '/models/affine/canary', 'POST', {
    version: '2',
    steps: [50, 100],
    interval: '10m',
    max_error_rate: '10%',
    min_requests: 1,
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  assert.equal(started.body.state, 'running');
  assert.equal(started.body.weight, 50);
  const status = async (): Promise<JsonAnswer> => manage(server, '/models/affine/canary');
  const answers = await drive(server, async () => (await status()).body.state === 'rolled_back', 10_000);
  assert.ok(answers.includes('2:500'), 'the candidate answered with errors');
  const ended = (await status()).body;
  // drive gives up after 10 s, so a rollback that waited for the 10 min check fails the test.
  assert.match(ended.reason, /^error rate 100% \(1 of 1\) above 10%$/, 'the first failed answer ended it');
  assert.equal(ended.weight, 0);
  assert.deepEqual(
    ended.history.map((event: { event: string }) => event.event),
    ['started', 'rolled_back'],
  );
  for (let index = 0; index < 10; index++) assert.equal(await ask(server), '1');
  const late = await manage(server, '/models/affine/canary/promote', 'POST');
  assert.equal(late.status, 409);
  assert.equal(late.body.code, 'BS_ERR_CANARY_CONFLICT');
  assert.match(late.body.error, /already ended \(rolled back\)/);
});

test('a canary promoted by request makes the candidate the default for the very next request', async (t) => {
  const { server } = await twoVersions(t, { config: { model_policies: { affine: { default_version: '1' } } } });
  assert.equal(await ask(server), '1');
  const started = await manage(server, '/models/affine/canary', 'POST', {
    version: '2',
    steps: '20,50',
    interval: '60s',
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  assert.deepEqual((await manage(server, '/models/affine/traffic')).body.split, { '1': 80, '2': 20 });
  const promoted = await manage(server, '/models/affine/canary/promote', 'POST');
  assert.equal(promoted.status, 200, JSON.stringify(promoted.body));
  assert.equal(promoted.body.state, 'promoted');
  assert.equal(promoted.body.reason, 'promoted by request');
  assert.deepEqual(
    promoted.body.history.map((event: { event: string; weight: number }) => `${event.event}@${event.weight}`),
    ['started@20', 'promoted@100'],
  );
  assert.equal(await metric(server, 'batchserve_canary_weight', { model: 'affine', version: '2' }), 100);
  const view = (await manage(server, '/models/affine/traffic')).body;
  assert.equal(view.default_version, '2');
  assert.equal(view.split, null);
  for (let index = 0; index < 5; index++) assert.equal(await ask(server), '2');
});

test('rollback takes effect for the very next request; status shows live figures per version', async (t) => {
  const { server } = await twoVersions(t, { config: { model_policies: { affine: { default_version: '1' } } } });
  const none = await manage(server, '/models/affine/canary');
  assert.equal(none.status, 404);
  assert.deepEqual(none.body, { error: 'model affine has no canary', code: 'BS_ERR_CANARY_NOT_FOUND' });
  const started = await manage(server, '/models/affine/canary', 'POST', {
    version: '2',
    steps: [100],
    interval: '60s',
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  const second = await manage(server, '/models/affine/canary', 'POST', { version: '2' });
  assert.deepEqual([second.status, second.body.code], [409, 'BS_ERR_CANARY_CONFLICT']);
  assert.match(second.body.error, /already has a running canary/);
  const split = await manage(server, '/models/affine/traffic', 'PUT', { split: { '1': 1 } });
  assert.deepEqual([split.status, split.body.code], [409, 'BS_ERR_CANARY_CONFLICT']);
  assert.match(split.body.error, /a canary owns the split/);
  assert.equal(await ask(server), '2');
  assert.equal(await ask(server), '2');
  assert.equal(await metric(server, 'batchserve_canary_weight', { model: 'affine', version: '2' }), 100);
  const live = (await manage(server, '/models/affine/canary')).body;
  assert.equal(live.live['2'].requests, 2);
  assert.equal(live.live['2'].errors, 0);
  assert.equal(typeof live.live['2'].p99_ms, 'number');
  assert.equal(live.max_error_rate, '1%');
  const rolledBack = await manage(server, '/models/affine/canary/rollback', 'POST');
  assert.equal(rolledBack.status, 200);
  assert.equal(rolledBack.body.state, 'rolled_back');
  assert.equal(rolledBack.body.reason, 'rolled back by request');
  assert.equal(await metric(server, 'batchserve_canary_weight', { model: 'affine', version: '2' }), 0);
  assert.equal(await ask(server), '1');
  assert.equal((await manage(server, '/models/affine/canary/rollback', 'POST')).status, 409);
  for (const [bad, status, code, rule] of [
    [{}, 400, 'BS_ERR_USAGE', /needs "version"/],
    [{ version: '9' }, 404, 'BS_ERR_MODEL_NOT_FOUND', /has no version "9"/],
    [{ version: '2', steps: [50, 20] }, 400, 'BS_ERR_USAGE', /^steps must be rising/],
    [{ version: '2', max_error_rate: '150%' }, 400, 'BS_ERR_USAGE', /^max_error_rate must be/],
    [{ version: '2', nope: 1 }, 400, 'BS_ERR_USAGE', /^unknown canary key\(s\) nope/],
  ] as const) {
    const answer = await manage(server, '/models/affine/canary', 'POST', bad);
    assert.deepEqual([answer.status, answer.body.code], [status, code], JSON.stringify({ bad, answer: answer.body }));
    assert.match(answer.body.error, rule);
  }
});

test('a canary survives a restart: running resumes at its step, a rollback keeps traffic on stable', async (t) => {
  const root = await tempDir(t);
  const stateFile = join(root, 'state.json');
  const first = await twoVersions(t, {
    root,
    config: { state_file: stateFile, model_policies: { affine: { default_version: '1' } } },
  });
  await manage(first.server, '/models/affine/canary', 'POST', { version: '2', steps: [5, 20], interval: '60s' });
  await first.server.close();

  const second = await twoVersions(t, { root, config: { state_file: stateFile } });
  const resumed = (await manage(second.server, '/models/affine/canary')).body;
  assert.equal(resumed.state, 'running');
  assert.equal(resumed.weight, 5);
  assert.deepEqual(
    resumed.history.map((event: { event: string }) => event.event),
    ['started', 'resumed'],
  );
  assert.deepEqual((await manage(second.server, '/models/affine/traffic')).body.split, { '1': 95, '2': 5 });
  await manage(second.server, '/models/affine/canary/rollback', 'POST');
  await second.server.close();

  // Version 2 is the highest, but the rolled-back canary left version 1 the default.
  const third = await twoVersions(t, { root, config: { state_file: stateFile } });
  assert.equal((await manage(third.server, '/models/affine/canary')).body.state, 'rolled_back');
  for (let index = 0; index < 5; index++) assert.equal(await ask(third.server), '1');
});

test('shadow traffic: answers come from the serving version; agreement is 1 for equal versions, below for different', async (t) => {
  for (const [offset, agree] of [
    [1, true],
    [2, false],
  ] as const) {
    const { server } = await twoVersions(t, {
      v2: { offset },
      config: { model_policies: { affine: { default_version: '1', traffic: { shadow: '2' } } } },
    });
    for (let index = 0; index < 10; index++) {
      const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([ROW]) });
      assert.equal(answer.headers['x-model-version'], '1');
      assert.deepEqual(answer.body.outputs[0].data, EXPECTED['1']);
    }
    const labels = { model: 'affine', version: '2' };
    const compared = async (result: string): Promise<number> =>
      (await metric(server, 'batchserve_shadow_requests_total', { ...labels, result })) ?? 0;
    const result = agree ? 'agree' : 'disagree';
    await waitFor(
      '10 copies to be compared',
      async () => (await compared('agree')) + (await compared('disagree')) >= 10,
    );
    assert.equal(await compared(result), 10);
    assert.equal(await compared(agree ? 'disagree' : 'agree'), 0);
    const ratio = await metric(server, 'batchserve_shadow_agreement_ratio', labels);
    if (agree) assert.equal(ratio, 1);
    else assert.ok(ratio !== undefined && ratio < 1, `agreement ${ratio}`);
    assert.ok(((await metric(server, 'batchserve_shadow_duration_seconds_count', labels)) ?? 0) >= 10);
    // TorchServe's route is mirrored too.
    const predicted = await call(`${server.urls.inference}/predictions/affine`, { body: JSON.stringify([ROW]) });
    assert.equal(predicted.headers['x-model-version'], '1');
    await waitFor('the prediction to be compared', async () => (await compared(result)) >= 11);
    // A request naming its version is not mirrored. The unversioned one after it is, and on
    // the shadow's one instance its copy runs after any copy of the first, so once it is
    // counted a copy of the first would have been too.
    await call(`${server.urls.inference}/v2/models/affine/versions/1/infer`, { body: affineRequest([ROW]) });
    await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([ROW]) });
    await waitFor('the unversioned request to be compared', async () => (await compared(result)) >= 12);
    assert.equal(await compared(result), 12);
  }
});

test('load v2, make it the default and unload v1 under steady bench load: zero failed requests', async (t) => {
  const root = await tempDir(t);
  const slow = `export async function inference(inputs, context) {
  await new Promise((resolve) => setTimeout(resolve, 5));
  return context.builtins.tensor.inference(inputs, context);
}
`;
  const v1 = await packAffine(join(root, 'v1'), { version: '1', handlerSource: slow });
  await packAffine(join(root, 'v2'), { version: '2', offset: 2 });
  const server = await startTestServer(t, { models: [`affine=${v1}`], model_store: join(root, 'v2', 'store') });
  const body = Buffer.from(affineRequest([ROW]));
  const load = runLoad(
    server.urls.inference,
    {
      protocol: 'v2-json',
      path: '/v2/models/affine/infer',
      headers: { 'content-type': 'application/json' },
      body,
      rows: 1,
    },
    {
      level: { kind: 'concurrency', concurrency: 8 },
      warmupMs: 100,
      windowMs: 500,
      minWindows: 6,
      maxWindows: 6,
      stabilityPct: 0,
      requestTimeoutMs: 10_000,
    },
  );
  const served = async (version: string): Promise<number> =>
    (await metric(server, 'batchserve_requests_total', { model: 'affine', version, status: '200' })) ?? 0;
  await waitFor('version 1 to serve under load', async () => (await served('1')) > 20);
  const registered = await manage(server, '/models?url=affine.mar', 'POST');
  assert.equal(registered.status, 200, JSON.stringify(registered.body));
  assert.equal((await manage(server, '/models/affine/traffic')).body.default_version, '1', 'loading is not serving');
  assert.equal((await manage(server, '/models/affine/2/set-default', 'PUT')).status, 200);
  const unloaded = await manage(server, '/models/affine/1', 'DELETE');
  assert.equal(unloaded.status, 200, JSON.stringify(unloaded.body));
  const result = await load;
  assert.equal(result.errorCount, 0, JSON.stringify(result.errors));
  assert.ok(result.requests > 100, `${result.requests} requests`);
  for (const version of ['1', '2']) {
    const served = await metric(server, 'batchserve_requests_total', { model: 'affine', version, status: '200' });
    assert.ok((served ?? 0) > 20, `version ${version} served ${served}`);
  }
  assert.equal(
    await metric(server, 'batchserve_requests_total', { model: 'affine', version: '1', status: '503' }),
    undefined,
  );
  assert.equal(await ask(server), '2');
});

// The rollback at the next check is on the fake clock in test/traffic/canary.test.ts.
test('unloading a canary’s candidate sends its share to the stable version at once', async (t) => {
  // The candidate is the lower version, so it comes first in the split the router walks.
  const { server } = await twoVersions(t, { config: { model_policies: { affine: { default_version: '2' } } } });
  const started = await manage(server, '/models/affine/canary', 'POST', { version: '1', steps: [50], interval: '60s' });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  assert.equal((await manage(server, '/models/affine/1', 'DELETE')).status, 200);
  for (let index = 0; index < 10; index++) assert.equal(await ask(server), '2');
  assert.equal((await manage(server, '/models/affine/canary')).body.state, 'running');
});

test('shutting down mid-canary leaves it running in the state file, not rolled back', async (t) => {
  const root = await tempDir(t);
  const stateFile = join(root, 'state.json');
  const slow = `export async function inference(inputs, context) {
  await new Promise((resolve) => setTimeout(resolve, 400));
  return context.builtins.tensor.inference(inputs, context);
}
`;
  const { server } = await twoVersions(t, {
    root,
    v2: { handlerSource: slow },
    config: { state_file: stateFile, model_policies: { affine: { default_version: '1' } } },
  });
  await manage(server, '/models/affine/canary', 'POST', {
    version: '2',
    steps: [50, 100],
    interval: '60s',
  });
  const inFlight = call(`${server.urls.inference}/v2/models/affine/versions/2/infer`, { body: affineRequest([ROW]) });
  const candidate = server.repository.get('affine', '2');
  await waitFor('the request to reach version 2', () => candidate.queuedRows + candidate.busyInstances > 0);
  assert.equal(await server.drain(5_000), true);
  assert.equal((await inFlight).status, 200, 'the drain answered the request in flight');
  const saved = JSON.parse(await readFile(stateFile, 'utf8'));
  assert.equal(saved.models.affine.canary.state, 'running');
});

test('traffic through the management API: set, validated, sticky on a query parameter, cleared, kept across a restart', async (t) => {
  const root = await tempDir(t);
  const stateFile = join(root, 'state.json');
  const { server } = await twoVersions(t, { root, config: { state_file: stateFile } });
  const set = (body: unknown): Promise<JsonAnswer> => manage(server, '/models/affine/traffic', 'PUT', body);
  const onlyOne = await set({ split: { '1': 100 } });
  assert.equal(onlyOne.status, 200, JSON.stringify(onlyOne.body));
  assert.deepEqual(onlyOne.body.split, { '1': 100 });
  for (let index = 0; index < 5; index++) assert.equal(await ask(server), '1');

  assert.equal((await set({ split: { '1': 50, '2': 50 }, sticky_key: 'query:user' })).status, 200);
  const byUser = new Map<string, Set<string>>();
  for (let user = 0; user < 20; user++) {
    for (let repeat = 0; repeat < 3; repeat++) {
      const answer = await call(`${server.urls.inference}/v2/models/affine/infer?user=u${user}`, {
        body: affineRequest([ROW]),
      });
      const versions = byUser.get(`u${user}`) ?? new Set<string>();
      versions.add(answer.headers['x-model-version'] as string);
      byUser.set(`u${user}`, versions);
    }
  }
  assert.ok(
    [...byUser.values()].every((versions) => versions.size === 1),
    'each user met one version',
  );
  assert.equal(new Set([...byUser.values()].map((versions) => [...versions][0])).size, 2, 'both versions in use');

  for (const [bad, message] of [
    [{ split: { '7': 1 } }, /version "7" of affine is not loaded/],
    [{ split: { '1': 0 } }, /at least one weight must be above 0/],
    [{ sticky_key: 'cookie:id' }, /header:NAME or query:NAME/],
    [{ shadow: '9' }, /version "9" of affine is not loaded/],
    [{ nope: true }, /unknown key/],
  ] as const) {
    const answer = await set(bad);
    assert.equal(answer.status, 400, JSON.stringify(bad));
    assert.match(answer.body.error, message);
  }
  assert.equal((await manage(server, '/models/nope/traffic')).status, 404);
  assert.equal(
    (
      await call(`${server.urls.management}/models/affine/traffic`, {
        method: 'PUT',
        body: '{',
        headers: AUTH,
      })
    ).status,
    400,
  );

  assert.equal((await set({ split: { '1': 1 } })).status, 200);
  const refused = await manage(server, '/models/affine/canary', 'POST', { version: '2' });
  assert.equal(refused.status, 409, 'a canary would hand the model back to the split when it ends');
  assert.match(refused.body.error, /has a traffic split; clear it/);
  await server.close();
  const restarted = await twoVersions(t, { root, config: { state_file: stateFile } });
  assert.deepEqual((await manage(restarted.server, '/models/affine/traffic')).body.split, { '1': 1 });
  assert.equal(await ask(restarted.server), '1');
  const cleared = await manage(restarted.server, '/models/affine/traffic', 'PUT', {});
  assert.equal(cleared.body.split, null);
  assert.equal(await ask(restarted.server), '1', 'without a split the default (the first loaded) answers');
});

test('a broken state file stops the start before any model loads, naming the file', async (t) => {
  const root = await tempDir(t);
  const stateFile = join(root, 'state.json');
  await writeFile(stateFile, '{"format": 1, "models": {"affine": {"traffic": {"split": {"1": -5}}}}}');
  await assert.rejects(
    startTestServer(t, { models: [`affine=${join(root, 'not-there.mar')}`], state_file: stateFile }),
    (error: Error & { code?: string }) => {
      assert.equal(error.code, 'BS_ERR_CONFIG_INVALID');
      assert.match(error.message, /state\.json.*split\.1: expected a value ≥ 0/);
      return true;
    },
  );
});
