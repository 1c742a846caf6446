import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { renderStartupBlock } from '../../src/server/startup-block.js';
import { validateServerConfig } from '../../src/server/server-config.js';
import { samplesOf } from '../metrics/prometheus-text.js';
import { packSimArchive } from '../fixtures/sim-archive.js';
import { affineRequest, call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

test('max_queue_delay: auto serves, shows its budget at start, and exposes the live fit in metrics and describe', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, {
    config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: auto\n  max_latency: 50ms\n',
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const model = server.repository.get('affine');
  assert.equal(model.config.dynamic_batching.max_queue_delay, 'auto');
  assert.match(renderStartupBlock(server, validateServerConfig({}, 'test')), /delay auto \(max_latency 50ms\)/);
  // Before any request: batches of 1, ⌈8/2⌉ and 8 were timed at load and seed the line.
  const seeded = await call(`${server.urls.management}/models/affine`, {
    headers: { authorization: 'Bearer test-token' },
  });
  const [seededEntry] = seeded.body as { adaptiveBatching?: { batchSizesSeen: number } }[];
  assert.equal(seededEntry?.adaptiveBatching?.batchSizesSeen, 3, JSON.stringify(seededEntry?.adaptiveBatching));

  const answers = await Promise.all(
    Array.from({ length: 24 }, (_, index) =>
      call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[index, 0, 0, 0]]) }),
    ),
  );
  assert.deepEqual(
    answers.map((answer) => answer.body.outputs[0].data[0]),
    Array.from({ length: 24 }, (_, index) => index * 2 + 1),
  );
  const families = await scrapeMetrics(server);
  const trusted = samplesOf(families, 'batchserve_batching_fit_trusted', { model: 'affine', version: '1' })[0];
  assert.ok(trusted !== undefined && (trusted.value === 0 || trusted.value === 1), 'the fit is exported');
  const described = await call(`${server.urls.management}/models/affine`, {
    headers: { authorization: 'Bearer test-token' },
  });
  const [entry] = described.body as { maxBatchDelay: unknown; adaptiveBatching: Record<string, unknown> }[];
  assert.equal(entry?.maxBatchDelay, 'auto');
  assert.equal(typeof entry?.adaptiveBatching.trusted, 'boolean');
  assert.ok('notTrustedBecause' in (entry?.adaptiveBatching ?? {}));

  // The bench's sweeps switch it on and off at run time, as TorchServe's max_batch_delay.
  const fixed = await call(`${server.urls.management}/models/affine?max_batch_delay=2`, {
    method: 'PUT',
    headers: { authorization: 'Bearer test-token' },
  });
  assert.equal(fixed.status, 200, JSON.stringify(fixed.body));
  assert.equal(model.config.dynamic_batching.max_queue_delay, 2_000);
  await call(`${server.urls.management}/models/affine?max_batch_delay=auto`, {
    method: 'PUT',
    headers: { authorization: 'Bearer test-token' },
  });
  assert.equal(model.config.dynamic_batching.max_queue_delay, 'auto');
});

test('a model config refuses a max_queue_delay that is neither a duration nor auto', async (t) => {
  const dir = await tempDir(t);
  await assert.rejects(
    packAffine(dir, { config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: soon\n' }),
    /dynamic_batching\.max_queue_delay: expected microseconds \(an integer\) or a duration such as "5ms", or auto, got "soon"/,
  );
});

test('max_queue_delay: auto answers 503 BS_ERR_LATENCY_BUDGET to requests it expects to finish past max_latency', async (t) => {
  const dir = await tempDir(t);
  // A pass on the simulated accelerator costs at least 4 ms: with a 1 ms budget only a request
  // that runs at once on the idle instance can be served; those queued behind it cannot. The
  // row cost is large (T(1) = 4, T(4) = 10, T(8) = 18 ms) so the line timed at load predicts
  // (R² ≥ 0.8) even when a loaded machine wakes the instance a few ms late: with a small one
  // CI's noise left no trusted line, nothing was predicted, and nothing refused.
  const path = await packSimArchive(dir, {
    name: 'cost',
    fixedCost: '2ms',
    rowCost: '2ms',
    maxBatchSize: 8,
    width: 4,
    config: 'dynamic_batching:\n  max_queue_delay: auto\n  max_latency: 1ms\n',
  });
  const warnings: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) });
  const server = await startTestServer(t, { models: [`cost=${path}`] }, logger);
  const answers = await Promise.all(
    Array.from({ length: 24 }, (_, index) =>
      call(`${server.urls.inference}/v2/models/cost/infer`, { body: affineRequest([[index, 0, 0, 0]]) }),
    ),
  );
  const refused = answers.filter((answer) => answer.status === 503);
  assert.ok(
    answers.some((answer) => answer.status === 200),
    'the first, on an idle instance, is served',
  );
  assert.ok(refused.length > 0, `some are refused: ${answers.map((answer) => answer.status).join(' ')}`);
  assert.equal(refused.length + answers.filter((answer) => answer.status === 200).length, 24);
  for (const answer of refused) {
    assert.equal(answer.body.code, 'BS_ERR_LATENCY_BUDGET');
    assert.match(answer.body.error, /past max_latency 1 ms/);
    assert.equal(answer.headers['retry-after'], '1');
  }
  const counted = samplesOf(await scrapeMetrics(server), 'batchserve_requests_total', {
    model: 'cost',
    status: '503',
  });
  assert.equal(
    counted.reduce((sum, sample) => sum + sample.value, 0),
    refused.length,
    'counted as 503s',
  );
  assert.ok(
    warnings.some((line) => /max_latency \(1 ms\) is under twice a full batch of 8/.test(line)),
    `the load warns that the budget is under two full batches: ${warnings.join('')}`,
  );
});

test('a model with a fixed delay times no batches at load and logs nothing of adaptive batching', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, { config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 2ms\n' });
  const lines: { msg: string }[] = [];
  await startTestServer(
    t,
    { models: [`affine=${archive}`] },
    pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) }),
  );
  assert.ok(
    lines.some((line) => line.msg === 'model loaded'),
    'the log was captured',
  );
  assert.deepEqual(
    lines.filter((line) => line.msg.startsWith('adaptive batching')),
    [],
    'no calibration, no fit lines',
  );
});
