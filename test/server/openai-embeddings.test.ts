import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { packArchive } from '../../src/archive/pack.js';
import { readModelConfigFile } from '../../src/config/load.js';
import {
  affineModel,
  textClassifierModel,
  textEncoderModel,
  tokenEmbedding,
  writeModel,
} from '../fixtures/onnx-models.js';
import { call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { expectedIds, TEXT_VOCAB, wordPieceTokenizer } from '../fixtures/text-tokenizer.js';
import { samplesOf } from '../metrics/prometheus-text.js';

const DIM = 4;
const MAX_LENGTH = 12;

/** What the handler must answer a text: its tokens' mean of the model's table, at unit length. */
function expectedEmbedding(text: string, dimensions = DIM): number[] {
  const ids = expectedIds(text);
  const mean = Array.from(
    { length: DIM },
    (_, index) => ids.reduce((sum, id) => sum + tokenEmbedding(id, index), 0) / ids.length,
  ).slice(0, dimensions);
  const norm = Math.hypot(...mean);
  return mean.map((value) => value / norm);
}

function assertClose(actual: readonly number[], expected: readonly number[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: length`);
  actual.forEach((value, index) =>
    assert.ok(
      Math.abs(value - (expected[index] as number)) < 1e-6,
      `${what}[${index}]: ${value} vs ${expected[index]}`,
    ),
  );
}

async function packEmbedder(
  dir: string,
  {
    tokenizerText = JSON.stringify(wordPieceTokenizer()),
    textSection = true,
    model = textEncoderModel(TEXT_VOCAB.length, DIM),
  } = {},
): Promise<string> {
  const modelFile = await writeModel(dir, 'encoder.onnx', model);
  const tokenizer = join(dir, 'tokenizer.json');
  await writeFile(tokenizer, tokenizerText);
  const configFile = join(dir, 'model-config.yaml');
  const text = ['text:', '  tokenizer_file: tokenizer.json', `  max_length: ${MAX_LENGTH}`];
  await writeFile(
    configFile,
    ['max_batch_size: 4', 'dynamic_batching:', '  max_queue_delay: 5ms', ...(textSection ? text : []), ''].join('\n'),
  );
  const packed = await packArchive({
    modelName: 'embedder',
    serializedFile: modelFile,
    handler: 'text-embedding',
    configFile,
    extraFiles: [tokenizer],
    exportPath: join(dir, 'store'),
    force: true,
  });
  return packed.path;
}

const TEXTS = ['Hello, world.', 'the cat runs', 'batches', 'Serve the dog, the cat.', 'tokens', 'hello'];

test('a tokenizer-backed text encoder answers the openai client: exact embeddings for texts of mixed lengths batched together, usage, dimensions, models, token metrics', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`embedder=${await packEmbedder(dir)}`, `affine=${await packAffine(dir)}`],
  });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });

  // Six texts over max_batch_size 4: two chunks, texts of 3 to 9 tokens padded together.
  const tokens = TEXTS.reduce((sum, text) => sum + expectedIds(text).length, 0);
  for (const encoding of ['float', 'base64', undefined] as const) {
    const answer = await client.embeddings.create({
      model: 'embedder',
      input: TEXTS,
      ...(encoding ? { encoding_format: encoding } : {}),
    });
    assert.equal(answer.object, 'list');
    assert.equal(answer.model, 'embedder');
    assert.deepEqual(
      answer.data.map((item) => item.index),
      TEXTS.map((_, index) => index),
    );
    answer.data.forEach((item, index) => {
      const embedding =
        typeof item.embedding === 'string'
          ? Array.from(new Float32Array(Uint8Array.from(Buffer.from(item.embedding, 'base64')).buffer))
          : item.embedding;
      assertClose(embedding, expectedEmbedding(TEXTS[index] as string), `${encoding ?? 'default'} ${index}`);
    });
    assert.deepEqual(answer.usage, { prompt_tokens: tokens, total_tokens: tokens });
  }

  const one = await client.embeddings.create({ model: 'embedder', input: 'the cat runs', dimensions: 2 });
  assertClose(one.data[0]?.embedding ?? [], expectedEmbedding('the cat runs', 2), 'dimensions 2');

  const models = await client.models.list();
  assert.deepEqual(models.data.map((model) => model.id).sort(), ['affine', 'embedder']);
  assert.equal((await client.models.retrieve('embedder')).owned_by, 'batchserve');

  // TorchServe's route: a text/plain body is one text; a JSON array, several.
  const plain = await call(`${server.urls.inference}/predictions/embedder`, {
    body: Buffer.from('Hello, world.'),
    headers: { 'content-type': 'text/plain' },
  });
  assert.equal(plain.status, 200, JSON.stringify(plain.body));
  assert.equal(plain.body.tokens, expectedIds('Hello, world.').length);
  assertClose(plain.body.embeddings[0], expectedEmbedding('Hello, world.'), 'predictions');
  const listed = await call(`${server.urls.inference}/predictions/embedder`, {
    body: JSON.stringify(['tokens', 'hello']),
  });
  assert.equal(listed.body.embeddings.length, 2);
  assertClose(listed.body.embeddings[1], expectedEmbedding('hello'), 'predictions, second of two');

  const counted = samplesOf(await scrapeMetrics(server), 'batchserve_tokens_total', {
    model: 'embedder',
    kind: 'prompt',
  })[0]?.value;
  const predicted = [...['Hello, world.', 'tokens', 'hello']].reduce((sum, text) => sum + expectedIds(text).length, 0);
  assert.equal(counted, 3 * tokens + expectedIds('the cat runs').length + predicted);
});

test('bad embeddings requests get 4xx answers in OpenAI’s error shape with a stable code, and the openai client raises them', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`embedder=${await packEmbedder(dir)}`, `affine=${await packAffine(dir)}`],
  });
  const url = `${server.urls.inference}/v1/embeddings`;
  const long = Array.from({ length: MAX_LENGTH }, () => 'cat').join(' ');
  for (const [what, body, status, code, says] of [
    ['not JSON', '{', 400, 'BS_ERR_INFERENCE_INPUT', /not JSON/],
    ['no model', JSON.stringify({ input: 'x' }), 400, 'BS_ERR_INFERENCE_INPUT', /"model"/],
    ['empty input', JSON.stringify({ model: 'embedder', input: [] }), 400, 'BS_ERR_INFERENCE_INPUT', /"input"/],
    [
      'token ids',
      JSON.stringify({ model: 'embedder', input: [[2, 4, 3]] }),
      400,
      'BS_ERR_INFERENCE_INPUT',
      /token ids/,
    ],
    [
      'a format',
      JSON.stringify({ model: 'embedder', input: 'x', encoding_format: 'int8' }),
      400,
      'BS_ERR_INFERENCE_INPUT',
      /encoding_format/,
    ],
    [
      'too many dimensions',
      JSON.stringify({ model: 'embedder', input: 'x', dimensions: 9 }),
      400,
      'BS_ERR_INFERENCE_INPUT',
      /dimensions 9/,
    ],
    [
      'a text too long',
      JSON.stringify({ model: 'embedder', input: ['cat', long] }),
      400,
      'BS_ERR_INFERENCE_INPUT',
      /max_length of 12/,
    ],
    ['an unknown model', JSON.stringify({ model: 'nope', input: 'x' }), 404, 'BS_ERR_MODEL_NOT_FOUND', /nope/],
    [
      'a tensor model',
      JSON.stringify({ model: 'affine', input: 'x' }),
      400,
      'BS_ERR_INFERENCE_INPUT',
      /text-embedding/,
    ],
  ] as const) {
    const answer = await call(url, { body });
    assert.equal(answer.status, status, `${what}: ${JSON.stringify(answer.body)}`);
    assert.equal(answer.body.code, code, what);
    assert.equal(answer.body.error.code, code, what);
    assert.match(answer.body.error.message, says, what);
    assert.equal(answer.body.error.type, status === 404 ? 'not_found_error' : 'invalid_request_error', what);
  }
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  await assert.rejects(
    client.embeddings.create({ model: 'embedder', input: long }),
    (error: unknown) => error instanceof OpenAI.BadRequestError && /max_length/.test(error.message),
  );
  // A refused text fails its own request, not the batch it shared: the others are answered.
  const [refused, served] = await Promise.allSettled([
    client.embeddings.create({ model: 'embedder', input: long }),
    client.embeddings.create({ model: 'embedder', input: 'the cat runs' }),
  ]);
  assert.equal(refused.status, 'rejected');
  assert.equal(served.status, 'fulfilled');
  assertClose(served.value.data[0]?.embedding ?? [], expectedEmbedding('the cat runs'), 'beside a refused text');
});

test('pack refuses a text-embedding archive serve could not load: no tokenizer_file, a tokenizer that is not one, a model without input_ids', async (t) => {
  const dir = await tempDir(t);
  for (const [what, options, code, says] of [
    ['no text section', { textSection: false }, 'BS_ERR_USAGE', /needs text\.tokenizer_file/],
    [
      'a tokenizer that is not JSON',
      { tokenizerText: 'vocab' },
      'BS_ERR_HANDLER_INVALID',
      /tokenizer_file is not JSON/,
    ],
    ['a tensor model', { model: affineModel() }, 'BS_ERR_HANDLER_INVALID', /input "x" is not one of input_ids/],
  ] as const) {
    await assert.rejects(
      packEmbedder(dir, options),
      (error: Error & { code?: string }) => error.code === code && says.test(error.message),
      what,
    );
  }
});

test('the text examples’ configs are valid model configs', async () => {
  for (const name of ['text-embedding', 'text-generation']) {
    const config = await readModelConfigFile(join('examples', name, 'model-config.yaml'));
    assert.equal(config.text?.tokenizer_file, 'tokenizer.json', name);
  }
});

test('the text-classifier handler answers each text’s top classes with their labels, exactly, and counts its tokens', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'classifier.onnx', textClassifierModel(TEXT_VOCAB.length, 4));
  const tokenizer = join(dir, 'tokenizer.json');
  await writeFile(tokenizer, JSON.stringify(wordPieceTokenizer()));
  const labels = join(dir, 'labels.txt');
  await writeFile(labels, 'north\nsouth\neast\nwest\n');
  const configFile = join(dir, 'classifier-config.yaml');
  await writeFile(
    configFile,
    'max_batch_size: 4\nlabels_file: labels.txt\ntext:\n  tokenizer_file: tokenizer.json\n  top_k: 2\n  softmax: always\n',
  );
  const packed = await packArchive({
    modelName: 'topic',
    serializedFile: model,
    handler: 'text-classifier',
    configFile,
    extraFiles: [tokenizer, labels],
    exportPath: join(dir, 'store'),
  });
  const server = await startTestServer(t, { models: [`topic=${packed.path}`] });
  const texts = ['the cat runs', 'Hello, world.'];
  const answer = await call(`${server.urls.inference}/predictions/topic`, { body: JSON.stringify(texts) });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  texts.forEach((text, index) => {
    const ids = expectedIds(text);
    const logits = [0, 1, 2, 3].map((c) => ids.reduce((sum, id) => sum + tokenEmbedding(id, c), 0));
    const max = Math.max(...logits);
    const total = logits.reduce((sum, value) => sum + Math.exp(value - max), 0);
    const want = logits
      .map((value, c) => ({ label: ['north', 'south', 'east', 'west'][c], score: Math.exp(value - max) / total }))
      .sort((a, b) => b.score - a.score)
      .slice(0, 2);
    const got = answer.body.classes[index] as { label: string; score: number }[];
    assert.deepEqual(
      got.map((entry) => entry.label),
      want.map((entry) => entry.label),
      text,
    );
    got.forEach((entry, rank) => assert.ok(Math.abs(entry.score - (want[rank]?.score ?? 0)) < 1e-6, text));
  });
  const tokens = texts.reduce((sum, text) => sum + expectedIds(text).length, 0);
  assert.equal(answer.body.tokens, tokens);
  const counted = samplesOf(await scrapeMetrics(server), 'batchserve_tokens_total', { model: 'topic' })[0]?.value;
  assert.equal(counted, tokens);
});
