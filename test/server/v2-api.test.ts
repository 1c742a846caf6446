import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { V2_EXTENSIONS } from '../../src/server/inference-api.js';
import { affine, affineRequest, call, packAffine, startTestServer, type JsonAnswer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

/** A Triton binary request: JSON header, then the FP32 rows' bytes. */
function binaryRequest(rows: number[][], extra: Record<string, unknown> = {}): { body: Buffer; headerLength: number } {
  const data = Buffer.from(new Float32Array(rows.flat()).buffer);
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'x', datatype: 'FP32', shape: [rows.length, 4], parameters: { binary_data_size: data.length } }],
      ...extra,
    }),
  );
  return { body: Buffer.concat([header, data]), headerLength: header.length };
}

/** The FP32 values of a binary response's single output, checked against its header. */
function binaryValues(answer: JsonAnswer): number[] {
  assert.equal(answer.headers['content-type'], 'application/octet-stream');
  const jsonLength = Number(answer.headers['inference-header-content-length']);
  const body = answer.body as Buffer;
  const header = JSON.parse(body.subarray(0, jsonLength).toString()) as {
    outputs: { parameters: { binary_data_size: number } }[];
  };
  const tail = body.subarray(jsonLength);
  assert.equal(header.outputs[0]?.parameters.binary_data_size, tail.length);
  return Array.from(new Float32Array(tail.buffer.slice(tail.byteOffset, tail.byteOffset + tail.length)));
}

test('KServe v2 routes answer as the protocol says', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir)}`],
    model_store: join(dir, 'store'),
    max_request_size: 64 * 1024,
  });
  const base = server.urls.inference;

  const meta = await call(`${base}/v2`);
  assert.equal(meta.status, 200);
  assert.equal(meta.body.name, 'batchserve');
  assert.deepEqual(meta.body.extensions, V2_EXTENSIONS);
  assert.deepEqual((await call(`${base}/v2/health/live`)).body, { live: true });
  assert.deepEqual(await call(`${base}/v2/health/ready`).then((r) => [r.status, r.body]), [200, { ready: true }]);

  const model = await call(`${base}/v2/models/affine`);
  assert.deepEqual(model.body, {
    name: 'affine',
    versions: ['1'],
    platform: 'onnxruntime_onnx',
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
    outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
  });
  assert.deepEqual((await call(`${base}/v2/models/affine/versions/1`)).body, model.body);
  assert.deepEqual((await call(`${base}/v2/models/affine/ready`)).body, { name: 'affine', ready: true });
  assert.deepEqual((await call(`${base}/v2/models/affine/versions/1/ready`)).body, { name: 'affine', ready: true });
  const config = await call(`${base}/v2/models/affine/config`);
  assert.equal(config.body.max_batch_size, 8);
  // As Triton prints it: every scalar field with its default.
  assert.deepEqual(config.body.input, [
    {
      name: 'x',
      data_type: 'TYPE_FP32',
      format: 'FORMAT_NONE',
      dims: [4],
      is_shape_tensor: false,
      allow_ragged_batch: false,
      optional: false,
      is_non_linear_format_io: false,
    },
  ]);

  const rows = [
    [1, 2, 3, 4],
    [-1, 0, 0.5, 8],
  ];
  const infer = await call(`${base}/v2/models/affine/infer`, { body: affineRequest(rows, { id: 'req-7' }) });
  assert.equal(infer.status, 200, JSON.stringify(infer.body));
  assert.deepEqual(infer.body, {
    model_name: 'affine',
    model_version: '1',
    id: 'req-7',
    outputs: [{ name: 'y', datatype: 'FP32', shape: [2, 4], data: affine(rows) }],
  });
  const nested = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 4], data: rows }] });
  assert.deepEqual(
    (await call(`${base}/v2/models/affine/versions/1/infer`, { body: nested })).body.outputs,
    infer.body.outputs,
  );

  const stats = await call(`${base}/v2/models/affine/stats`);
  assert.equal(stats.body.model_stats[0].inference_count, 4, 'rows inferred');
  assert.equal(stats.body.model_stats[0].inference_stats.success.count, 2);
  assert.equal((await call(`${base}/v2/models/stats`)).body.model_stats.length, 1);
  assert.equal((await call(`${base}/v2/models/affine/versions/1/stats`)).status, 200);

  const index = await call(`${base}/v2/repository/index`, { method: 'POST', body: '{}' });
  assert.deepEqual(index.body, [{ name: 'affine', version: '1', state: 'READY' }]);
});

test('binary and JSON requests give identical results; outputs and classification are selectable', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'labels.txt'), 'a\nb\nc\nd\n');
  const archive = await packAffine(dir, {
    config: 'max_batch_size: 8\nlabels_file: labels.txt\n',
    extraFiles: [join(dir, 'labels.txt')],
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const rows = [
    [0.25, -3, 7, 1e-3],
    [5, 6, 7, 8],
    [1.5, 2.5, 3.5, 4.5],
  ];
  const json = await call(url, { body: affineRequest(rows) });
  const { body, headerLength } = binaryRequest(rows);
  const binary = await call(url, {
    body,
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(headerLength) },
  });
  assert.equal(binary.status, 200, JSON.stringify(binary.body));
  assert.deepEqual(binary.body, json.body);

  const binaryOut = await call(url, {
    body: affineRequest(rows, { outputs: [{ name: 'y', parameters: { binary_data: true } }] }),
  });
  assert.deepEqual(binaryValues(binaryOut), json.body.outputs[0].data);

  const raw = Buffer.from(new Float32Array(rows.flat()).buffer);
  const rawAnswer = await call(url, {
    body: raw,
    headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': '0' },
  });
  assert.deepEqual(
    binaryValues(rawAnswer),
    json.body.outputs[0].data,
    'a raw body is the single input; answered in binary',
  );

  const classified = await call(url, {
    body: affineRequest([[0, 3, 1, 2]], { outputs: [{ name: 'y', parameters: { classification: 2 } }] }),
  });
  assert.deepEqual(classified.body.outputs, [
    { name: 'y', datatype: 'BYTES', shape: [1, 2], data: ['7.000000:1:b', '5.000000:3:d'] },
  ]);
});

test('bad requests get a 4xx with {"error": …, "code": …} and the server keeps serving', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`], max_request_size: 4096 });
  const base = server.urls.inference;
  const url = `${base}/v2/models/affine/infer`;
  const expectError = async (status: number, answer: Promise<{ status: number; body: unknown }>): Promise<string> => {
    const { status: got, body } = await answer;
    assert.equal(got, status, JSON.stringify(body));
    assert.deepEqual(Object.keys(body as object), ['error', 'code']);
    assert.match((body as { code: string }).code, /^BS_ERR_[A-Z_]+$/);
    return (body as { error: string }).error;
  };
  const x = (fields: Record<string, unknown>): string =>
    JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4], ...fields }] });

  await expectError(400, call(url, { body: '{"inputs": [' }));
  await expectError(400, call(url, { body: x({ datatype: 'FLOAT' }) }));
  await expectError(400, call(url, { body: x({ data: [1, 2, 3] }) }));
  await expectError(400, call(url, { body: x({ datatype: 'INT32' }) }));
  await expectError(400, call(url, { body: x({ shape: [1, 2, 2] }) }));
  await expectError(400, call(url, { body: x({ shape: [1, 5], data: [1, 2, 3, 4, 5] }) }));
  await expectError(400, call(url, { body: x({ name: 'z' }) }));
  await expectError(400, call(url, { body: JSON.stringify({ inputs: [] }) }));
  await expectError(400, call(url, { body: affineRequest([[1, 2, 3, 4]], { outputs: [{ name: 'nope' }] }) }));
  assert.match(
    await expectError(400, call(url, { body: affineRequest(Array.from({ length: 9 }, () => [1, 2, 3, 4])) })),
    /max_batch_size is 8/,
  );
  await expectError(
    400,
    call(url, { body: Buffer.from('{}'), headers: { 'content-type': 'application/octet-stream' } }),
  );
  await expectError(404, call(`${base}/v2/models/nope/infer`, { body: x({}) }));
  await expectError(404, call(`${base}/v2/models/affine/versions/9/infer`, { body: x({}) }));
  await expectError(404, call(`${base}/v2/models/nope`));
  await expectError(404, call(`${base}/v3/whatever`));
  const wrongMethod = await call(url, { method: 'GET' });
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.headers.allow, 'POST');
  await expectError(405, call(`${base}/v2/health/ready`, { method: 'DELETE' }));
  await expectError(
    413,
    call(url, {
      body:
        affineRequest(Array.from({ length: 8 }, () => Array.from({ length: 4 }, () => 123456.789))) + ' '.repeat(4096),
    }),
  );
  await expectError(415, call(url, { body: x({}), headers: { 'content-type': 'text/plain' } }));

  const after = await call(url, { body: x({}) });
  assert.equal(after.status, 200, 'still serving');
  assert.deepEqual(after.body.outputs[0].data, [3, 5, 7, 9]);
});

test('a 4xx echoes a large name, datatype, shape or parameter only cut short', async (t) => {
  const server = await startTestServer(t, { models: [`affine=${await packAffine(await tempDir(t), { width: 'w' })}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const big = 'm'.repeat(140_000);
  const x = (fields: Record<string, unknown>, extra: Record<string, unknown> = {}): string =>
    JSON.stringify({
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4], ...fields }],
      ...extra,
    });
  for (const [what, body] of [
    ['input name', x({ name: big })],
    ['datatype', x({ datatype: big })],
    ['shape', x({ shape: [...Array.from({ length: 20_000 }, () => 1), -1] })],
    ['output name', x({}, { outputs: [{ name: big }] })],
    ['output name twice', x({}, { outputs: [{ name: big }, { name: big }] })],
    ['priority', x({}, { parameters: { priority: big } })],
  ] as const) {
    const answer = await call(url, { body });
    assert.equal(answer.status, 400, what);
    assert.match(answer.body.code, /^BS_ERR_(INFERENCE_INPUT|USAGE)$/, what);
    assert.ok(String(answer.body.error).length < 400, `${what}: ${String(answer.body.error).slice(0, 300)}`);
  }
});
