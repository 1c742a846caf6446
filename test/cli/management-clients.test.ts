import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { runCli as cli } from '../fixtures/cli.js';

test('batchserve canary start, status, rollback and promote drive the management API', async (t) => {
  const root = await tempDir(t);
  const v1 = await packAffine(join(root, 'v1'), { version: '1' });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2 });
  const server = await startTestServer(t, {
    models: [`affine=${v1}`, `affine=${v2}`],
    model_policies: { affine: { default_version: '1' } },
  });
  const tokenFile = join(root, 'token');
  await writeFile(tokenFile, 'test-token\n');
  const target = ['--management-url', server.urls.management, '--token-file', tokenFile];

  const started = await cli([
    'canary',
    'start',
    'affine',
    '--version',
    '2',
    '--steps',
    '100',
    '--interval',
    '60s',
    '--max-error-rate',
    '0.1%',
    '--max-p99',
    '200ms',
    ...target,
  ]);
  assert.equal(started.code, 0, started.stderr);
  assert.match(started.stdout, /step 1 of 1: version 2 gets 100%/);
  assert.match(started.stdout, /error rate ≤ 0\.1%, p99 ≤ 200ms/);
  const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.headers['x-model-version'], '2');

  const status = await cli(['canary', 'status', 'affine', '--json', ...target]);
  assert.equal(status.code, 0, status.stderr);
  const parsed = JSON.parse(status.stdout);
  assert.equal(parsed.state, 'running');
  assert.equal(parsed.live['2'].requests, 1);

  const rolledBack = await cli(['canary', 'rollback', 'affine', ...target]);
  assert.equal(rolledBack.code, 0, rolledBack.stderr);
  assert.match(rolledBack.stdout, /rolled back: version 1 takes all traffic/);
  assert.match(rolledBack.stdout, /why: rolled back by request/);

  // Errors are one line with a code and a non-zero exit.
  const again = await cli(['canary', 'promote', 'affine', ...target]);
  assert.equal(again.code, 1);
  assert.match(
    again.stderr,
    /^batchserve: the server answered 409 BS_ERR_CANARY_CONFLICT: the canary of affine already ended \(rolled back\) \[BS_ERR_MANAGEMENT_CALL\]\n$/,
  );
  const wrongToken = await cli([
    'canary',
    'status',
    'affine',
    '--management-url',
    server.urls.management,
    '--token',
    'nope',
  ]);
  assert.equal(wrongToken.code, 1);
  assert.match(wrongToken.stderr, /answered 401/);
  const envToken = await cli(['canary', 'status', 'affine', '--management-url', server.urls.management], {
    env: { BATCHSERVE_TOKEN: 'test-token' },
  });
  assert.equal(envToken.code, 0, envToken.stderr);
  const badSteps = await cli(['canary', 'start', 'affine', '--version', '2', '--steps', '50,20', ...target]);
  assert.equal(badSteps.code, 1);
  assert.match(badSteps.stderr, /steps must be rising/);
  const promotedFresh = await cli(['canary', 'start', 'affine', '--version', '2', '--steps', '10', ...target]);
  assert.equal(promotedFresh.code, 0, promotedFresh.stderr);
  const promoted = await cli(['canary', 'promote', 'affine', ...target]);
  assert.match(promoted.stdout, /promoted: version 2 is the default/);
  const unreachable = await cli([
    'canary',
    'status',
    'affine',
    '--management-url',
    'http://127.0.0.1:9',
    '--token',
    'x',
  ]);
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /cannot reach the management API/);
});

test('batchserve traffic show, set and clear drive the management API', async (t) => {
  const root = await tempDir(t);
  const v1 = await packAffine(join(root, 'v1'), { version: '1' });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2 });
  const server = await startTestServer(t, { models: [`affine=${v1}`, `affine=${v2}`] });
  const target = ['--management-url', server.urls.management, '--token', 'test-token'];

  const shown = await cli(['traffic', 'show', 'affine', ...target]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /^affine: default version 1; loaded 1 \(ready\), 2 \(ready\)\nsplit: none/);

  const set = await cli([
    'traffic',
    'set',
    'affine',
    '--split',
    '1=90,2=10',
    '--sticky-key',
    'header:X-User-Id',
    '--shadow',
    '2',
    ...target,
  ]);
  assert.equal(set.code, 0, set.stderr);
  assert.match(
    set.stdout,
    /split: 1 90%, 2 10% \(sticky on header:X-User-Id\)\nshadow: version 2 \(tolerance 0\.00001\)/,
  );
  const json = JSON.parse((await cli(['traffic', 'show', 'affine', '--json', ...target])).stdout);
  assert.deepEqual(json.split, { '1': 90, '2': 10 });
  assert.equal(json.traffic.sticky_key, 'header:X-User-Id');

  const bad = await cli(['traffic', 'set', 'affine', '--split', '1:90', ...target]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^batchserve: --split: expected version=weight, got "1:90" \[BS_ERR_USAGE\]\n$/);
  const unknown = await cli(['traffic', 'set', 'affine', '--split', '7=1', ...target]);
  assert.equal(unknown.code, 1);
  assert.match(unknown.stderr, /answered 400 BS_ERR_CONFIG_INVALID: .*version "7" of affine is not loaded/);
  assert.equal((await cli(['traffic', 'set', 'affine', ...target])).code, 2, 'set needs a flag');

  const cleared = await cli(['traffic', 'clear', 'affine', ...target]);
  assert.equal(cleared.code, 0, cleared.stderr);
  assert.match(cleared.stdout, /split: none/);
  assert.doesNotMatch(cleared.stdout, /shadow/);
});
