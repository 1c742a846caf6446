import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deflateSync, gzipSync } from 'node:zlib';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const ROWS = [
  [0.25, -3, 7, 0.5],
  [5, 6, 7, 8],
];

/** Triton's binary tensor extension: the JSON header, then the FP32 rows as raw bytes. */
function binaryBody(): { body: Buffer; headerLength: number } {
  const data = Buffer.from(new Float32Array(ROWS.flat()).buffer);
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 4], parameters: { binary_data_size: data.length } }],
    }),
  );
  return { body: Buffer.concat([header, data]), headerLength: header.length };
}

test("compressed infer bodies (tritonclient's request_compression_algorithm) are inflated within max_request_size; what cannot be is a 4xx saying why", async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`], max_request_size: 64 * 1024 });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const json = Buffer.from(affineRequest(ROWS));
  for (const [coding, body] of [
    ['gzip', gzipSync(json)],
    ['x-gzip', gzipSync(json)],
    ['deflate', deflateSync(json)],
    ['GZIP', gzipSync(json)],
  ] as const) {
    const answer = await call(url, {
      body,
      headers: { 'content-type': 'application/json', 'content-encoding': coding },
    });
    assert.equal(answer.status, 200, `${coding}: ${JSON.stringify(answer.body)}`);
    assert.deepEqual(answer.body.outputs[0].data, affine(ROWS), coding);
  }
  const { body, headerLength } = binaryBody();
  const binary = await call(url, {
    body: gzipSync(body),
    headers: {
      'content-type': 'application/octet-stream',
      'content-encoding': 'gzip',
      'inference-header-content-length': String(headerLength),
    },
  });
  assert.equal(binary.status, 200, JSON.stringify(binary.body));
  assert.deepEqual(binary.body.outputs[0].data, affine(ROWS), 'the binary extension, gzipped');

  // A 1 MiB body of spaces compresses to about 1 KiB: it is refused once inflated past the limit.
  const bomb = gzipSync(
    Buffer.concat([json.subarray(0, json.length - 1), Buffer.alloc(1024 ** 2, ' '), Buffer.from('}')]),
  );
  assert.ok(bomb.length < 8 * 1024);
  for (const [what, headers, payload, status, code] of [
    ['a bomb', { 'content-encoding': 'gzip' }, bomb, 413, 'BS_ERR_PAYLOAD_TOO_LARGE'],
    ['not gzip', { 'content-encoding': 'gzip' }, json, 400, 'BS_ERR_INFERENCE_INPUT'],
    ['a cut stream', { 'content-encoding': 'gzip' }, gzipSync(json).subarray(0, 20), 400, 'BS_ERR_INFERENCE_INPUT'],
    ['brotli', { 'content-encoding': 'br' }, json, 415, 'BS_ERR_UNSUPPORTED_MEDIA_TYPE'],
  ] as const) {
    const answer = await call(url, { body: payload, headers: { 'content-type': 'application/json', ...headers } });
    assert.equal(answer.status, status, `${what}: ${JSON.stringify(answer.body)}`);
    assert.deepEqual(Object.keys(answer.body), ['error', 'code'], what);
    assert.equal(answer.body.code, code, what);
  }
  const refusedElsewhere = await call(`${server.urls.inference}/v2/models/affine/feedback`, {
    body: gzipSync('{}'),
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
  });
  assert.equal(refusedElsewhere.status, 415, JSON.stringify(refusedElsewhere.body));
  assert.match(refusedElsewhere.body.error, /Content-Encoding gzip is not accepted here/);
  const after = await call(url, { body: json.toString() });
  assert.equal(after.status, 200, 'the server goes on serving');
});
