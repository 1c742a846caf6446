import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { packArchive } from '../../src/archive/pack.js';
import { prepareModel } from '../../src/optimize/prepare-model.js';
import { DEMO_MODEL_PATH } from '../../src/runtime/demo-model.js';
import { packOrientation, textLine } from '../predict/fixtures.js';
import { call, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const ROOT = new URL('../../../', import.meta.url).pathname;
const AUTH = { authorization: 'Bearer test-token' };

test('a canary of the demo classifier packed as fp16 agrees with its fp32 stable: the same top-1 on every image', async (t) => {
  const dir = await tempDir(t);
  const stable = await packOrientation(dir);
  const examples = join(ROOT, 'examples', 'orientation');
  const configFile = join(examples, 'model-config.yaml');
  const handler = 'image-classifier';
  const fp16 = await prepareModel({ serializedFile: DEMO_MODEL_PATH, configFile, handler, precision: 'fp16' });
  const candidate = await packArchive({
    modelName: 'orientation',
    version: '2',
    serializedFile: DEMO_MODEL_PATH,
    handler,
    configFile,
    extraFiles: [join(examples, 'labels.txt')],
    exportPath: join(dir, 'fp16'),
    preparedModel: fp16,
  });
  const server = await startTestServer(t, { models: [`orientation=${stable}`, `orientation=${candidate.path}`] });

  const started = await call(`${server.urls.management}/models/orientation/canary`, {
    method: 'POST',
    headers: AUTH,
    body: JSON.stringify({ version: '2', steps: [50, 100], interval: '60s', min_requests: 8, min_agreement: '100%' }),
  });
  assert.equal(started.status, 201, JSON.stringify(started.body));
  // Upright and upside-down lines, so both labels come up; the split sends some to each version.
  const answers = [];
  for (let seed = 0; seed < 16; seed++) {
    answers.push(
      await call(`${server.urls.inference}/predictions/orientation`, {
        body: textLine(seed, seed % 2 === 1),
        headers: { 'content-type': 'image/png' },
      }),
    );
  }
  assert.ok(answers.every((answer) => answer.status === 200));
  const byStable = answers.filter((answer) => answer.headers['x-model-version'] === '1').length;
  assert.ok(byStable > 0, 'the stable answered some, which are mirrored to the candidate');
  const deadline = Date.now() + 10_000;
  let live: { compared?: number; agreed?: number } = {};
  while (Date.now() < deadline) {
    const status = await call(`${server.urls.management}/models/orientation/canary`, { headers: AUTH });
    live = (status.body as { live: Record<string, typeof live> }).live['2'] ?? {};
    if (live.compared === byStable) break;
    await new Promise((done) => setTimeout(done, 20));
  }
  assert.equal(live.compared, byStable);
  assert.equal(live.agreed, byStable, 'every fp16 answer names the same class as fp32');
});
