import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { packArchive } from '../../src/archive/pack.js';
import { plainHttpPayload } from '../../src/bench/plain-http.js';
import { runLoad } from '../../src/bench/load-generator.js';
import { samplesOf } from '../metrics/prometheus-text.js';
import { identityModel, writeModel } from '../fixtures/onnx-models.js';
import { scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

// The simulated accelerator served for real: T(B) = c + m·B ms of wall time, max batch 32.

const BODY = JSON.stringify({
  inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) }],
});

async function simServer(
  t: Parameters<typeof tempDir>[0],
  batching: string,
  cost = '{fixed_cost: 4ms, row_cost: 250us}',
) {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'id.onnx', identityModel('FP32', 16));
  const configFile = join(dir, 'config.yaml');
  await writeFile(
    configFile,
    `max_batch_size: 32\ninstances: [{count: 1, device: sim}]\nsimulated_device: ${cost}\ndynamic_batching: ${batching}\n`,
  );
  const { path } = await packArchive({ modelName: 'sim', serializedFile: model, configFile, exportPath: dir });
  const server = await startTestServer(t, { models: [`sim=${path}`] });
  await writeFile(join(dir, 'body.json'), BODY);
  const url = `${server.urls.inference}/v2/models/sim/infer`;
  const payload = await plainHttpPayload(url, join(dir, 'body.json'), 'application/json', 1);
  const load = (concurrency: number, ms: number) =>
    runLoad(url, payload, {
      level: { kind: 'concurrency', concurrency },
      warmupMs: 100,
      windowMs: ms,
      minWindows: 1,
      maxWindows: 1,
      stabilityPct: 0,
      requestTimeoutMs: 30_000,
      workers: 1,
    });
  return { server, load };
}

test('device sim: the busy seconds and ratio count the passes, each at its cost', async (t) => {
  const { server, load } = await simServer(t, '{max_queue_delay: 0}');
  const before = await scrapeMetrics(server);
  const busyBefore = samplesOf(before, 'batchserve_instance_busy_seconds_total', { model: 'sim' })[0]?.value ?? 0;
  const result = await load(1, 300);
  const after = await scrapeMetrics(server);
  const busy =
    (samplesOf(after, 'batchserve_instance_busy_seconds_total', { model: 'sim' })[0]?.value ?? 0) - busyBefore;
  // One client: one-row passes of 4.25 ms each, warm-up included, nothing else on the instance.
  const passes = busy / 0.00425;
  assert.ok(
    passes >= result.requests,
    `${passes.toFixed(1)} passes' worth of busy time for ${result.requests} requests`,
  );
  const ratio = samplesOf(after, 'batchserve_instance_busy_ratio', { model: 'sim', version: '1.0' })[0]?.value;
  assert.ok(ratio !== undefined && ratio > 0 && ratio <= 1, `busy ratio ${ratio}`);
});

test('device sim under auto at K = 128: nothing refused while answers stay inside max_latency', async (t) => {
  // 128 clients are 4 full batches of 32: T(32) = 60 ms, about 240 ms each request, half the
  // 500 ms budget. A device this slow keeps the rate (533/s) low enough that the test files
  // running beside this one do not starve the server into answers that really are late.
  const { server, load } = await simServer(
    t,
    '{max_queue_delay: auto, max_latency: 500ms}',
    '{fixed_cost: 20ms, row_cost: 1250us}',
  );
  const result = await load(128, 1_500);
  const refused = samplesOf(await scrapeMetrics(server), 'batchserve_requests_refused_total', { model: 'sim' });
  assert.equal(
    result.errorCount,
    0,
    `p99 ${result.latency.p99.toFixed(1)} ms, errors ${JSON.stringify(result.errors)}`,
  );
  assert.deepEqual(refused, []);
  assert.ok(result.requests > 0);
});
