import assert from 'node:assert/strict';
import { test } from 'node:test';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { sendWholeThenRead } from '../fixtures/raw-http.js';
import { tempDir } from '../fixtures/temp.js';

const LIMIT = 256 * 1024;

async function serveAffine(t: import('node:test').TestContext) {
  const dir = await tempDir(t);
  return startTestServer(t, { models: [`affine=${await packAffine(dir)}`], max_request_size: LIMIT });
}

test('an oversized upload gets its 413 even when the client sends the whole body before reading', async (t) => {
  const server = await serveAffine(t);
  const body = Buffer.alloc(8 * 1024 * 1024, 0x20);
  const path = '/v2/models/affine/infer';
  // Declared too large: refused before any of the body is read.
  const declared = await sendWholeThenRead(
    server.urls.inference,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
    body,
  );
  assert.equal(declared.sendError, undefined, 'the upload was cut off');
  assert.equal(declared.status, 413);
  assert.equal(declared.headers.connection, 'close');
  assert.equal(JSON.parse(declared.body).code, 'BS_ERR_PAYLOAD_TOO_LARGE');
  // Chunked, so the limit is only crossed part-way through reading.
  const chunked = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]);
  const streamed = await sendWholeThenRead(
    server.urls.inference,
    `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    chunked,
  );
  assert.equal(streamed.sendError, undefined, 'the upload was cut off');
  assert.equal(streamed.status, 413);
  assert.equal(JSON.parse(streamed.body).code, 'BS_ERR_PAYLOAD_TOO_LARGE');
  // The server goes on answering.
  const answer = await call(`${server.urls.inference}${path}`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.status, 200);
});

test('a body ending in a quote is read, and 50,000 nested brackets are a 400, over HTTP', async (t) => {
  const server = await serveAffine(t);
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const withId = await call(url, { body: affineRequest([[1, 2, 3, 4]], { id: '42' }) });
  assert.equal(withId.status, 200, JSON.stringify(withId.body));
  assert.equal(withId.body.id, '42');
  assert.deepEqual(withId.body.outputs[0].data, affine([[1, 2, 3, 4]]));
  const empty = await call(url, { body: '{"inputs":[],"id":"42"}' });
  assert.equal(empty.status, 400);
  assert.doesNotMatch(empty.body.error, /not JSON/);
  const deep = `${'['.repeat(50_000)}1${']'.repeat(50_000)}`;
  const nested = await call(url, {
    body: `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,${deep}]}]}`,
  });
  assert.equal(nested.status, 400);
  assert.equal(nested.body.code, 'BS_ERR_INFERENCE_INPUT');
  assert.match(nested.body.error, /nested deeper/);
});
