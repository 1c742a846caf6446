import assert from 'node:assert/strict';
import { test } from 'node:test';
import { packOrientation, textLine } from '../predict/fixtures.js';
import { call, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const BOUNDARY = 'batchserve-test-boundary';

type TestServer = Awaited<ReturnType<typeof startTestServer>>;

/** A multipart body written by hand, so a part can carry raw bytes without a filename. */
function multipart(parts: { name: string; data: Buffer; headers?: string }[]): Buffer {
  return Buffer.concat([
    ...parts.flatMap(({ name, data, headers = '' }) => [
      Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="${name}"\r\n${headers}\r\n`),
      data,
      Buffer.from('\r\n'),
    ]),
    Buffer.from(`--${BOUNDARY}--\r\n`),
  ]);
}

async function rawPrediction(server: TestServer, image: Buffer): Promise<unknown> {
  const answer = await call(`${server.urls.inference}/predictions/orientation`, {
    body: image,
    headers: { 'content-type': 'image/png' },
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body;
}

test('TorchServe uploads: curl -F data=@file (multipart) and -d data=… (urlencoded) answer as the raw body does; several data fields are several requests', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`orientation=${await packOrientation(dir)}`] });
  const upright = textLine(1);
  const flipped = textLine(2, true);
  const expectedUpright = await rawPrediction(server, upright);
  const expectedFlipped = await rawPrediction(server, flipped);
  assert.notDeepEqual(expectedUpright, expectedFlipped, 'the two images get different answers');
  const url = `${server.urls.inference}/predictions/orientation`;

  // What curl -F data=@kitten.jpg sends, from undici's own FormData encoder.
  const form = new FormData();
  form.append('data', new Blob([new Uint8Array(upright)], { type: 'image/png' }), 'upright.png');
  const one = await fetch(url, { method: 'POST', body: form });
  assert.equal(one.status, 200);
  assert.deepEqual(await one.json(), expectedUpright);

  const two = new FormData();
  two.append('data', new Blob([new Uint8Array(upright)], { type: 'image/png' }), 'a.png');
  two.append('data', new Blob([new Uint8Array(flipped)], { type: 'image/png' }), 'b.png');
  const both = await fetch(url, { method: 'POST', body: two });
  assert.equal(both.status, 200);
  assert.deepEqual(await both.json(), [expectedUpright, expectedFlipped]);

  // A part without a filename or a type keeps its bytes exactly (WHATWG FormData would make text of it).
  const bare = await call(url, {
    body: multipart([{ name: 'body', data: flipped }]),
    headers: { 'content-type': `multipart/form-data; boundary="${BOUNDARY}"` },
  });
  assert.equal(bare.status, 200, JSON.stringify(bare.body));
  assert.deepEqual(bare.body, expectedFlipped);

  const encoded = await call(url, {
    body: `data=${[...upright].map((byte) => `%${byte.toString(16).padStart(2, '0')}`).join('')}`,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  assert.equal(encoded.status, 200, JSON.stringify(encoded.body));
  assert.deepEqual(encoded.body, expectedUpright);
});

test('a form upload the server cannot read is a 400 saying why, and the server goes on serving', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`orientation=${await packOrientation(dir)}`] });
  const url = `${server.urls.inference}/predictions/orientation`;
  const image = textLine(3);
  const withBoundary = { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` };
  const cases: { body: Buffer; headers: Record<string, string>; error: RegExp }[] = [
    {
      body: multipart([
        { name: 'data', data: image },
        { name: 'image', data: image },
      ]),
      headers: withBoundary,
      error: /form field "image" not read: each request is a field named "data" or "body"/,
    },
    { body: multipart([]), headers: withBoundary, error: /no "data" or "body" field/ },
    {
      body: multipart([{ name: 'data', data: Buffer.alloc(0) }]),
      headers: withBoundary,
      error: /field 1 \("data"\) is empty/,
    },
    {
      body: multipart([{ name: 'data', data: image }]),
      headers: { 'content-type': 'multipart/form-data' },
      error: /without a boundary/,
    },
    { body: multipart([{ name: 'data', data: image }]).subarray(0, 200), headers: withBoundary, error: /truncated/ },
    // Not a form at all (no boundary line): the raw input, which this model cannot read.
    { body: Buffer.from('no boundary here'), headers: withBoundary, error: /not a PNG or JPEG/ },
    {
      body: multipart([{ name: 'data', data: Buffer.from('not an image') }]),
      headers: withBoundary,
      error: /not a PNG or JPEG/,
    },
    {
      body: Buffer.from(Array.from({ length: 300 }, () => 'data=x').join('&')),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      error: /the form has 300 fields; at most 256/,
    },
  ];
  for (const { body, headers, error } of cases) {
    const answer = await call(url, { body, headers });
    assert.equal(answer.status, 400, `${error}: ${JSON.stringify(answer.body)}`);
    const { code, error: message } = answer.body as { code: string; error: string };
    assert.equal(code, 'BS_ERR_INFERENCE_INPUT');
    assert.match(message, error);
  }
  assert.ok((await rawPrediction(server, image)) !== undefined);
});

test("TorchServe users' curl lines: -T (a PUT) and --data-binary (raw bytes labelled as a form) answer as the raw body does; an error quotes at most a short printable prefix of the input", async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`orientation=${await packOrientation(dir)}`] });
  const url = `${server.urls.inference}/predictions/orientation`;
  const image = textLine(4);
  const expected = await rawPrediction(server, image);

  // curl http://127.0.0.1:8080/predictions/orientation -T line.png: a PUT with no Content-Type.
  const put = await call(url, { method: 'PUT', body: image });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.deepEqual(put.body, expected);

  // curl --data-binary @line.png labels the bytes application/x-www-form-urlencoded; so does
  // a form-typed body with no form in it (text, JSON), and a multipart one with no boundary line.
  for (const contentType of ['application/x-www-form-urlencoded', `multipart/form-data; boundary=${BOUNDARY}`]) {
    const labelled = await call(url, { body: image, headers: { 'content-type': contentType } });
    assert.equal(labelled.status, 200, `${contentType}: ${JSON.stringify(labelled.body)}`);
    assert.deepEqual(labelled.body, expected, contentType);
  }

  // A form whose field is named with binary bytes: refused, naming a printable prefix of it.
  const binaryName = Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x1a, 0x00, 0x00, 0x7f]),
    Buffer.alloc(200, 0xff),
  ]);
  const named = await call(url, {
    body: Buffer.concat([
      Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="`),
      binaryName,
      Buffer.from(`"\r\n\r\n`),
      image,
      Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
    ]),
    headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` },
  });
  assert.equal(named.status, 400);
  const message = (named.body as { error: string }).error;
  assert.match(message, /^form field "\\u\{fffd\}PNG\\x1a\\x00\\x00\\x7f/, 'escaped');
  assert.match(message, /^[\x20-\x7e…]*$/, 'printable ASCII only (and the ellipsis)');
  assert.ok(message.length < 120, `${message.length} characters: ${message}`);
});
