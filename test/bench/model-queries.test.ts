import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RestModelQueries } from '../../src/bench/model-queries.js';
import { packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

test('bench --url reads a served delay as the server has it: a fixed one in µs, adaptive as auto', async (t) => {
  const dir = await tempDir(t);
  const fixed = await packAffine(dir, {
    name: 'fixed',
    config: 'max_batch_size: 8\ndynamic_batching: { max_queue_delay: 3ms }\n',
  });
  const adaptive = await packAffine(dir, {
    name: 'adaptive',
    config: 'max_batch_size: 8\ndynamic_batching: { max_queue_delay: auto }\n',
  });
  const server = await startTestServer(t, { models: [`fixed=${fixed}`, `adaptive=${adaptive}`] });
  const base = server.urls.inference;
  assert.deepEqual(await new RestModelQueries(base, 'fixed').config(), {
    maxBatchSize: 8,
    maxQueueDelayUs: 3000,
    instances: 1,
  });
  // Triton's max_queue_delay_microseconds reads 0 for auto; the point must not say delay 0.
  assert.deepEqual(await new RestModelQueries(base, 'adaptive').config(), {
    maxBatchSize: 8,
    maxQueueDelayUs: 'auto',
    instances: 1,
  });
});
