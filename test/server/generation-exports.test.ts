import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Ajv } from 'ajv';
import OpenAI from 'openai';
import { packArchive } from '../../src/archive/pack.js';
import { loadTokenizer, type TextTokenizer } from '../../src/handlers/text-tokens.js';
import { call, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { samplesOf } from '../metrics/prometheus-text.js';
import { tempDir } from '../fixtures/temp.js';
import {
  DECODER_FIXTURES,
  readDecoderAnswers,
  readEncoderAnswers,
  torchTextFiles,
  type DecoderAnswers,
  type DecoderFixture,
  type DecoderPrompt,
  type TorchTextFixture,
} from '../fixtures/torch-text.js';

/** Fewer places than prompts: in a burst some wait and join sequences already decoding. */
const ACTIVE = 3;
const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

/** A fixture packed with its tokenizer and a config of `lines` and a `text` section naming it; the archive's path. */
async function packFixture(
  dir: string,
  name: TorchTextFixture,
  handler: 'text-generation' | 'text-embedding',
  { lines = [], text = [], archiveFormat }: { lines?: string[]; text?: string[]; archiveFormat?: 'dir' },
): Promise<string> {
  const files = torchTextFiles(name);
  const configFile = join(dir, 'model-config.yaml');
  await writeFile(configFile, [...lines, 'text:', '  tokenizer_file: tokenizer.json', ...text, ''].join('\n'));
  const packed = await packArchive({
    modelName: name,
    serializedFile: files.model,
    handler,
    configFile,
    extraFiles: [files.tokenizer],
    exportPath: join(dir, 'store'),
    ...(archiveFormat ? { archiveFormat } : {}),
    force: true,
  });
  return packed.path;
}

function packDecoder(dir: string, name: DecoderFixture, answers: DecoderAnswers): Promise<string> {
  // No max_batch_size: generation batches by max_active_sequences, and a merged export's
  // use_cache_branch [1] has no batch dimension, which the default (0 then) allows.
  return packFixture(dir, name, 'text-generation', {
    lines: [
      'generation:',
      `  eos_token_ids: [${answers.eos_token_id}]`,
      `  max_active_sequences: ${ACTIVE}`,
      `  max_new_tokens: ${answers.max_new_tokens}`,
      `  max_context: ${answers.position_limit ?? 2048}`,
    ],
  });
}

interface Completion {
  readonly prompt: string;
  readonly text: string | undefined;
  readonly finish_reason: string | undefined;
  readonly prompt_tokens: number | undefined;
  readonly completion_tokens: number | undefined;
}

/**
 * What vLLM and TGI answer for torch's greedy ids: the text the new ids add to the prompt's,
 * decode(prompt + new) less decode(prompt), so a SentencePiece answer keeps the space its first
 * word piece carries; eos counts as a completion token but adds no text.
 */
function expected(tokenizer: TextTokenizer, answers: DecoderAnswers, prompt: DecoderPrompt): Completion {
  const stopped = prompt.greedy.at(-1) === answers.eos_token_id;
  const newIds = stopped ? prompt.greedy.slice(0, -1) : prompt.greedy;
  const before = tokenizer.decode(prompt.ids, { skip_special_tokens: true });
  const after = tokenizer.decode([...prompt.ids, ...newIds], { skip_special_tokens: true });
  assert.ok(after.startsWith(before), `${prompt.text}: the answer's ids decode onto the prompt's text`);
  return {
    prompt: prompt.text,
    text: after.slice(before.length),
    finish_reason: stopped ? 'stop' : 'length',
    prompt_tokens: prompt.ids.length,
    completion_tokens: prompt.greedy.length,
  };
}

for (const name of DECODER_FIXTURES) {
  test(`${name}: greedy completions equal torch's, each prompt alone and all of them at once`, async (t) => {
    const answers = await readDecoderAnswers(name);
    assert.ok(answers.prompts.length > ACTIVE);
    const { tokenizer } = loadTokenizer(await readFile(torchTextFiles(name).tokenizer, 'utf8'), 'text-generation');
    const want = answers.prompts.map((prompt) => expected(tokenizer, answers, prompt));
    const dir = await tempDir(t);
    const archive = await packDecoder(dir, name, answers);

    // Left padding shifts a model's positions when it numbers them by the cache's width.
    const { stdout } = await promisify(execFile)(process.execPath, [
      BIN,
      'model-archive',
      'inspect',
      '--json',
      archive,
    ]);
    const { generation } = JSON.parse(stdout) as { generation: { batching: string; cacheBytesPerToken: number } };
    assert.equal(generation.batching, name === 'decoder-gpt2-nopos' ? 'equal-length' : 'padded', 'inspect says');

    const server = await startTestServer(t, { models: [`${name}=${archive}`] });
    const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
    const complete = async (prompt: DecoderPrompt): Promise<Completion> => {
      const answer = await client.completions.create({
        model: name,
        prompt: prompt.text,
        max_tokens: answers.max_new_tokens,
        temperature: 0,
      });
      return {
        prompt: prompt.text,
        text: answer.choices[0]?.text,
        finish_reason: answer.choices[0]?.finish_reason,
        prompt_tokens: answer.usage?.prompt_tokens,
        completion_tokens: answer.usage?.completion_tokens,
      };
    };

    await t.test('each prompt alone, one after another', async () => {
      const got: Completion[] = [];
      for (const prompt of answers.prompts) got.push(await complete(prompt));
      assert.deepEqual(got, want);
    });

    // Prompts of 2 to 20 tokens over three places: rows of different cache lengths share steps,
    // padded on the left, and sequences leave and join between them.
    await t.test(`all ${answers.prompts.length} prompts at once over ${ACTIVE} places`, async () => {
      assert.deepEqual(await Promise.all(answers.prompts.map(complete)), want);
    });

    // The second time round, a prompt of more than one block starts from its cached prefix
    // (padded batching only: an equal-length batch's rows cannot start from prefixes).
    const hits = samplesOf(await scrapeMetrics(server), 'batchserve_prefix_cache_hits_total', { model: name })[0];
    const long = answers.prompts.filter((prompt) => prompt.ids.length > 16).length;
    if (name === 'decoder-gpt2-nopos') assert.equal(hits?.value ?? 0, 0);
    else assert.equal(hits?.value, long, `${long} prompts are longer than a block`);

    // Byte-level BPE: an answer bound to a schema parses and validates whatever the random weights say.
    if (name === 'decoder-gpt2') {
      await t.test('response_format: json_schema answers, sampled, streamed or whole, parse and validate', async () => {
        // Nine bytes at most: within max_new_tokens (16) however the weights split it.
        const schema = {
          type: 'object',
          properties: { s: { enum: ['a', 'b'] } },
          required: ['s'],
          additionalProperties: false,
        };
        const validate = new Ajv().compile(schema);
        const request = {
          model: name,
          messages: [{ role: 'user' as const, content: answers.prompts[0]?.text ?? '' }],
          max_tokens: 16,
          temperature: 1,
          seed: 3,
          n: 3,
          response_format: { type: 'json_schema' as const, json_schema: { name: 'item', schema, strict: true } },
        };
        const whole = await client.chat.completions.create(request);
        assert.equal(whole.choices.length, 3);
        for (const choice of whole.choices) {
          const text = choice.message.content ?? '';
          assert.ok(validate(JSON.parse(text)), `${text}: ${JSON.stringify(validate.errors)}`);
        }
        const texts = ['', '', ''];
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
          for (const choice of chunk.choices) texts[choice.index] += choice.delta.content ?? '';
        }
        assert.deepEqual(
          texts,
          whole.choices.map((choice) => choice.message.content),
        );
        const object = await client.completions.create({
          model: name,
          prompt: answers.prompts[1]?.text ?? '',
          max_tokens: 16,
          temperature: 0,
          response_format: { type: 'json_object' },
        } as OpenAI.CompletionCreateParamsNonStreaming);
        // Any object may run past 16 tokens: cut there, it is still an object's beginning.
        const text = object.choices[0]?.text ?? '';
        assert.match(text, /^\{/);
        if (object.choices[0]?.finish_reason === 'stop') assert.equal(typeof JSON.parse(text), 'object');
      });
    }
  });
}

test("encoder-bert: /v1/embeddings equals torch's mean-pooled embeddings within 1e-4, alone and padded into batches", async (t) => {
  const answers = await readEncoderAnswers();
  const dir = await tempDir(t);
  const archive = await packFixture(dir, 'encoder-bert', 'text-embedding', {
    lines: ['max_batch_size: 8', 'dynamic_batching:', '  max_queue_delay: 5ms'],
    text: [`  max_length: ${answers.position_limit}`],
  });
  const server = await startTestServer(t, { models: [`encoder-bert=${archive}`] });
  const client = new OpenAI({ baseURL: `${server.urls.inference}/v1`, apiKey: 'unused', maxRetries: 0 });
  const assertClose = (actual: readonly number[] | undefined, want: readonly number[], what: string): void => {
    assert.equal(actual?.length, want.length, what);
    const worst = Math.max(...want.map((value, index) => Math.abs((actual?.[index] ?? NaN) - value)));
    assert.ok(worst < 1e-4, `${what}: off by ${worst}`);
  };

  const together = await client.embeddings.create({
    model: 'encoder-bert',
    input: answers.texts.map((item) => item.text),
  });
  const tokens = answers.texts.reduce((sum, item) => sum + item.ids.length, 0);
  assert.deepEqual(together.usage, { prompt_tokens: tokens, total_tokens: tokens });
  answers.texts.forEach((item, index) => assertClose(together.data[index]?.embedding, item.embedding, item.text));

  const alone = await Promise.all(
    answers.texts.map((item) => client.embeddings.create({ model: 'encoder-bert', input: item.text })),
  );
  alone.forEach((answer, index) => {
    const item = answers.texts[index];
    assert.ok(item);
    assertClose(answer.data[0]?.embedding, item.embedding, `${item.text} alone`);
  });
});

test('decoder-llama holds 128 positions: max_context 2048 is refused at pack naming both numbers; an archive that carries it serves 128, and a prompt with max_tokens past it is a 400 at the door', async (t) => {
  const files = torchTextFiles('decoder-llama');
  const dir = await tempDir(t);
  const packWith = (generation: readonly string[]): Promise<string> =>
    packFixture(dir, 'decoder-llama', 'text-generation', {
      lines: ['generation:', ...generation],
      archiveFormat: 'dir',
    });
  const overTheModel = {
    code: 'BS_ERR_CONFIG_INVALID',
    message: /generation\.max_context 2048 is over the 128 positions this model holds; set it to 128 or less/,
  };
  await assert.rejects(packWith(['  max_context: 2048']), overTheModel);

  // An archive packed before the check (the old default wrote 2048 into every generation
  // section): its config changed and its hash with it. It loads, served with what the model holds.
  const archive = await packWith(['  max_context: 128']);
  const configPath = join(archive, 'model-config.yaml');
  const config = Buffer.from((await readFile(configPath, 'utf8')).replace('max_context: 128', 'max_context: 2048'));
  await writeFile(configPath, config);
  const manifestPath = join(archive, 'MAR-INF', 'MANIFEST.json');
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as {
    files: { path: string; size: number; sha256: string }[];
  };
  for (const entry of manifest.files.filter((file) => file.path === 'model-config.yaml')) {
    entry.size = config.length;
    entry.sha256 = createHash('sha256').update(config).digest('hex');
  }
  await writeFile(manifestPath, JSON.stringify(manifest));
  const server = await startTestServer(t, { models: [`decoder-llama=${archive}`] });
  const { tokenizer } = loadTokenizer(await readFile(files.tokenizer, 'utf8'), 'text-generation');
  const prompt = 'the cat sat on the mat and the dog ran in the park. '.repeat(4);
  const promptTokens = tokenizer.encode(prompt).ids.length;
  assert.ok(promptTokens > 40 && promptTokens < 100, `${promptTokens} prompt tokens`);
  const complete = (maxTokens: number) =>
    call(`${server.urls.inference}/v1/completions`, {
      body: JSON.stringify({ model: 'decoder-llama', prompt, max_tokens: maxTokens, temperature: 0 }),
    });
  const over = await complete(129 - promptTokens);
  assert.equal(over.status, 400, JSON.stringify(over.body));
  assert.equal(over.body.code, 'BS_ERR_INFERENCE_INPUT');
  assert.match(over.body.error.message, /come to 129, over this model's max_context of 128/);
  // Up to the last position the model holds, the answer runs (it was a 500 from onnxruntime's Gather past it).
  const fits = await complete(128 - promptTokens);
  assert.equal(fits.status, 200, JSON.stringify(fits.body));
  assert.ok(fits.body.usage.total_tokens <= 128, JSON.stringify(fits.body.usage));
});
