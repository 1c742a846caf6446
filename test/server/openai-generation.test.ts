import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { packArchive } from '../../src/archive/pack.js';
import { loadTokenizer } from '../../src/handlers/text-tokens.js';
import { affineModel, decoderModel, greedyDecode, writeModel } from '../fixtures/onnx-models.js';
import { call, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { expectedIds, TEXT_VOCAB, wordPieceTokenizer } from '../fixtures/text-tokenizer.js';
import { samplesOf } from '../metrics/prometheus-text.js';

const EOS = 3;
const MAX_NEW = 12;
const TOKENIZER = JSON.stringify(wordPieceTokenizer({ specialTokens: false }));
const { tokenizer } = loadTokenizer(TOKENIZER);

/**
 * What greedy decoding must answer a prompt: the model's definition, decoded by the real
 * tokenizer after the prompt, as vLLM and TGI give it (the prompt and answer decoded together,
 * less the prompt: a word's leading space, a word piece joining the prompt's last word).
 */
function expected(prompt: string, maxTokens: number): { text: string; finish: string; tokens: number } {
  const promptIds = expectedIds(prompt, { specialTokens: false });
  const ids = greedyDecode(promptIds, { vocab: TEXT_VOCAB.length, maxTokens, eos: [EOS] });
  const finish = ids.at(-1) === EOS ? 'stop' : 'length';
  const decode = (tokens: number[]): string => tokenizer.decode(tokens, { skip_special_tokens: true });
  const text = decode([...promptIds, ...ids.filter((id) => id !== EOS)]).slice(decode(promptIds).length);
  return { text, finish, tokens: ids.length };
}

async function packDecoder(
  dir: string,
  {
    active = 3,
    maxNew = MAX_NEW,
    context = 64,
    scheduling = 'iteration',
    waiting = 1024,
    sim = false,
    chatTemplate = undefined as string | undefined,
    cacheBytes = undefined as number | undefined,
  } = {},
): Promise<string> {
  const model = await writeModel(dir, 'decoder.onnx', decoderModel(TEXT_VOCAB.length));
  const tokenizerFile = join(dir, 'tokenizer.json');
  await writeFile(tokenizerFile, TOKENIZER);
  const configFile = join(dir, 'decoder-config.yaml');
  const tokenizerConfig = join(dir, 'tokenizer_config.json');
  if (chatTemplate !== undefined) {
    await writeFile(tokenizerConfig, JSON.stringify({ chat_template: chatTemplate, bos_token: { content: 'cat' } }));
  }
  await writeFile(
    configFile,
    [
      'max_batch_size: 8',
      ...(sim ? ['instances: [{count: 1, device: sim}]', 'simulated_device: {fixed_cost: 5ms, row_cost: 1ms}'] : []),
      'text:',
      '  tokenizer_file: tokenizer.json',
      ...(chatTemplate !== undefined ? ['  chat_template_file: tokenizer_config.json'] : []),
      'generation:',
      `  eos_token_ids: [${EOS}]`,
      `  max_active_sequences: ${active}`,
      `  max_new_tokens: ${maxNew}`,
      `  max_context: ${context}`,
      `  scheduling: ${scheduling}`,
      `  max_waiting: ${waiting}`,
      ...(cacheBytes !== undefined ? [`  kv_cache_bytes: ${cacheBytes}`] : []),
      '',
    ].join('\n'),
  );
  const packed = await packArchive({
    modelName: 'writer',
    serializedFile: model,
    handler: 'text-generation',
    configFile,
    extraFiles: [tokenizerFile, ...(chatTemplate !== undefined ? [tokenizerConfig] : [])],
    exportPath: join(dir, 'store'),
    force: true,
  });
  return packed.path;
}

// The last joins while others decode; at 17 tokens it runs in a step of its own (sharesStep).
const PROMPTS = [
  'hello',
  'the cat',
  'world runs',
  'dog',
  'serve the batches',
  'tokens, tokens.',
  'cat',
  'the dog runs, the cat runs, the dog runs, the cat runs.',
];

test('iteration-level batching answers every sequence exactly as decoding it alone would: completions and chat, whole and streamed, through the openai client', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`writer=${await packDecoder(dir)}`] });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });

  // Eight prompts over three places: sequences of 2 to 12 tokens join and leave between steps.
  const answers = await Promise.all(
    PROMPTS.map((prompt) =>
      client.completions.create({ model: 'writer', prompt, max_tokens: MAX_NEW, temperature: 0 }),
    ),
  );
  answers.forEach((answer, index) => {
    const prompt = PROMPTS[index] as string;
    const want = expected(prompt, MAX_NEW);
    assert.equal(answer.object, 'text_completion');
    assert.equal(answer.choices[0]?.text, want.text, prompt);
    assert.equal(answer.choices[0]?.finish_reason, want.finish, prompt);
    const promptTokens = expectedIds(prompt, { specialTokens: false }).length;
    assert.deepEqual(answer.usage, {
      prompt_tokens: promptTokens,
      completion_tokens: want.tokens,
      total_tokens: promptTokens + want.tokens,
    });
  });
  assert.ok(new Set(answers.map((answer) => answer.choices[0]?.finish_reason)).size === 2, 'both finishes are seen');

  // Streamed: the chunks add up to the same text, then the finish, the usage and [DONE].
  const streams = await Promise.all(
    PROMPTS.slice(0, 4).map(async (prompt) => {
      const stream = await client.completions.create({
        model: 'writer',
        prompt,
        max_tokens: MAX_NEW,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = '';
      let finish: string | null | undefined;
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.text ?? '';
        finish = chunk.choices[0]?.finish_reason ?? finish;
        usage = chunk.usage ?? usage;
      }
      return { prompt, text, finish, usage };
    }),
  );
  for (const { prompt, text, finish, usage } of streams) {
    const want = expected(prompt, MAX_NEW);
    assert.equal(text, want.text, `streamed ${prompt}`);
    assert.equal(finish, want.finish, `streamed ${prompt}`);
    assert.equal(usage?.completion_tokens, want.tokens, `streamed ${prompt}`);
  }

  // Chat: the messages rendered as "role: content" lines, ending "assistant:".
  const chatPrompt = 'user: the cat\nassistant:';
  const chat = await client.chat.completions.create({
    model: 'writer',
    messages: [{ role: 'user', content: 'the cat' }],
    max_tokens: 6,
    temperature: 0,
  });
  assert.equal(chat.object, 'chat.completion');
  assert.equal(chat.choices[0]?.message.role, 'assistant');
  assert.equal(chat.choices[0]?.message.content, expected(chatPrompt, 6).text);
  const chatStream = await client.chat.completions.create({
    model: 'writer',
    messages: [{ role: 'user', content: 'the cat' }],
    max_tokens: 6,
    temperature: 0,
    stream: true,
  });
  const deltas: OpenAI.ChatCompletionChunk[] = [];
  for await (const chunk of chatStream) deltas.push(chunk);
  assert.equal(deltas[0]?.choices[0]?.delta.role, 'assistant');
  assert.equal(deltas.map((chunk) => chunk.choices[0]?.delta.content ?? '').join(''), expected(chatPrompt, 6).text);
  assert.equal(deltas.at(-1)?.choices[0]?.finish_reason, expected(chatPrompt, 6).finish);

  // A stop string ends the text before it, streamed or not.
  const long = expected('hello', MAX_NEW).text;
  const stop = long.slice(long.indexOf(',') - 2, long.indexOf(',') + 1);
  const stopped = await client.completions.create({
    model: 'writer',
    prompt: 'hello',
    max_tokens: MAX_NEW,
    temperature: 0,
    stop,
  });
  assert.equal(stopped.choices[0]?.text, long.slice(0, long.indexOf(stop)));
  assert.equal(stopped.choices[0]?.finish_reason, 'stop');

  // Sampling: a seed gives the same answer again.
  const sampled = () =>
    client.completions.create({ model: 'writer', prompt: 'dog', max_tokens: 8, temperature: 1.5, top_p: 0.9, seed: 7 });
  assert.equal((await sampled()).choices[0]?.text, (await sampled()).choices[0]?.text);

  const families = await scrapeMetrics(server);
  const firstTokens = samplesOf(families, 'batchserve_time_to_first_token_seconds_count', { model: 'writer' })[0];
  assert.equal(firstTokens?.value, PROMPTS.length + 4 + 2 + 1 + 2);
  const completion = samplesOf(families, 'batchserve_tokens_total', { model: 'writer', kind: 'completion' })[0];
  assert.ok((completion?.value ?? 0) > PROMPTS.length);
  assert.equal(samplesOf(families, 'batchserve_active_sequences', { model: 'writer' })[0]?.value, 0);
});

test('a client that goes away frees its place at the next step; bad generation requests get 4xx answers in OpenAI’s shape', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`writer=${await packDecoder(dir, { active: 1, maxNew: 2000, context: 4096 })}`],
  });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  // "hello" never meets the end token: left alone it would hold the one place for 2,000 steps.
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
  const after = await client.completions.create({
    model: 'writer',
    prompt: 'cat',
    max_tokens: MAX_NEW,
    temperature: 0,
  });
  assert.equal(after.choices[0]?.text, expected('cat', MAX_NEW).text);
  const steps = samplesOf(await scrapeMetrics(server), 'batchserve_inter_token_latency_seconds_count', {
    model: 'writer',
  })[0]?.value;
  assert.ok(steps !== undefined && steps < 1000, `the gone sequence stopped early (${steps} tokens after a first)`);

  const url = `${server.urls.inference}/v1/completions`;
  for (const [what, body, status, says] of [
    ['too many tokens', { model: 'writer', prompt: 'hello', max_tokens: 2001 }, 400, /max_new_tokens of 2000/],
    [
      'over the context',
      { model: 'writer', prompt: 'cat '.repeat(3000), max_tokens: 2000 },
      400,
      /max_context of 4096/,
    ],
    ['an empty prompt', { model: 'writer', prompt: '' }, 400, /no tokens/],
    ['no choices', { model: 'writer', prompt: 'hello', n: 0 }, 400, /"n" must be an integer from 1 to 128/],
    [
      'six logprobs',
      { model: 'writer', prompt: 'hello', logprobs: 6 },
      400,
      /"logprobs" must be an integer from 0 to 5/,
    ],
    ['echoed logprobs', { model: 'writer', prompt: 'hello', echo: true, logprobs: 1 }, 400, /"echo" with "logprobs"/],
    ['a presence penalty of 3', { model: 'writer', prompt: 'hello', presence_penalty: 3 }, 400, /"presence_penalty"/],
    ['a frequency penalty', { model: 'writer', prompt: 'hello', frequency_penalty: -2.5 }, 400, /-2 to 2/],
    ['a bias of 101', { model: 'writer', prompt: 'hello', logit_bias: { '5': 101 } }, 400, /"logit_bias"\[5\]/],
    ['a bias on a word', { model: 'writer', prompt: 'hello', logit_bias: { cat: 1 } }, 400, /not a token id/],
    ['best_of', { model: 'writer', prompt: 'hello', best_of: 3 }, 400, /"best_of" is not served/],
    ['suffix', { model: 'writer', prompt: 'hello', suffix: '!' }, 400, /"suffix" is not served/],
    ['a format of yaml', { model: 'writer', prompt: 'hello', response_format: { type: 'yaml' } }, 400, /json_schema/],
    [
      'a schema with "not"',
      {
        model: 'writer',
        prompt: 'hello',
        response_format: {
          type: 'json_schema',
          json_schema: { name: 'x', schema: { type: 'object', properties: { a: { not: { type: 'string' } } } } },
        },
      },
      400,
      /keyword "not" at #\/properties\/a cannot be made a grammar/,
    ],
    ['a hot temperature', { model: 'writer', prompt: 'hello', temperature: 3 }, 400, /"temperature"/],
    ['token ids', { model: 'writer', prompt: [4, 5] }, 400, /token ids are not served/],
    ['five stops', { model: 'writer', prompt: 'hello', stop: ['a', 'b', 'c', 'd', 'e'] }, 400, /"stop"/],
    ['an unknown model', { model: 'nope', prompt: 'hello' }, 404, /nope/],
  ] as const) {
    const answer = await call(url, { body: JSON.stringify(body) });
    assert.equal(answer.status, status, `${what}: ${JSON.stringify(answer.body)}`);
    assert.match(answer.body.error.message, says, what);
    assert.equal(answer.body.error.code, answer.body.code, what);
  }
  const chat = await call(`${server.urls.inference}/v1/chat/completions`, {
    body: JSON.stringify({ model: 'writer', messages: [{ role: 'robot', content: 'hi' }] }),
  });
  assert.equal(chat.status, 400);
  assert.match(chat.body.error.message, /messages\[0\]\.role/);
  for (const [what, fields, says] of [
    ['21 alternatives', { logprobs: true, top_logprobs: 21 }, /"top_logprobs" must be an integer from 0 to 20/],
    ['alternatives without logprobs', { top_logprobs: 2 }, /needs "logprobs": true/],
    ['tools', { tools: [{ type: 'function', function: { name: 'f' } }] }, /"tools" is not served/],
  ] as const) {
    const refused = await call(`${server.urls.inference}/v1/chat/completions`, {
      body: JSON.stringify({ model: 'writer', messages: [{ role: 'user', content: 'hi' }], ...fields }),
    });
    assert.equal(refused.status, 400, what);
    assert.match(refused.body.error.message, says, what);
    assert.equal(refused.body.error.type, 'invalid_request_error', what);
  }
});

test('whole-request scheduling (the baseline) answers the same, one batch of sequences at a time', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`writer=${await packDecoder(dir, { scheduling: 'request' })}`] });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const answers = await Promise.all(
    PROMPTS.map((prompt) =>
      client.completions.create({ model: 'writer', prompt, max_tokens: MAX_NEW, temperature: 0 }),
    ),
  );
  answers.forEach((answer, index) =>
    assert.equal(answer.choices[0]?.text, expected(PROMPTS[index] as string, MAX_NEW).text),
  );
});

test('a full wait list refuses with 503 BS_ERR_QUEUE_FULL in OpenAI’s shape', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    // On the simulated device each of the first answer's 50 steps takes 6 ms: the three
    // requests all arrive while it runs, however busy the machine.
    models: [`writer=${await packDecoder(dir, { active: 1, waiting: 1, maxNew: 2000, context: 4096, sim: true })}`],
  });
  const body = JSON.stringify({ model: 'writer', prompt: 'hello', max_tokens: 50, temperature: 0 });
  const url = `${server.urls.inference}/v1/completions`;
  const answers = await Promise.all([call(url, { body }), call(url, { body }), call(url, { body })]);
  const statuses = answers.map((answer) => answer.status).sort();
  assert.deepEqual(statuses, [200, 200, 503]);
  const refused = answers.find((answer) => answer.status === 503);
  assert.equal(refused?.body.error.code, 'BS_ERR_QUEUE_FULL');
  assert.equal(refused?.body.error.type, 'api_error');
});

test('pack refuses a text-generation archive whose model has no cache to feed', async (t) => {
  const dir = await tempDir(t);
  const tokenizerFile = join(dir, 'tokenizer.json');
  await writeFile(tokenizerFile, TOKENIZER);
  const configFile = join(dir, 'config.yaml');
  await writeFile(configFile, 'max_batch_size: 8\ntext:\n  tokenizer_file: tokenizer.json\n');
  await assert.rejects(
    packArchive({
      modelName: 'affine',
      serializedFile: await writeModel(dir, 'affine.onnx', affineModel()),
      handler: 'text-generation',
      configFile,
      extraFiles: [tokenizerFile],
      exportPath: join(dir, 'store'),
    }),
    (error: Error & { code?: string }) =>
      error.code === 'BS_ERR_HANDLER_INVALID' &&
      /past_key_values/.test(error.message) &&
      /cannot feed input "x"/.test(error.message),
  );
});

test('on the simulated device a decoder answers the same, each step held to fixed_cost + tokens × row_cost', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`writer=${await packDecoder(dir, { sim: true })}`] });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const started = performance.now();
  const answer = await client.completions.create({ model: 'writer', prompt: 'hello', max_tokens: 8, temperature: 0 });
  const elapsedMs = performance.now() - started;
  assert.equal(answer.choices[0]?.text, expected('hello', 8).text);
  // Eight steps of one token each: 5 + 1 ms apiece, where the real decoder takes microseconds.
  // A lower bound, which a busy machine only lengthens.
  assert.ok(elapsedMs >= 8 * 6, `${elapsedMs} ms for 8 steps`);
  const families = await scrapeMetrics(server);
  const between = samplesOf(families, 'batchserve_inter_token_latency_seconds_count', { model: 'writer' })[0];
  assert.equal(between?.value, 7);
});

test("chat runs the model's own Jinja template from tokenizer_config.json, and a template's raise_exception is a 400", async (t) => {
  const dir = await tempDir(t);
  const template =
    "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system messages') }}{% endif %}" +
    '{{ m.content }} {% endfor %}{% if add_generation_prompt %}{{ bos_token }}{% endif %}';
  const server = await startTestServer(t, {
    models: [`writer=${await packDecoder(dir, { chatTemplate: template })}`],
  });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const chat = await client.chat.completions.create({
    model: 'writer',
    messages: [{ role: 'user', content: 'the dog' }],
    max_tokens: 6,
    temperature: 0,
  });
  // "the dog " then the template's bos_token: the prompt is "the dog cat".
  assert.equal(chat.choices[0]?.message.content, expected('the dog cat', 6).text);
  assert.equal(chat.usage?.prompt_tokens, 3);
  const refused = await call(`${server.urls.inference}/v1/chat/completions`, {
    body: JSON.stringify({ model: 'writer', messages: [{ role: 'system', content: 'be brief' }] }),
  });
  assert.equal(refused.status, 400);
  assert.match(refused.body.error.message, /no system messages/);
});

test('a request that names no max_tokens takes what the context leaves, not more', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`writer=${await packDecoder(dir, { context: 10 })}`] });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const chat = await client.chat.completions.create({
    model: 'writer',
    messages: [{ role: 'user', content: 'hello' }],
    temperature: 0,
  });
  // The context of 10 less the prompt's tokens, under max_new_tokens (12).
  const prompt = 'user: hello\nassistant:';
  const room = 10 - expectedIds(prompt, { specialTokens: false }).length;
  assert.ok(room > 0 && room < MAX_NEW);
  assert.equal(chat.choices[0]?.message.content, expected(prompt, room).text);
  assert.equal(chat.usage?.completion_tokens, expected(prompt, room).tokens);
});

test('generation.kv_cache_bytes: a request whose cache could never fit is a 400 naming it, the cache in use and reserved is exported', async (t) => {
  const dir = await tempDir(t);
  // The generated decoder's cache: 1 layer, 1 head of 4, a key and a value: 32 bytes a token.
  const server = await startTestServer(t, { models: [`writer=${await packDecoder(dir, { cacheBytes: 10 * 32 })}`] });
  const url = `${server.urls.inference}/v1/completions`;
  const tooBig = await call(url, { body: JSON.stringify({ model: 'writer', prompt: 'hello world', max_tokens: 9 }) });
  assert.equal(tooBig.status, 400);
  assert.match(
    tooBig.body.error.message,
    /11 tokens, 352 bytes of key\/value cache, over generation.kv_cache_bytes 320/,
  );
  assert.equal(tooBig.body.code, 'BS_ERR_INFERENCE_INPUT');

  // Each fits alone (up to 2 prompt tokens and 8 new): the three run one after another.
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const answers = await Promise.all(
    ['hello', 'the cat', 'dog'].map((prompt) =>
      client.completions.create({ model: 'writer', prompt, max_tokens: 8, temperature: 0 }),
    ),
  );
  answers.forEach((answer, index) =>
    assert.equal(answer.choices[0]?.text, expected(['hello', 'the cat', 'dog'][index] as string, 8).text),
  );
  const metrics = await scrapeMetrics(server);
  for (const state of ['used', 'reserved']) {
    const sample = samplesOf(metrics, 'batchserve_kv_cache_bytes', { model: 'writer', state })[0];
    assert.equal(sample?.value, 0, `${state}: nothing is held once every answer is sent`);
  }
});

/** What greedy decoding answers with OpenAI's penalties and biases applied before each token, and each token's log-softmax. */
function adjusted(
  prompt: string,
  maxTokens: number,
  {
    presence = 0,
    frequency = 0,
    bias = {},
  }: { presence?: number; frequency?: number; bias?: Record<number, number> } = {},
): { text: string; ids: number[]; logprobs: number[] } {
  const promptIds = expectedIds(prompt, { specialTokens: false });
  const logprobs: number[] = [];
  const ids = greedyDecode(promptIds, {
    vocab: TEXT_VOCAB.length,
    maxTokens,
    eos: [EOS],
    adjust(logits, generated) {
      for (const [id, value] of Object.entries(bias)) logits[Number(id)] = (logits[Number(id)] as number) + value;
      const counts = new Map<number, number>();
      for (const id of generated) counts.set(id, (counts.get(id) ?? 0) + 1);
      for (const [id, count] of counts) logits[id] = (logits[id] as number) - presence - frequency * count;
      const max = Math.max(...logits);
      const normalizer = max + Math.log(logits.reduce((sum, value) => sum + Math.exp(value - max), 0));
      logprobs.push(max - normalizer);
    },
  });
  const decode = (tokens: number[]): string => tokenizer.decode(tokens, { skip_special_tokens: true });
  const text = decode([...promptIds, ...ids.filter((id) => id !== EOS)]).slice(decode(promptIds).length);
  return { text, ids, logprobs: logprobs.slice(0, ids.filter((id) => id !== EOS).length) };
}

test('sampling controls through the openai client: n, logprobs and top_logprobs, penalties, logit_bias and echo; streamed answers agree with whole ones', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`writer=${await packDecoder(dir)}`] });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const prompt = 'the cat';

  // n: each answer draws as a one-answer request of its seed + index would; usage counts them all.
  const three = await client.completions.create({
    model: 'writer',
    prompt,
    max_tokens: 8,
    temperature: 1.5,
    seed: 7,
    n: 3,
  });
  assert.deepEqual(
    three.choices.map((choice) => choice.index),
    [0, 1, 2],
  );
  let completionTokens = 0;
  for (const choice of three.choices) {
    const alone = await client.completions.create({
      model: 'writer',
      prompt,
      max_tokens: 8,
      temperature: 1.5,
      seed: 7 + choice.index,
    });
    assert.equal(choice.text, alone.choices[0]?.text, `choice ${choice.index}`);
    completionTokens += alone.usage?.completion_tokens ?? 0;
  }
  assert.equal(three.usage?.completion_tokens, completionTokens);

  // Penalties and biases change the logits as OpenAI documents, before each greedy pick
  // ("hello" never meets the end token, and repeats itself unpenalized).
  const catId = TEXT_VOCAB.indexOf('cat');
  const firstId = adjusted('hello', 1).ids[0] as number;
  for (const controls of [
    { presence: 2 },
    { frequency: 2 },
    { bias: { [catId]: 100 } },
    { bias: { [firstId]: -100 } },
  ]) {
    const want = adjusted('hello', MAX_NEW, controls);
    const answer = await client.completions.create({
      model: 'writer',
      prompt: 'hello',
      max_tokens: MAX_NEW,
      temperature: 0,
      ...(controls.presence !== undefined ? { presence_penalty: controls.presence } : {}),
      ...(controls.frequency !== undefined ? { frequency_penalty: controls.frequency } : {}),
      ...(controls.bias !== undefined ? { logit_bias: controls.bias } : {}),
    });
    assert.equal(answer.choices[0]?.text, want.text, JSON.stringify(controls));
  }
  // The references differ from the plain answer: the answers above could not match it by chance.
  for (const controls of [{ frequency: 2 }, { bias: { [firstId]: -100 } }]) {
    assert.notEqual(adjusted('hello', MAX_NEW, controls).text, expected('hello', MAX_NEW).text);
  }
  assert.match(adjusted('hello', 3, { bias: { [catId]: 100 } }).text, /^( ?cat){3}$/);

  // logprobs: each token's log-softmax, its string and offset; the greedy token leads its alternatives.
  const want = adjusted(prompt, MAX_NEW);
  const whole = await client.completions.create({
    model: 'writer',
    prompt,
    max_tokens: MAX_NEW,
    temperature: 0,
    logprobs: 3,
    n: 2,
  });
  const logprobs = whole.choices[1]?.logprobs;
  assert.ok(logprobs?.tokens && logprobs.token_logprobs && logprobs.top_logprobs && logprobs.text_offset);
  assert.equal(logprobs.tokens.length, want.logprobs.length);
  logprobs.token_logprobs.forEach((value, index) => {
    assert.ok(Math.abs(value - (want.logprobs[index] as number)) < 1e-4, `${value} vs ${want.logprobs[index]}`);
    const top = logprobs.top_logprobs?.[index] as Record<string, number>;
    assert.equal(Object.keys(top).length, 3);
    assert.equal(Math.max(...Object.values(top)), value);
  });
  assert.deepEqual(
    logprobs.text_offset,
    logprobs.tokens.map((_, index) => logprobs.tokens!.slice(0, index).join('').length),
  );
  assert.deepEqual(whole.choices[0]?.logprobs, logprobs, 'greedy answers are the same answer');

  // Streamed: the same tokens and log probabilities, chunk by chunk, for each choice.
  const stream = await client.completions.create({
    model: 'writer',
    prompt,
    max_tokens: MAX_NEW,
    temperature: 0,
    logprobs: 3,
    n: 2,
    stream: true,
  });
  const streamed = [0, 1].map(() => ({
    text: '',
    tokens: [] as string[],
    values: [] as number[],
    offsets: [] as number[],
    top: [] as unknown[],
    finish: '',
  }));
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      const into = streamed[choice.index] as (typeof streamed)[number];
      into.text += choice.text;
      into.tokens.push(...(choice.logprobs?.tokens ?? []));
      into.values.push(...(choice.logprobs?.token_logprobs ?? []));
      into.offsets.push(...(choice.logprobs?.text_offset ?? []));
      into.top.push(...(choice.logprobs?.top_logprobs ?? []));
      into.finish = choice.finish_reason ?? into.finish;
    }
  }
  for (const [index, into] of streamed.entries()) {
    const choice = whole.choices[index];
    assert.equal(into.text, choice?.text);
    assert.equal(into.finish, choice?.finish_reason);
    assert.deepEqual(
      { tokens: into.tokens, token_logprobs: into.values, top_logprobs: into.top, text_offset: into.offsets },
      choice?.logprobs,
    );
  }

  // Chat: content entries with each token's bytes and its alternatives; streamed, the same entries.
  const messages = [{ role: 'user' as const, content: 'the cat' }];
  const chat = await client.chat.completions.create({
    model: 'writer',
    messages,
    max_tokens: 6,
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
  });
  const content = chat.choices[0]?.logprobs?.content ?? [];
  assert.equal(content.length, adjusted('user: the cat\nassistant:', 6).logprobs.length);
  for (const entry of content) {
    assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
    assert.equal(entry.top_logprobs.length, 2);
    assert.equal(entry.top_logprobs[0]?.logprob, entry.logprob);
  }
  const chatStream = await client.chat.completions.create({
    model: 'writer',
    messages,
    max_tokens: 6,
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
    stream: true,
  });
  const entries: unknown[] = [];
  for await (const chunk of chatStream) entries.push(...(chunk.choices[0]?.logprobs?.content ?? []));
  assert.deepEqual(entries, content);

  // echo: the prompt before the answer, whole and streamed.
  const echoed = await client.completions.create({
    model: 'writer',
    prompt,
    max_tokens: 4,
    temperature: 0,
    echo: true,
  });
  assert.equal(echoed.choices[0]?.text, prompt + expected(prompt, 4).text);
  let echoStream = '';
  const echoChunks = await client.completions.create({
    model: 'writer',
    prompt,
    max_tokens: 4,
    temperature: 0,
    echo: true,
    stream: true,
  });
  for await (const chunk of echoChunks) echoStream += chunk.choices[0]?.text ?? '';
  assert.equal(echoStream, echoed.choices[0]?.text);
});
