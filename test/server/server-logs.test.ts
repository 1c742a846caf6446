import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import OpenAI from 'openai';
import { pino } from 'pino';
import { packArchive } from '../../src/archive/pack.js';
import { decoderModel, writeModel } from '../fixtures/onnx-models.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { TEXT_VOCAB, wordPieceTokenizer } from '../fixtures/text-tokenizer.js';

interface LogLine {
  level: number;
  msg: string;
  model?: string;
  version?: string;
  path?: string;
}

/** A debug-level logger whose lines land in `lines`, parsed. */
function capturedLogger(lines: LogLine[]): pino.Logger {
  return pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString('utf8')) as LogLine);
        done();
      },
    }),
  );
}

const ERROR = 50;
const INFO = 30;

/** A text-generation archive that, left alone, writes 2,000 tokens: long enough to be cut. */
async function packWriter(dir: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const model = await writeModel(dir, 'decoder.onnx', decoderModel(TEXT_VOCAB.length));
  const tokenizerFile = join(dir, 'tokenizer.json');
  await writeFile(tokenizerFile, JSON.stringify(wordPieceTokenizer({ specialTokens: false })));
  const configFile = join(dir, 'writer-config.yaml');
  await writeFile(
    configFile,
    'max_batch_size: 4\ntext: { tokenizer_file: tokenizer.json }\n' +
      'generation: { eos_token_ids: [3], max_new_tokens: 2000, max_context: 4096 }\n',
  );
  const packed = await packArchive({
    modelName: 'writer',
    serializedFile: model,
    handler: 'text-generation',
    configFile,
    extraFiles: [tokenizerFile],
    exportPath: join(dir, 'store'),
    force: true,
  });
  return packed.path;
}

/** Sends a request's headers and part of its body on a raw socket, then cuts the connection. */
async function abortMidBody(url: string, path: string): Promise<void> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  await new Promise((ready) => socket.once('connect', ready));
  socket.write(
    `POST ${path} HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"inputs":`,
  );
  // Until the server has the headers and is reading the body.
  await new Promise((wait) => setTimeout(wait, 100));
  const closed = new Promise((done) => socket.once('close', done));
  socket.destroy();
  await closed;
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let tries = 0; !condition(); tries++) {
    assert.ok(tries < 500, `waited too long for ${what}`);
    await new Promise((wait) => setTimeout(wait, 10));
  }
}

test('a client that goes away (an aborted upload, a cancelled generation) is logged at debug, never as a server error', async (t) => {
  const dir = await tempDir(t);
  const lines: LogLine[] = [];
  const server = await startTestServer(
    t,
    { models: [`affine=${await packAffine(dir)}`, `writer=${await packWriter(join(dir, 'writer'))}`] },
    capturedLogger(lines),
  );
  await abortMidBody(server.urls.inference, '/v2/models/affine/infer');
  await abortMidBody(server.urls.inference, '/v1/completions');

  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const controller = new AbortController();
  const stream = await client.completions.create(
    { model: 'writer', prompt: 'hello', max_tokens: 2000, temperature: 0, stream: true },
    { signal: controller.signal },
  );
  for await (const chunk of stream) {
    assert.ok(chunk.choices[0]?.text);
    controller.abort();
    break;
  }
  await until(() => lines.filter((line) => line.msg === 'client went away').length >= 2, 'the two aborted uploads');
  // The server still answers, and the cancelled stream's request has finished by the next one's end.
  const answer = await call(`${server.urls.inference}/v1/completions`, {
    body: JSON.stringify({ model: 'writer', prompt: 'cat', max_tokens: 4 }),
  });
  assert.equal(answer.status, 200);
  const errors = lines.filter((line) => line.level >= ERROR);
  assert.deepEqual(errors, [], 'nothing logged as an error');
});

test('models loaded and unloaded while serving are logged at info', async (t) => {
  const dir = await tempDir(t);
  const lines: LogLine[] = [];
  await packAffine(dir, { name: 'second' });
  const server = await startTestServer(
    t,
    { models: [`affine=${await packAffine(dir)}`], model_store: join(dir, 'store') },
    capturedLogger(lines),
  );
  const auth = { authorization: 'Bearer test-token' };
  const at = (message: string, model: string): LogLine[] =>
    lines.filter((line) => line.msg === message && line.model === model);
  assert.equal(at('model loaded', 'affine').length, 1, 'at start, once');

  const base = server.urls.management;
  assert.equal((await call(`${base}/models?url=second.mar`, { method: 'POST', headers: auth })).status, 200);
  assert.deepEqual(
    at('model loaded', 'second').map(({ level, version }) => ({ level, version })),
    [{ level: INFO, version: '1' }],
  );
  assert.equal((await call(`${base}/models/second`, { method: 'DELETE', headers: auth })).status, 200);
  // The v2 repository extension's unload goes the same way.
  const unload = await call(`${server.urls.inference}/v2/repository/models/affine/unload`, {
    method: 'POST',
    headers: auth,
  });
  assert.equal(unload.status, 200);
  for (const model of ['second', 'affine']) {
    assert.deepEqual(
      at('model unloaded', model).map(({ level, version }) => ({ level, version })),
      [{ level: INFO, version: '1' }],
      model,
    );
  }
});
