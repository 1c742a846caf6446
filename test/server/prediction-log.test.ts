import assert from 'node:assert/strict';
import { mkdir, readFile, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { FeedbackRecord, LogRecord, PredictionRecord } from '../../src/experiment/log-records.js';
import type { BatchServer } from '../../src/server/server.js';
import { samplesOf } from '../metrics/prometheus-text.js';
import { affineRequest, call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const ROW = [1, 2, 3, 4];
const AUTH = { authorization: 'Bearer test-token' };

async function twoVersions(t: TestContext, root: string, config: Record<string, unknown>): Promise<BatchServer> {
  const v1 = await packAffine(join(root, 'v1'), { version: '1' });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2 });
  return startTestServer(t, { models: [`affine=${v1}`, `affine=${v2}`], ...config });
}

async function readLog(folder: string): Promise<LogRecord[]> {
  const names = (await readdir(folder)).filter((name) => name.endsWith('.jsonl')).sort();
  const text = (await Promise.all(names.map((name) => readFile(join(folder, name), 'utf8')))).join('');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as LogRecord);
}

const infer = (server: BatchServer, body: string, headers: Record<string, string> = {}, path = '/v2/models/affine') =>
  call(`${server.urls.inference}${path}/infer`, { body, headers });

test('the prediction log has one record per answered request: variant, routing, sticky key, status, latency, outputs and X-Request-Id', async (t) => {
  const root = await tempDir(t);
  const logDir = join(root, 'logs');
  const server = await twoVersions(t, root, {
    prediction_log: logDir,
    model_policies: { affine: { traffic: { split: { '1': 50, '2': 50 }, sticky_key: 'header:X-User' } } },
  });
  const a = await infer(server, affineRequest([ROW], { id: 'req-a' }), { 'x-user': 'user-7' });
  assert.equal(a.status, 200);
  assert.equal(a.headers['x-request-id'], 'req-a', 'the v2 id is the request id');
  const b = await infer(server, affineRequest([ROW]), { 'x-request-id': 'client-b' });
  assert.equal(b.headers['x-request-id'], 'client-b', "else the client's X-Request-Id");
  const c = await infer(server, affineRequest([ROW, ROW]));
  const generated = c.headers['x-request-id'] as string;
  assert.match(generated, /^[0-9a-f-]{36}$/, 'else one the server makes');
  const d = await infer(server, affineRequest([ROW], { id: 'req-d' }), {}, '/v2/models/affine/versions/1');
  assert.equal(d.status, 200);
  const e = await infer(
    server,
    JSON.stringify({ id: 'req-e', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] }] }),
  );
  assert.equal(e.status, 400);
  const cleared = await call(`${server.urls.management}/models/affine/traffic`, {
    method: 'PUT',
    headers: AUTH,
    body: '{}',
  });
  assert.equal(cleared.status, 200, JSON.stringify(cleared.body));
  const f = await infer(server, affineRequest([ROW], { id: 'req-f' }));
  assert.equal(f.headers['x-model-version'], '1', 'the default: the first version loaded');
  await server.drain(5_000);

  const records = (await readLog(join(logDir, 'affine'))) as PredictionRecord[];
  const byId = new Map(records.map((record) => [record.id, record]));
  assert.equal(records.length, 6);
  const first = byId.get('req-a') as PredictionRecord;
  assert.equal(first.type, 'prediction');
  assert.equal(first.model, 'affine');
  assert.equal(first.version, a.headers['x-model-version']);
  assert.equal(first.routing, 'split');
  assert.equal(first.sticky_key, 'user-7');
  assert.equal(first.status, 200);
  assert.equal(first.rows, 1);
  assert.ok(first.latency_ms > 0 && first.latency_ms < 10_000, String(first.latency_ms));
  assert.ok(!Number.isNaN(Date.parse(first.time)));
  assert.deepEqual(first.outputs, {
    y: { datatype: 'FP32', shape: [1, 4], data: a.body.outputs[0].data },
  });
  assert.equal(first.inputs, undefined, 'inputs: none by default');
  assert.equal(byId.get('client-b')?.sticky_key, undefined, 'no key, no sticky_key');
  assert.equal(byId.get(generated)?.rows, 2);
  assert.equal(byId.get('req-d')?.routing, 'explicit');
  // Refused while its body was read, the request keeps the id it was given at the door.
  const refused = byId.get(e.headers['x-request-id'] as string);
  assert.deepEqual(
    [refused?.status, refused?.error_code, refused?.outputs],
    [400, 'BS_ERR_INFERENCE_INPUT', undefined],
  );
  assert.equal(byId.get('req-f')?.routing, 'default');
});

test('shadow answers are logged beside the served one, marked as shadow, under the same id', async (t) => {
  const root = await tempDir(t);
  const logDir = join(root, 'logs');
  const server = await twoVersions(t, root, {
    prediction_log: logDir,
    model_policies: { affine: { default_version: '1', traffic: { shadow: '2' } } },
  });
  const answer = await infer(server, affineRequest([ROW], { id: 'mirrored' }));
  assert.equal(answer.status, 200);
  // The shadow's copy finishes on its own time; the drain waits for it.
  await server.drain(5_000);
  const records = (await readLog(join(logDir, 'affine'))) as PredictionRecord[];
  const served = records.find((record) => record.shadow === undefined);
  const shadow = records.find((record) => record.shadow === true);
  assert.deepEqual([served?.id, served?.version, served?.routing], ['mirrored', '1', 'default']);
  assert.deepEqual([shadow?.id, shadow?.version, shadow?.routing], ['mirrored', '2', 'shadow']);
  assert.deepEqual((shadow?.outputs as { y: { data: number[] } }).y.data, [4, 6, 8, 10]);
});

test('feedback joins to the logged prediction by id, on both routes, after a restart too; bad feedback gets 400, 404 or 409', async (t) => {
  const root = await tempDir(t);
  const dir = join(root, 'v1');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'labels.txt'), 'a\nb\nc\nd\n');
  const logDir = join(root, 'classifier-log');
  const archive = await packAffine(dir, {
    version: '1',
    config: `max_batch_size: 8\nlabels_file: labels.txt\nprediction_log:\n  path: ${logDir}\n  inputs: full\n  top_k: 2\n`,
    extraFiles: [join(dir, 'labels.txt')],
  });
  const stateFile = join(root, 'state.json');
  const server = await startTestServer(t, { models: [`affine=${archive}`], state_file: stateFile });
  const answer = await infer(server, affineRequest([ROW], { id: 'q1' }));
  assert.deepEqual(answer.body.outputs[0].data, [3, 5, 7, 9], 'a request whose inputs are logged is answered intact');
  const feedback = (body: unknown, path = '/v2/models/affine/feedback', target = server) =>
    call(`${target.urls.inference}${path}`, { body: typeof body === 'string' ? body : JSON.stringify(body) });

  const joined = await feedback({ id: 'q1', label: 'd' });
  assert.equal(joined.status, 200, JSON.stringify(joined.body));
  assert.deepEqual(joined.body, { id: 'q1', model: 'affine', version: '1' });
  assert.equal((await feedback({ id: 'q1', reward: 0.5 }, '/feedback/affine')).status, 200, 'TorchServe route');

  const refused = async (body: unknown, status: number, code: string, path?: string) => {
    const answer = await feedback(body, path);
    assert.equal(answer.status, status, JSON.stringify(body));
    assert.equal(answer.body.code, code, JSON.stringify(answer.body));
  };
  await refused({ id: 'never-answered', value: 1 }, 404, 'BS_ERR_FEEDBACK_UNKNOWN_ID');
  await refused('{"id": "q1", "value": ', 400, 'BS_ERR_FEEDBACK_INVALID');
  await refused({ id: 5, value: 1 }, 400, 'BS_ERR_FEEDBACK_INVALID');
  await refused({ id: 'q1' }, 400, 'BS_ERR_FEEDBACK_INVALID');
  await refused({ id: 'q1', value: 'high' }, 400, 'BS_ERR_FEEDBACK_INVALID');
  await refused({ id: 'q1', label: 3 }, 400, 'BS_ERR_FEEDBACK_INVALID');
  await refused({ id: 'q1', value: 1, truth: 1 }, 400, 'BS_ERR_FEEDBACK_INVALID');
  await refused({ id: 'q1', value: 1 }, 404, 'BS_ERR_MODEL_NOT_FOUND', '/v2/models/nope/feedback');
  await server.close();

  const records = await readLog(logDir);
  const prediction = records.find((record) => record.type === 'prediction') as PredictionRecord;
  assert.equal(prediction.prediction, 'd', 'the top-1 label of the row');
  assert.deepEqual(
    prediction.top_k?.[0]?.map((entry) => entry.label),
    ['d', 'c'],
  );
  assert.deepEqual(prediction.inputs, { x: { datatype: 'FP32', shape: [1, 4], data: ROW } });
  const feedbacks = records.filter((record): record is FeedbackRecord => record.type === 'feedback');
  assert.deepEqual(
    feedbacks.map(({ id, version, label, reward }) => ({ id, version, label, reward })),
    [
      { id: 'q1', version: '1', label: 'd', reward: undefined },
      { id: 'q1', version: '1', label: undefined, reward: 0.5 },
    ],
  );

  // A new server remembers nothing, but the log files still hold q1.
  const again = await startTestServer(t, { models: [`affine=${archive}`], state_file: stateFile });
  const late = await feedback({ id: 'q1', value: 1 }, '/v2/models/affine/feedback', again);
  assert.equal(late.status, 200, JSON.stringify(late.body));
  const unlogged = await packAffine(join(root, 'plain'), { name: 'plain' });
  const plain = await startTestServer(t, { models: [`plain=${unlogged}`] });
  const off = await call(`${plain.urls.inference}/v2/models/plain/feedback`, { body: '{"id": "x", "value": 1}' });
  assert.deepEqual([off.status, off.body.code], [409, 'BS_ERR_PREDICTION_LOG_OFF']);
  // Closed here, before the temp folder is removed: a closing server writes its last records.
  await again.close();
  await plain.close();
});

test('a log on a disk that refuses writes loses records, counted, and no request', async (t) => {
  const root = await tempDir(t);
  const logDir = join(root, 'logs');
  await mkdir(join(logDir, 'affine'), { recursive: true });
  await symlink('/dev/full', join(logDir, 'affine', 'predictions-000001.jsonl'));
  const archive = await packAffine(join(root, 'v1'));
  const server = await startTestServer(t, { models: [`affine=${archive}`], prediction_log: logDir });
  const answers = await Promise.all(Array.from({ length: 40 }, () => infer(server, affineRequest([ROW]))));
  assert.deepEqual(new Set(answers.map((answer) => answer.status)), new Set([200]));
  const dropped = async () =>
    samplesOf(await scrapeMetrics(server), 'batchserve_prediction_log_dropped_total', {
      model: 'affine',
      reason: 'write_failed',
    })[0]?.value ?? 0;
  const deadline = Date.now() + 10_000;
  while ((await dropped()) < 40 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 20));
  assert.equal(await dropped(), 40);
  const after = await infer(server, affineRequest([ROW]));
  assert.equal(after.status, 200, 'serving goes on');
});
