import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import type { BatchserveError } from '../../src/core/errors.js';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

// Breaks only once the test says so: packing runs the handler too, and must pass.
const BROKEN_POSTPROCESS = `export function postprocess() {
  if (process.env.BATCHSERVE_TEST_BROKEN_HANDLER === '1') throw new Error('postprocess is broken');
  return [];
}
`;

test('warm-up runs the whole handler pipeline: a handler that throws fails the load instead of loading as ready', async (t) => {
  const dir = await tempDir(t);
  const broken = await packAffine(join(dir, 'broken'), { handlerSource: BROKEN_POSTPROCESS });
  const unwarmed = await packAffine(join(dir, 'unwarmed'), {
    handlerSource: BROKEN_POSTPROCESS,
    config: 'max_batch_size: 8\nwarmup: false\n',
  });
  process.env.BATCHSERVE_TEST_BROKEN_HANDLER = '1';
  t.after(() => delete process.env.BATCHSERVE_TEST_BROKEN_HANDLER);

  await assert.rejects(startTestServer(t, { models: [`affine=${broken}`] }), (error: BatchserveError) => {
    assert.equal(error.code, 'BS_ERR_MODEL_LOAD');
    assert.match(error.message, /warm-up failed at batch size 1: .*postprocess is broken/);
    return true;
  });

  // warmup: false is the way out for handlers that cannot take v2 tensors; then the request fails.
  const server = await startTestServer(t, { models: [`affine=${unwarmed}`] });
  const ready = await call(`${server.urls.inference}/v2/models/affine/ready`);
  assert.equal(ready.status, 200);
  const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.status, 500);
  assert.match(answer.body.error, /postprocess is broken/);
});
