import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  fetchModelMetadata,
  payloadFromFile,
  randomPayload,
  type ModelMetadata,
  type RequestPayload,
} from '../../src/bench/payload.js';
import type { Protocol } from '../../src/bench/report-types.js';
import { DATATYPES } from '../../src/core/datatypes.js';
import { decodeInferRequest } from '../../src/protocol/v2-codec.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

async function affineServer(t: Parameters<typeof tempDir>[0]): Promise<{ base: string; metadata: ModelMetadata }> {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  return { base: server.urls.inference, metadata: await fetchModelMetadata(server.urls.inference, 'affine') };
}

function send(base: string, payload: RequestPayload): ReturnType<typeof call> {
  return call(`${base}${payload.path}`, { body: payload.body, headers: payload.headers });
}

/** The rows of the response's single output, whichever protocol answered. */
function outputRows(payload: RequestPayload, answer: Awaited<ReturnType<typeof call>>): number {
  if (payload.path.startsWith('/predictions/')) return answer.body.y.length;
  if (Buffer.isBuffer(answer.body)) {
    const headerLength = Number(answer.headers['inference-header-content-length']);
    return JSON.parse(answer.body.subarray(0, headerLength).toString()).outputs[0].shape[0];
  }
  return answer.body.outputs[0].shape[0];
}

/**
 * Nothing listens on port 1, and no server can be handed it while the tests run: port 0 only
 * ever yields ephemeral ports. (A port freed by closing a server could be taken in between.)
 */
const CLOSED_PORT_URL = 'http://127.0.0.1:1';

test('model metadata comes from the server; a missing model or server is a clear error', async (t) => {
  const { base, metadata } = await affineServer(t);
  assert.deepEqual(metadata.inputs, [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }]);
  await assert.rejects(fetchModelMetadata(base, 'missing'), { code: 'BS_ERR_MODEL_NOT_FOUND' });
  await assert.rejects(fetchModelMetadata(CLOSED_PORT_URL, 'affine'), {
    code: 'BS_ERR_USAGE',
  });
});

test('random payloads of every protocol decode on the server, with clientBatch rows', async (t) => {
  const { base, metadata } = await affineServer(t);
  for (const protocol of ['v2-binary', 'v2-json', 'torchserve'] as Protocol[]) {
    for (const clientBatch of [1, 3]) {
      const payload = randomPayload(metadata, { protocol, clientBatch, seed: 7 });
      assert.equal(payload.rows, clientBatch);
      const answer = await send(base, payload);
      assert.equal(answer.status, 200, `${protocol}: ${JSON.stringify(answer.body)}`);
      assert.equal(outputRows(payload, answer), clientBatch, protocol);
    }
  }
  const binary = randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 2 });
  assert.equal(binary.path, '/v2/models/affine/infer');
  assert.equal(binary.headers['content-type'], 'application/octet-stream');
  const json = randomPayload(metadata, { protocol: 'v2-json', clientBatch: 2 });
  assert.equal(json.headers['content-type'], 'application/json');
  assert.equal(randomPayload(metadata, { protocol: 'torchserve', clientBatch: 1 }).path, '/predictions/affine');
});

test('binary and JSON payloads carry the same tensors for every datatype, with exact binary sizes', () => {
  const inputs = DATATYPES.map((datatype) => ({ name: `t_${datatype}`, datatype, shape: [-1, 3] }));
  const metadata: ModelMetadata = { name: 'all', inputs, outputs: [] };
  const binary = randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 2, seed: 42 });
  const json = randomPayload(metadata, { protocol: 'v2-json', clientBatch: 2, seed: 42 });
  const headerLength = Number(binary.headers['inference-header-content-length']);
  const header = JSON.parse(binary.body.subarray(0, headerLength).toString());
  assert.deepEqual(header.parameters, { binary_data_output: true });
  const sizes = header.inputs.map((input: { parameters: { binary_data_size: number } }) => input.parameters);
  assert.equal(
    headerLength + sizes.reduce((sum: number, size: { binary_data_size: number }) => sum + size.binary_data_size, 0),
    binary.body.length,
  );
  // decodeInferRequest checks every binary_data_size against the datatype and shape.
  const fromBinary = decodeInferRequest(binary.body, headerLength, inputs).inputs;
  const fromJson = decodeInferRequest(json.body, undefined, inputs).inputs;
  for (const { name, datatype } of inputs) {
    assert.deepEqual(fromBinary[name]?.dims, [2, 3], name);
    const values = (data: unknown): unknown[] => Array.from(data as ArrayLike<unknown>);
    assert.deepEqual(values(fromBinary[name]?.data), values(fromJson[name]?.data), datatype);
  }
});

test('the seed fixes the bytes; variable dimensions are 1 unless a shape is given', () => {
  const metadata: ModelMetadata = {
    name: 'image',
    inputs: [{ name: 'pixels', datatype: 'FP16', shape: [-1, -1, 3] }],
    outputs: [],
  };
  const one = randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 2, seed: 1 });
  assert.deepEqual(one.body, randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 2, seed: 1 }).body);
  assert.notDeepEqual(one.body, randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 2, seed: 2 }).body);
  const shapeOf = (payload: RequestPayload): number[] => JSON.parse(payload.body.toString()).inputs[0].shape;
  const json = (shapeOverrides?: Record<string, number[]>): RequestPayload =>
    randomPayload(metadata, { protocol: 'v2-json', clientBatch: 4, ...(shapeOverrides ? { shapeOverrides } : {}) });
  assert.deepEqual(shapeOf(json()), [4, 1, 3]);
  assert.deepEqual(shapeOf(json({ pixels: [5, 3] })), [4, 5, 3]);
  assert.deepEqual(shapeOf(json({ pixels: [-1, 5, 3] })), [4, 5, 3]);
  assert.throws(() => json({ pixels: [5, 4] }), { code: 'BS_ERR_USAGE' });
  assert.throws(() => json({ other: [1, 3] }), { code: 'BS_ERR_USAGE' });
  const fixed: ModelMetadata = { name: 'fixed', inputs: [{ name: 'x', datatype: 'FP32', shape: [3] }], outputs: [] };
  assert.throws(() => randomPayload(fixed, { protocol: 'v2-json', clientBatch: 2 }), { code: 'BS_ERR_USAGE' });
  assert.equal(randomPayload(fixed, { protocol: 'v2-json', clientBatch: 1 }).rows, 1);
});

test('file inputs: JSON bodies as they are, raw bytes as Triton raw requests or TorchServe bodies', async (t) => {
  const { base, metadata } = await affineServer(t);
  const dir = await tempDir(t);
  const v2Json = join(dir, 'request.json');
  await writeFile(
    v2Json,
    JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 4], data: [1, 2, 3, 4, 5, 6, 7, 8] }] }),
  );
  const tsJson = join(dir, 'torchserve.json');
  await writeFile(tsJson, JSON.stringify({ x: [[1, 2, 3, 4]] }));
  const raw = join(dir, 'rows.bin');
  await writeFile(raw, Buffer.from(new Float32Array(12).fill(0.5).buffer));
  const image = join(dir, 'cat.png');
  await writeFile(image, Buffer.from([0x89, 0x50, 0x4e, 0x47]));

  const fromV2 = await payloadFromFile(v2Json, metadata, 'v2-json');
  assert.equal(fromV2.rows, 2);
  assert.equal((await send(base, fromV2)).status, 200);
  const fromTorchserve = await payloadFromFile(tsJson, metadata, 'torchserve');
  assert.equal(fromTorchserve.rows, 1);
  assert.equal((await send(base, fromTorchserve)).status, 200);
  const fromRaw = await payloadFromFile(raw, metadata, 'v2-binary');
  assert.equal(fromRaw.rows, 3);
  assert.equal(fromRaw.headers['inference-header-content-length'], '0');
  const rawAnswer = await send(base, fromRaw);
  assert.equal(rawAnswer.status, 200);
  assert.equal(outputRows(fromRaw, rawAnswer), 3);

  const fromImage = await payloadFromFile(image, metadata, 'torchserve');
  assert.deepEqual([fromImage.headers['content-type'], fromImage.rows], ['image/png', 1]);
  assert.equal(
    (await payloadFromFile(raw, metadata, 'torchserve')).headers['content-type'],
    'application/octet-stream',
  );

  await assert.rejects(payloadFromFile(raw, metadata, 'v2-json'), { code: 'BS_ERR_USAGE' });
  const twoInputs: ModelMetadata = { ...metadata, inputs: [...metadata.inputs, { ...metadata.inputs[0]!, name: 'z' }] };
  await assert.rejects(payloadFromFile(raw, twoInputs, 'v2-binary'), { code: 'BS_ERR_USAGE' });
  await assert.rejects(payloadFromFile(image, metadata, 'v2-binary'), { code: 'BS_ERR_USAGE' }, 'not whole rows');
  await assert.rejects(payloadFromFile(join(dir, 'missing.json'), metadata, 'v2-json'), { code: 'BS_ERR_INPUT_FILE' });
});
