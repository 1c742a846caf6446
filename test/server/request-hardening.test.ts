import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { headersThenWait, openRaw, sendWholeThenRead } from '../fixtures/raw-http.js';
import { tempDir } from '../fixtures/temp.js';

const LIMIT = 256 * 1024;

async function serveAffine(t: TestContext) {
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

/** Polls a condition the server exposes (not a fixed sleep), failing after `ms`. */
async function until(condition: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test('admission at the door: refusals are decided from the headers, before any body is read', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [
      `affine=${await packAffine(dir, { config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_size: 1\n' })}`,
    ],
    max_request_size: LIMIT,
  });
  const path = '/v2/models/affine/infer';
  const body = affineRequest([[1, 2, 3, 4]]);
  const headersOnly = (target: string, length = body.length) =>
    `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
  // Each of these is answered though its body never comes.
  const unknown = await headersThenWait(server.urls.inference, headersOnly('/v2/models/nope/infer'));
  assert.equal(unknown.status, 404);
  const tooLarge = await headersThenWait(server.urls.inference, headersOnly(path, LIMIT + 1));
  assert.equal(tooLarge.status, 413);
  // A request still sending its body holds the one queue place: the next is refused at once.
  const model = server.repository.get('affine');
  const slow = await openRaw(server.urls.inference);
  slow.socket.write(headersOnly(path));
  await until(() => model.reservedRows === 1, 'the slow request to hold its place');
  const refused = await headersThenWait(server.urls.inference, headersOnly(path));
  assert.equal(refused.status, 503);
  assert.equal(JSON.parse(refused.body).code, 'BS_ERR_QUEUE_FULL');
  assert.equal(refused.headers['retry-after'], '1');
  // The slow one finishes its body and is answered; its place is given back.
  slow.socket.write(body);
  const answer = await slow.answer;
  assert.equal(answer.status, 200);
  assert.deepEqual(JSON.parse(answer.body).outputs[0].data, affine([[1, 2, 3, 4]]));
  assert.equal(model.reservedRows, 0);
  // A client that goes away mid-body gives its place back too.
  const quitter = await openRaw(server.urls.inference);
  quitter.socket.write(headersOnly(path));
  await until(() => model.reservedRows === 1, 'the quitter to hold its place');
  quitter.socket.destroy();
  await until(() => model.reservedRows === 0, 'the place to be given back');
  assert.equal((await call(`${server.urls.inference}${path}`, { body })).status, 200);
});
