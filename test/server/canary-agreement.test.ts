import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { renderCanaryStatus } from '../../src/cli/canary.js';
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

const AUTH = { authorization: 'Bearer test-token' };

function manage(server: BatchServer, path: string, method = 'GET', body?: unknown): Promise<JsonAnswer> {
  return call(`${server.urls.management}${path}`, {
    method,
    headers: AUTH,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** One unversioned request; the version that answered it. */
async function ask(server: BatchServer): Promise<string> {
  const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.headers['x-model-version'] as string;
}

/** Polls `condition` until it holds; fails naming `what` after a bound only a hang reaches. */
async function waitFor(what: string, condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 10));
  }
}

test('a canary with min_agreement mirrors the stable’s requests to a candidate that answers differently and rolls back', async (t) => {
  const root = await tempDir(t);
  // v1 answers y = 2x + 1, v2 y = 2x + 2: no answer of the candidate agrees.
  const v1 = await packAffine(join(root, 'v1'), { version: '1' });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2 });
  const server = await startTestServer(t, {
    models: [`affine=${v1}`, `affine=${v2}`],
    model_policies: { affine: { default_version: '1' } },
  });
  const status = async (): Promise<JsonAnswer['body']> => (await manage(server, '/models/affine/canary')).body;

  const quality = await manage(server, '/models/affine/canary', 'POST', { version: '2', max_quality_drop: 0.02 });
  assert.deepEqual([quality.status, quality.body.code], [409, 'BS_ERR_CANARY_CONFLICT']);
  assert.match(quality.body.error, /^max_quality_drop needs the prediction log of affine/);
  const badRate = await manage(server, '/models/affine/canary', 'POST', { version: '2', min_agreement: '120%' });
  assert.deepEqual([badRate.status, badRate.body.code], [400, 'BS_ERR_USAGE']);

  // A long step first, with a sample larger than the requests sent, to watch the mirrored pairs while it runs.
  const watched = await manage(server, '/models/affine/canary', 'POST', {
    version: '2',
    steps: [50, 100],
    interval: '60s',
    min_requests: 50,
    min_agreement: '98%',
  });
  assert.equal(watched.status, 201, JSON.stringify(watched.body));
  assert.deepEqual([watched.body.min_agreement, watched.body.agreement_tolerance], ['98%', 1e-5]);
  const answered: string[] = [];
  for (let index = 0; index < 20; index++) answered.push(await ask(server));
  const byStable = answered.filter((version) => version === '1').length;
  assert.ok(byStable > 0 && byStable < 20, `the split sent ${byStable} of 20 to the stable version`);
  await waitFor(`${byStable} mirrored answers`, async () => (await status()).live['2'].compared === byStable);
  const running = await status();
  assert.deepEqual([running.live['2'].agreed, running.live['2'].agreement], [0, 0]);
  assert.equal(running.live['1'].compared, undefined, 'the stable version is not compared');
  const disagreed = samplesOf(await scrapeMetrics(server), 'batchserve_shadow_requests_total', {
    model: 'affine',
    version: '2',
    result: 'disagree',
  })[0]?.value;
  assert.equal(disagreed, byStable, 'the shadow metrics count the canary’s copies too');
  const rendered = renderCanaryStatus(running);
  assert.match(rendered, /error rate ≤ 1%, agreement ≥ 98% \(tolerance 0\.00001\)/);
  assert.match(rendered, new RegExp(`2 \\(candidate\\) .* 0\\.00% \\(0 of ${byStable}\\)`));
  assert.equal((await manage(server, '/models/affine/canary/rollback', 'POST')).status, 200);

  // The fifth mirrored answer brings the sample in, and the canary rolls back on its own then,
  // long before its step's check.
  const started = await manage(server, '/models/affine/canary', 'POST', {
    version: '2',
    steps: [50, 100],
    interval: '10m',
    min_requests: 5,
    min_agreement: '98%',
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  await waitFor('the canary to roll back', async () => {
    await ask(server);
    return (await status()).state === 'rolled_back';
  });
  const ended = await status();
  assert.match(ended.reason, /^agreement 0% \(0 of \d+ mirrored answers\) below 98%$/);
  const verdict = ended.history.at(-1);
  assert.equal(verdict.event, 'rolled_back');
  assert.equal(verdict.candidate.compared, 5, 'judged on the fifth mirrored answer');
  assert.equal(verdict.candidate.agreed, 0);
  assert.deepEqual(ended.live, {});
  for (let index = 0; index < 3; index++) assert.equal(await ask(server), '1');
});

test('a canary with max_quality_drop rolls back on feedback: the candidate’s rewards fall short of the stable’s', async (t) => {
  const root = await tempDir(t);
  const v1 = await packAffine(join(root, 'v1'), { version: '1' });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2 });
  const server = await startTestServer(t, {
    models: [`affine=${v1}`, `affine=${v2}`],
    model_policies: { affine: { default_version: '1' } },
    prediction_log: join(root, 'logs'),
  });
  const status = async (): Promise<JsonAnswer['body']> => (await manage(server, '/models/affine/canary')).body;
  const started = await manage(server, '/models/affine/canary', 'POST', {
    version: '2',
    steps: [50, 100],
    interval: '300ms',
    min_requests: 5,
    max_quality_drop: 0.1,
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  assert.equal(started.body.max_quality_drop, '0.1');
  // Users convert on the stable version's answers and never on the candidate's.
  await waitFor('the canary to roll back on quality', async () => {
    const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, {
      body: affineRequest([[1, 2, 3, 4]]),
    });
    const reward = answer.headers['x-model-version'] === '1' ? 1 : 0;
    const id = answer.headers['x-request-id'] as string;
    const feedback = await call(`${server.urls.inference}/v2/models/affine/feedback`, {
      body: JSON.stringify({ id, reward }),
    });
    assert.equal(feedback.status, 200, JSON.stringify(feedback.body));
    return (await status()).state === 'rolled_back';
  });
  const ended = await status();
  assert.match(ended.reason, /reward/);
  const verdict = ended.history.at(-1);
  assert.ok(verdict.candidate.rewards >= 5 && verdict.stable.rewards >= 5, JSON.stringify(verdict));
  assert.deepEqual([verdict.candidate.mean_reward, verdict.stable.mean_reward], [0, 1]);
});
