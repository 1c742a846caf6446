import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { call, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { binaryDocRequest, documentBytes, expectedRows, packPipeline, packStepModels } from './pipeline-fixtures.js';

const AUTH = { authorization: 'Bearer test-token' };

/** A v2 JSON request: `doc` as a JSON string (its UTF-8 bytes reach the step). */
function jsonDocRequest(text: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ inputs: [{ name: 'doc', datatype: 'BYTES', shape: [1], data: [text] }], ...extra });
}

/** The pipeline's answer from a binary or JSON v2 response body. */
function outputsOf(body: { outputs: { name: string; data: unknown[] }[] }): Record<string, unknown[]> {
  return Object.fromEntries(body.outputs.map((output) => [output.name, output.data]));
}

test('a pipeline serves v2 JSON, binary and /predictions; its steps batch across requests', async (t) => {
  const dir = await tempDir(t);
  const models = await packStepModels(dir);
  const lines = await packPipeline(dir, 'lines', 'affine');
  const pairs = await packPipeline(dir, 'pairs', 'batched8');
  // Pipelines named first: they load once their step models have.
  const server = await startTestServer(t, {
    models: [`lines=${lines}`, `pairs=${pairs}`, `affine=${models.affine}`, `batched8=${models.batched8}`],
  });
  const base = server.urls.inference;

  const metadata = await call(`${base}/v2/models/lines`);
  assert.equal(metadata.status, 200);
  assert.equal(metadata.body.platform, 'ensemble');
  assert.deepEqual(
    metadata.body.inputs.map((input: { name: string }) => input.name),
    ['doc'],
  );

  // v2 JSON: the text's UTF-8 bytes reach the step; fan-out to 2 rows.
  const json = await call(`${base}/v2/models/lines/infer`, { body: jsonDocRequest('1 2 3 4\n5 6 7 8') });
  assert.equal(json.status, 200, JSON.stringify(json.body));
  assert.deepEqual(
    outputsOf(json.body).result,
    expectedRows([
      [1, 2, 3, 4],
      [5, 6, 7, 8],
    ]),
  );

  // v2 binary: the 0xFE byte survives (BYTES inputs of a pipeline are byte strings).
  const binary = binaryDocRequest(documentBytes([[1, 1, 1]]));
  const answer = await call(`${base}/v2/models/lines/infer`, binary);
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.deepEqual(outputsOf(answer.body).first, [0xfe]);
  assert.deepEqual(outputsOf(answer.body).result, expectedRows([[1, 1, 1]]));
  // …and binary outputs: the BYTES output as length-prefixed UTF-8.
  const binaryOut = binaryDocRequest(documentBytes([[2, 2, 2, 2]]), { parameters: { binary_data_output: true } });
  const raw = await call(`${base}/v2/models/lines/infer`, binaryOut);
  assert.equal(raw.status, 200);
  const headerLength = Number(raw.headers['inference-header-content-length']);
  const tail = (raw.body as Buffer).subarray(headerLength);
  const header = JSON.parse((raw.body as Buffer).subarray(0, headerLength).toString('utf8'));
  assert.equal(header.outputs[0].name, 'result');
  const length = tail.readUInt32LE(0);
  assert.equal(tail.subarray(4, 4 + length).toString('utf8'), expectedRows([[2, 2, 2, 2]])[0]);

  // TorchServe's route: the raw body is the BYTES input, byte for byte; padded 3 → 4 wide.
  const predicted = await call(`${base}/predictions/lines`, {
    method: 'POST',
    body: documentBytes([[0, 1, 2]]),
    headers: { 'content-type': 'application/octet-stream' },
  });
  assert.equal(predicted.status, 200, String(predicted.body));
  assert.deepEqual(predicted.body.first, [0xfe]);
  assert.deepEqual(predicted.body.result, expectedRows([[0, 1, 2]]));

  // No rows: the model step is skipped and the answer has none.
  const empty = await call(`${base}/predictions/lines`, { method: 'POST', body: documentBytes([]) });
  assert.equal(empty.status, 200, String(empty.body));
  assert.deepEqual(empty.body.result, []);

  // batched8 only runs full batches of 8 rows: requests of 3, 5 (3 and 4 wide, padded to one
  // width bucket) can only be answered by running together in one batch.
  const three = [
    [1, 2, 3],
    [4, 5, 6],
    [7, 8, 9],
  ];
  const five = [
    [1, 1, 1, 1],
    [2, 2, 2, 2],
    [3, 3, 3, 3],
    [4, 4, 4, 4],
    [5, 5, 5, 5],
  ];
  const [a, b] = await Promise.all(
    [three, five].map((rows) =>
      call(`${base}/predictions/pairs`, {
        method: 'POST',
        body: documentBytes(rows),
        signal: AbortSignal.timeout(60_000),
      }),
    ),
  );
  assert.equal(a?.status, 200, String(a?.body));
  assert.deepEqual(a?.body.result, expectedRows(three));
  assert.deepEqual(b?.body.result, expectedRows(five));
  const stepStats = (await call(`${base}/v2/models/batched8/stats`)).body.model_stats[0];
  assert.deepEqual(
    stepStats.batch_stats.map((batch: { batch_size: number }) => batch.batch_size),
    [8],
    'one batch of both requests’ rows',
  );
  const pipelineStats = (await call(`${base}/v2/models/pairs/stats`)).body.model_stats[0];
  assert.deepEqual(
    pipelineStats.step_stats.map((step: { step: string }) => step.step),
    ['split', 'double', 'format'],
    'steps run in dependency order',
  );
  assert.ok(pipelineStats.step_stats.every((step: { execution: { count: number } }) => step.execution.count >= 1));

  const metrics = await scrapeMetrics(server);
  const steps = metrics.get('batchserve_pipeline_step_duration_seconds');
  assert.ok(steps, 'the step histogram is exported');
  assert.ok(
    steps.samples.some((sample) => sample.labels.step === 'double' && sample.labels.model === 'pairs'),
    'labelled by step',
  );

  // A request's timeout reaches its model step: batched8 never fills for one row.
  const timedOut = await call(`${base}/v2/models/pairs/infer`, {
    body: jsonDocRequest('1 2 3 4', { parameters: { timeout: 50_000 } }),
  });
  assert.equal(timedOut.status, 503, JSON.stringify(timedOut.body));
  assert.equal(timedOut.body.code, 'BS_ERR_QUEUE_TIMEOUT');
  assert.match(timedOut.body.error, /step "double"/);
});

test('a failing step answers only its request; bad input is a 400, the rest a 500 naming the step', async (t) => {
  const dir = await tempDir(t);
  const models = await packStepModels(dir);
  const server = await startTestServer(t, {
    models: [`affine=${models.affine}`, `lines=${await packPipeline(dir, 'lines', 'affine')}`],
  });
  const predict = (body: Buffer): ReturnType<typeof call> =>
    call(`${server.urls.inference}/predictions/lines`, { method: 'POST', body });
  const [good, bad, crash, tooWide] = await Promise.all([
    predict(documentBytes([[1, 2]])),
    predict(Buffer.from('fail')),
    predict(Buffer.from('crash')),
    predict(documentBytes([[1, 2, 3, 4, 5, 6, 7, 8, 9]])),
  ]);
  assert.equal(good?.status, 200, String(good?.body));
  assert.deepEqual(good?.body.result, expectedRows([[1, 2]]));
  assert.equal(bad?.status, 400);
  assert.equal(bad?.body.code, 'BS_ERR_INFERENCE_INPUT');
  assert.match(bad?.body.error, /step "split": the document says fail/);
  assert.equal(crash?.status, 500);
  assert.equal(crash?.body.code, 'BS_ERR_PIPELINE_STEP');
  assert.match(crash?.body.error, /step "split": boom/);
  assert.equal(tooWide?.status, 400, 'wider than the pad max');
  assert.match(tooWide?.body.error, /step "double".*over the padding max 8/);

  const thrown = await predict(Buffer.from('throw-all'));
  assert.equal(thrown.status, 500);
  assert.match(thrown.body.error, /step "split": the whole batch is bad/);
});

test('versions of a pipeline serve side by side; a model they use is not unloaded unless forced', async (t) => {
  const dir = await tempDir(t);
  const models = await packStepModels(dir);
  const server = await startTestServer(t, {
    models: [
      `affine=${models.affine}`,
      `lines=${await packPipeline(dir, 'lines', 'affine', '1')}`,
      `lines=${await packPipeline(dir, 'lines', 'affine', '2')}`,
    ],
  });
  const versioned = await call(`${server.urls.inference}/v2/models/lines/versions/1/infer`, {
    body: jsonDocRequest('4 4'),
  });
  assert.equal(versioned.status, 200, JSON.stringify(versioned.body));
  assert.equal(versioned.body.model_version, '1');

  const management = server.urls.management;
  // A split applies to the pipeline as a whole: each request runs every step of the version drawn.
  const split = await call(`${management}/models/lines/traffic`, {
    method: 'PUT',
    headers: AUTH,
    body: JSON.stringify({ split: { '1': 50, '2': 50 } }),
  });
  assert.equal(split.status, 200, JSON.stringify(split.body));
  const served = new Set<string>();
  for (let i = 0; i < 40; i++) {
    const answer = await call(`${server.urls.inference}/v2/models/lines/infer`, { body: jsonDocRequest('4 4') });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.deepEqual(outputsOf(answer.body), outputsOf(versioned.body));
    served.add(answer.body.model_version);
  }
  // Both halves drawn in 40 unkeyed requests: all on one side has chance 2 · 0.5^40.
  assert.deepEqual([...served].sort(), ['1', '2']);

  const refused = await call(`${management}/models/affine`, { method: 'DELETE', headers: AUTH });
  assert.equal(refused.status, 409);
  assert.equal(refused.body.code, 'BS_ERR_MODEL_IN_USE');
  assert.match(refused.body.error, /pipeline lines version 1 \(step "double"\), pipeline lines version 2/);

  const forced = await call(`${management}/models/affine?force=true`, { method: 'DELETE', headers: AUTH });
  assert.equal(forced.status, 200, JSON.stringify(forced.body));
  const orphan = await call(`${server.urls.inference}/predictions/lines`, {
    method: 'POST',
    body: documentBytes([[1]]),
  });
  assert.equal(orphan.status, 500);
  assert.match(orphan.body.error, /step "double": unknown model "affine"/);

  // The pipeline itself unloads freely.
  assert.equal((await call(`${management}/models/lines`, { method: 'DELETE', headers: AUTH })).status, 200);
});

test('gRPC: a pipeline takes BYTES as bytes and answers raw outputs', async (t) => {
  const dir = await tempDir(t);
  const models = await packStepModels(dir);
  const server = await startTestServer(t, {
    models: [`affine=${models.affine}`, `lines=${await packPipeline(dir, 'lines', 'affine')}`],
  });
  const grpc = new InferenceClient(server.urls.grpc);
  t.after(() => grpc.close());
  const metadata = await grpc.call('ModelMetadata', { name: 'lines' });
  assert.equal(metadata.response.platform, 'ensemble');
  const answer = await grpc.call('ModelInfer', {
    model_name: 'lines',
    inputs: [{ name: 'doc', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [documentBytes([[3, 3]])] } }],
  });
  assert.equal(answer.error, undefined, JSON.stringify(answer.error));
  const [result, first] = answer.response.raw_output_contents as Buffer[];
  assert.equal(result?.subarray(4).toString('utf8'), expectedRows([[3, 3]])[0]);
  assert.equal(first?.readInt32LE(0), 0xfe, 'the marker byte arrived as it was sent');
  const stats = (await grpc.call('ModelStatistics', { name: 'lines' })).response;
  assert.equal(stats.model_stats[0].name, 'lines');
});

test('a request with more rows than the step model batches goes in chunks', async (t) => {
  const dir = await tempDir(t);
  const small = await packAffine(dir, { name: 'small', width: 'w', config: 'max_batch_size: 2\n' });
  const server = await startTestServer(t, {
    models: [`small=${small}`, `lines=${await packPipeline(dir, 'lines', 'small')}`],
  });
  const rows = [[1], [2], [3], [4], [5]];
  const answer = await call(`${server.urls.inference}/predictions/lines`, {
    method: 'POST',
    body: documentBytes(rows),
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.deepEqual(answer.body.result, expectedRows(rows));
  const stats = (await call(`${server.urls.inference}/v2/models/small/stats`)).body.model_stats[0];
  assert.ok(
    stats.batch_stats.every((batch: { batch_size: number }) => batch.batch_size <= 2),
    'no batch beyond the model’s max_batch_size',
  );
  assert.equal(stats.inference_count, 5);
});

test('a client that goes away takes its rows out of the step model’s queue', async (t) => {
  const dir = await tempDir(t);
  const models = await packStepModels(dir);
  const server = await startTestServer(t, {
    models: [`batched8=${models.batched8}`, `pairs=${await packPipeline(dir, 'pairs', 'batched8')}`],
  });
  const base = server.urls.inference;
  const queuedRows = async (): Promise<number | undefined> =>
    (await scrapeMetrics(server))
      .get('batchserve_queue_rows')
      ?.samples.find((sample) => sample.labels.model === 'batched8')?.value;
  const settles = async (what: string, holds: (rows: number | undefined) => boolean): Promise<void> => {
    // A bound only a hang reaches: the queue moves within milliseconds either way.
    for (let tries = 0; tries < 500; tries++) {
      if (holds(await queuedRows())) return;
      await new Promise((done) => setTimeout(done, 10));
    }
    assert.fail(`batched8's queue never ${what}`);
  };

  // batched8 runs only full batches of 8, so one request's row waits in its queue…
  const controller = new AbortController();
  const abandoned = call(`${base}/v2/models/pairs/infer`, {
    body: jsonDocRequest('1 2 3 4'),
    signal: controller.signal,
  }).then(
    () => 'answered',
    () => 'aborted',
  );
  await settles('held the row', (rows) => rows === 1);
  // …until its client goes away: the pipeline's cancellation reaches the model step's queue.
  controller.abort();
  assert.equal(await abandoned, 'aborted');
  await settles('dropped the row', (rows) => rows === 0);

  // The abandoned row is gone for good: 8 fresh rows run as one batch of exactly 8.
  const eight = Array.from({ length: 8 }, (_, row) => `${row} ${row} ${row} ${row}`).join('\n');
  const full = await call(`${base}/v2/models/pairs/infer`, { body: jsonDocRequest(eight) });
  assert.equal(full.status, 200, JSON.stringify(full.body));
  assert.equal(outputsOf(full.body).result?.length, 8);
  const stats = await call(`${base}/v2/models/batched8/stats`);
  const batches = stats.body.model_stats[0].batch_stats.map((batch: { batch_size: number }) => batch.batch_size);
  assert.deepEqual(batches, [8]);
});
