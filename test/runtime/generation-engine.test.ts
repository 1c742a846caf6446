import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import ort from 'onnxruntime-node';
import { Ajv } from 'ajv';
import { loadTokenizer, type TextTokenizer } from '../../src/handlers/text-tokens.js';
import { BatchCache } from '../../src/runtime/batch-cache.js';
import { cacheBytesPerToken, decoderLayout, type DecoderLayout } from '../../src/runtime/decoder-layout.js';
import { IncrementalDetokenizer } from '../../src/runtime/detokenizer.js';
import {
  GenerationEngine,
  type GenerationEvents,
  type GenerationSubmission,
  type SequenceEnd,
} from '../../src/runtime/generation-engine.js';
import { servedGenerationOptions } from '../../src/runtime/generation-options.js';
import { probePadding } from '../../src/runtime/padding-probe.js';
import { PrefixCache } from '../../src/runtime/prefix-cache.js';
import { Grammars } from '../../src/runtime/grammar.js';
import { readSignature } from '../../src/runtime/session.js';
import {
  readDecoderAnswers,
  torchTextFiles,
  type DecoderAnswers,
  type DecoderFixture,
} from '../fixtures/torch-text.js';

interface Opened {
  readonly session: ort.InferenceSession;
  readonly layout: DecoderLayout;
  readonly tokenizer: TextTokenizer;
  readonly answers: DecoderAnswers;
}

const opened = new Map<DecoderFixture, Promise<Opened>>();

/** One session per fixture for the whole file. */
function open(name: DecoderFixture): Promise<Opened> {
  let fixture = opened.get(name);
  if (!fixture) {
    fixture = (async () => {
      const files = torchTextFiles(name);
      const session = await ort.InferenceSession.create(files.model, { intraOpNumThreads: 1 });
      const { inputs, outputs } = readSignature(session, name);
      const { tokenizer } = loadTokenizer(await readFile(files.tokenizer, 'utf8'), 'text-generation');
      return { session, layout: decoderLayout(inputs, outputs), tokenizer, answers: await readDecoderAnswers(name) };
    })();
    opened.set(name, fixture);
  }
  return fixture;
}

/** Runs `submissions` through an engine, recording every step's events; resolves with each sequence's end. */
async function generate(
  fixture: Opened,
  submissions: readonly GenerationSubmission[],
  generation: Record<string, unknown> = {},
  /** Called once the first submissions have all ended; what it submits is awaited too. */
  then?: (engine: GenerationEngine, steps: GenerationEvents[]) => Promise<unknown>,
  grammars?: Grammars,
): Promise<{ ends: Map<number, SequenceEnd>; steps: GenerationEvents[]; batching: string }> {
  const { batching } = await probePadding(fixture.session, fixture.layout);
  const context = (generation.max_context as number | undefined) ?? 64;
  const options = servedGenerationOptions(
    { ...servedGenerationOptions(undefined, context), eos_token_ids: [fixture.answers.eos_token_id], ...generation },
    context,
  );
  const engine = new GenerationEngine(
    fixture.session,
    fixture.layout,
    fixture.tokenizer,
    options,
    batching,
    undefined,
    grammars,
  );
  const ends = new Map<number, SequenceEnd>();
  const steps: GenerationEvents[] = [];
  let expected = submissions.length;
  await new Promise<void>((resolve) => {
    engine.listen((events) => {
      steps.push(events);
      for (const end of events.ended) ends.set(end.id, end);
      if (ends.size < expected) return;
      if (then && expected === submissions.length) {
        expected++;
        void then(engine, steps);
        return;
      }
      resolve();
    });
    for (const submission of submissions) engine.submit(submission);
  });
  return { ends, steps, batching };
}

function submission(id: number, promptIds: readonly number[], maxTokens: number): GenerationSubmission {
  return { id, promptIds, maxTokens, temperature: 0, topP: 1, stop: [], seed: 1 };
}

/** torch's greedy ids, as the engine must have produced them: text and count. */
function assertTorchAnswer(fixture: Opened, end: SequenceEnd | undefined, index: number): void {
  const prompt = fixture.answers.prompts[index];
  assert.ok(prompt && end && !('error' in end), `prompt ${index} ended with an answer`);
  assert.equal(end.completionTokens, prompt.greedy.length, prompt.text);
  const stopped = prompt.greedy.at(-1) === fixture.answers.eos_token_id;
  const decode = (ids: readonly number[]): string => fixture.tokenizer.decode([...ids], { skip_special_tokens: true });
  const newIds = stopped ? prompt.greedy.slice(0, -1) : prompt.greedy;
  assert.equal(end.text, decode([...prompt.ids, ...newIds]).slice(decode(prompt.ids).length), prompt.text);
}

test('a batch cache repacked as rows join and leave gives each row the logits it has alone', async () => {
  const { session, layout } = await open('decoder-llama');
  const run = async (cache: BatchCache, tokens: number[][]): Promise<Float32Array[]> => {
    const outputs = await session.run(cache.feeds(tokens), cache.fetches());
    cache.advance(outputs, tokens);
    const logits = outputs.logits as ort.Tensor;
    const [, fed = 1, vocab = 0] = logits.dims;
    return tokens.map((_, r) =>
      (logits.data as Float32Array).slice((r * fed + fed - 1) * vocab, (r * fed + fed) * vocab),
    );
  };
  const alone = async (steps: number[][]): Promise<Float32Array> => {
    const cache = BatchCache.empty(layout, 1);
    let last: Float32Array = new Float32Array(0);
    for (const step of steps) [last = last] = await run(cache, [step]);
    return last;
  };
  const assertClose = (got: Float32Array | undefined, want: Float32Array, what: string): void => {
    assert.equal(got?.length, want.length, what);
    const worst = want.reduce((most, value, i) => Math.max(most, Math.abs(value - (got?.[i] ?? NaN))), 0);
    assert.ok(worst < 1e-4, `${what}: off by ${worst}`);
  };

  // Rows of 6 and 2 prompt tokens, then a decode step: row 1 is padded in its cache.
  const batch = BatchCache.empty(layout, 2);
  await run(batch, [
    [1, 20, 30, 40, 50, 60],
    [1, 70],
  ]);
  await run(batch, [[7], [8]]);
  assert.equal(batch.width, 7);
  // Row 0 leaves; a 4-token prompt joins and shares the step with row 1's next token.
  const joined = BatchCache.pack(layout, [
    { cache: batch, rows: [1] },
    { cache: BatchCache.empty(layout, 1), rows: [0] },
  ]);
  assert.deepEqual([joined.width, [...joined.lengths]], [3, [3, 0]], 'only row 1 is kept, right-aligned');
  const [kept, fresh] = await run(joined, [[9], [1, 11, 12, 13]]);
  assertClose(kept, await alone([[1, 70], [8], [9]]), 'the kept row, with a hole before its token');
  assertClose(fresh, await alone([[1, 11, 12, 13]]), 'the joined row, left-padded');
  assert.ok(joined.worthRepacking, 'three holes beside 7 real positions are worth a repack');
  const repacked = BatchCache.pack(layout, [{ cache: joined, rows: [0, 1] }]);
  assert.equal(repacked.width, 4);
  const [keptNext, freshNext] = await run(repacked, [[5], [6]]);
  assertClose(keptNext, await alone([[1, 70], [8], [9], [5]]), 'the kept row after the repack');
  assertClose(freshNext, await alone([[1, 11, 12, 13], [6]]), 'the joined row after the repack');
});

test("a decoder without position_ids shares steps only with rows of its length, and answers as torch's", async () => {
  const fixture = await open('decoder-gpt2-nopos');
  const { prompts } = fixture.answers;
  // The same prompt four times, so rows of one length can share steps, beside every other prompt.
  const twin = prompts.findIndex((prompt) => prompt.greedy.length === fixture.answers.max_new_tokens);
  const indices = [...prompts.keys(), twin, twin, twin];
  const { ends, steps, batching } = await generate(
    fixture,
    indices.map((index, id) => submission(id, prompts[index]?.ids ?? [], fixture.answers.max_new_tokens)),
    { max_active_sequences: 4 },
  );
  assert.equal(batching, 'equal-length');
  indices.forEach((index, id) => assertTorchAnswer(fixture, ends.get(id), index));
  const most = Math.max(...steps.map((step) => step.tokens.length));
  assert.ok(most >= 4, `the four rows of one length took tokens in one step (at most ${most} did)`);
});

test('a padded decoder answers every prompt as torch does while they join and leave one running batch', async () => {
  const fixture = await open('decoder-gpt2');
  const { prompts } = fixture.answers;
  const { ends, steps, batching } = await generate(
    fixture,
    prompts.map((prompt, id) => submission(id, prompt.ids, fixture.answers.max_new_tokens)),
    { max_active_sequences: 3 },
  );
  assert.equal(batching, 'padded');
  prompts.forEach((_, id) => assertTorchAnswer(fixture, ends.get(id), id));
  assert.ok(Math.max(...steps.map((step) => step.active)) === 3, 'three rows ran together');
});

test('kv_cache_bytes admits a sequence only while what every batch may come to hold fits; the rest wait their turn', async () => {
  const fixture = await open('decoder-llama');
  const { prompts } = fixture.answers;
  const perToken = cacheBytesPerToken(fixture.layout);
  const maxTokens = 8;
  // Room for the longest prompt and its answer, padded twice over: one or two rows, never all.
  const longest = Math.max(...prompts.map((prompt) => prompt.ids.length));
  const budget = 2 * (longest + maxTokens) * perToken;
  const { ends, steps } = await generate(
    fixture,
    prompts.map((prompt, id) => submission(id, prompt.ids, maxTokens)),
    { kv_cache_bytes: budget, max_active_sequences: 16 },
  );
  for (const [id, end] of ends) assert.ok(!('error' in end), `sequence ${id}: ${JSON.stringify(end)}`);
  assert.ok(
    steps.every((step) => step.reservedBytes <= budget && step.usedBytes <= budget),
    'what the caches held and could come to hold stayed within kv_cache_bytes',
  );
  const most = Math.max(...steps.map((step) => step.active));
  assert.ok(most >= 2 && most < prompts.length, `the budget let ${most} of ${prompts.length} run together`);

  // One that could never fit is refused at once, naming the limit; nothing else is held up.
  const { ends: refused } = await generate(fixture, [submission(0, prompts[0]?.ids ?? [], 60)], {
    kv_cache_bytes: 10 * perToken,
  });
  const end = refused.get(0);
  assert.ok(end && 'error' in end);
  assert.equal(end.error.code, 'BS_ERR_INFERENCE_INPUT');
  assert.match(end.error.message, /kv_cache_bytes/);
});

test('the only running sequence, cancelled, ends with BS_ERR_REQUEST_CANCELLED at the next step: its end is sent though no step runs after it', async () => {
  const fixture = await open('decoder-llama');
  const options = servedGenerationOptions(
    { ...servedGenerationOptions(undefined, 64), eos_token_ids: [], max_new_tokens: 40 },
    64,
  );
  const { batching } = await probePadding(fixture.session, fixture.layout);
  const engine = new GenerationEngine(fixture.session, fixture.layout, fixture.tokenizer, options, batching);
  const ended = new Promise<SequenceEnd>((resolve) => {
    engine.listen((events) => {
      if (events.tokens.length > 0) engine.cancel(0);
      const end = events.ended.find((item) => item.id === 0);
      if (end) resolve(end);
    });
  });
  engine.submit(submission(0, fixture.answers.prompts[0]?.ids ?? [1], 40));
  const end = await ended;
  assert.ok('error' in end, JSON.stringify(end));
  assert.equal(end.error.code, 'BS_ERR_REQUEST_CANCELLED');
  await engine.close();
});

test('new text keeps what decoding the new ids alone would drop, and an answer cut inside a character ends as a whole decode does', async () => {
  const llama = await open('decoder-llama');
  const prompt = llama.tokenizer.encode('The cat').ids;
  const word = llama.tokenizer.encode('The cat sat').ids.slice(prompt.length);
  const detokenizer = new IncrementalDetokenizer(llama.tokenizer, prompt);
  const text = word.map((id) => detokenizer.push(id)).join('') + detokenizer.flush();
  assert.equal(text, ' sat', "SentencePiece's leading space survives");
  assert.equal(llama.tokenizer.decode(word, { skip_special_tokens: true }), 'sat', 'decoded alone it is lost');

  // GPT-2's byte-level tokens: "é" is two byte tokens; an answer cut after the first ends in U+FFFD.
  const gpt2 = await open('decoder-gpt2');
  const ids = gpt2.tokenizer.encode('a é').ids;
  const cut = ids.slice(0, -1);
  const bytes = new IncrementalDetokenizer(gpt2.tokenizer, []);
  const pieces = cut.map((id) => bytes.push(id));
  assert.equal(pieces.at(-1), '', 'half a character is held back');
  assert.equal(pieces.join('') + bytes.flush(), gpt2.tokenizer.decode(cut, { skip_special_tokens: true }));
  assert.ok(gpt2.tokenizer.decode(cut, {}).endsWith('\ufffd'));
});

test('a prompt longer than max_tokens_per_step is read a chunk a step, in turn with the running sequences, and answers as torch', async () => {
  const fixture = await open('decoder-llama');
  const { prompts, max_new_tokens: maxTokens } = fixture.answers;
  const short = prompts.reduce((best, prompt) => (prompt.ids.length < best.ids.length ? prompt : best));
  const long = prompts.reduce((best, prompt) => (prompt.ids.length > best.ids.length ? prompt : best));
  const chunk = 4;
  assert.ok(long.ids.length > 3 * chunk && short.ids.length <= chunk);
  const { ends, steps } = await generate(
    fixture,
    [submission(0, short.ids, maxTokens), submission(1, long.ids, maxTokens)],
    { max_tokens_per_step: chunk },
  );
  assertTorchAnswer(fixture, ends.get(0), prompts.indexOf(short));
  assertTorchAnswer(fixture, ends.get(1), prompts.indexOf(long));
  const firstOfLong = steps.findIndex((step) => step.tokens.some(([id]) => id === 1));
  const shortMeanwhile = steps.slice(0, firstOfLong).filter((step) => step.tokens.some(([id]) => id === 0)).length;
  const chunks = Math.ceil(long.ids.length / chunk);
  assert.ok(
    shortMeanwhile >= chunks - 1,
    `the running sequence took ${shortMeanwhile} tokens while the long prompt was read in ${chunks} chunks`,
  );
});

test('a sequence much longer than the running ones runs in a batch of its own, the batches in turn, each answer as it is alone', async () => {
  const fixture = await open('decoder-llama');
  const shorts = [...fixture.answers.prompts].sort((a, b) => a.ids.length - b.ids.length).slice(0, 4);
  const long = fixture.tokenizer.encode('the cat sat on the mat and the dog ran in the park. '.repeat(3)).ids;
  assert.ok(long.length > 60 && long.length + 8 < 128, `${long.length} tokens`);
  const all = [...shorts.map((prompt) => prompt.ids), long];
  const limits = { max_tokens_per_step: 128, max_context: 128 };
  const alone = await Promise.all(all.map((ids, id) => generate(fixture, [submission(id, ids, 8)], limits)));
  const { ends, steps } = await generate(
    fixture,
    all.map((ids, id) => submission(id, ids, 8)),
    limits,
  );
  all.forEach((_, id) => {
    const end = ends.get(id);
    assert.ok(end && !('error' in end), JSON.stringify(end));
    assert.deepEqual(end, alone[id]?.ends.get(id), `sequence ${id}`);
  });
  // Four rows of 3 to 10 tokens beside one of 64 would be padded to 64: the long one steps apart.
  const apart = steps.filter((step) => step.tokens.length === 1 && step.tokens[0]?.[0] === 4).length;
  assert.ok(apart >= 4, `the long sequence took ${apart} tokens in steps of its own`);
});

test('a prompt that starts as an earlier one did reads only what follows the cached blocks, and answers the same', async () => {
  const fixture = await open('decoder-llama');
  const shared = fixture.tokenizer.encode('the cat sat on the mat and the dog ran in the park and then '.repeat(2)).ids;
  assert.ok(shared.length >= 32, `${shared.length} shared tokens`);
  const prompts = ['we went home', 'it rained all day long'].map((end) => [
    ...shared,
    ...fixture.tokenizer.encode(end, { add_special_tokens: false }).ids,
  ]);
  const limits = { max_context: 128 };
  const cold = await generate(
    fixture,
    prompts.map((ids, id) => submission(id, ids, 8)),
    { ...limits, prefix_cache_bytes: 0 },
  );
  // One engine: the first prompt's blocks are cached when it has been read, the second finds them.
  const warm = await generate(fixture, [submission(0, prompts[0] ?? [], 8)], limits, async (engine, steps) => {
    engine.submit(submission(1, prompts[1] ?? [], 8));
    return steps;
  });
  assert.deepEqual(warm.ends.get(1), cold.ends.get(1), 'the same answer with the prefix cached');
  assert.deepEqual(warm.ends.get(0), cold.ends.get(0));
  const hits = warm.steps.reduce((sum, step) => sum + step.prefixHits, 0);
  const saved = warm.steps.reduce((sum, step) => sum + step.prefixTokens, 0);
  assert.equal(hits, 1);
  assert.equal(saved, Math.floor(shared.length / 16) * 16);
  assert.ok((warm.steps.at(-1)?.prefixBytes ?? 0) > 0);
});

test("a cached prefix's blocks rebuild the row they were read from: the next token's logits are the uncached ones", async () => {
  const { session, layout, tokenizer } = await open('decoder-llama');
  const ids = tokenizer.encode('the cat sat on the mat and the dog ran in the park and then '.repeat(2)).ids;
  const run = async (cache: BatchCache, tokens: number[]): Promise<Float32Array> => {
    const outputs = await session.run(cache.feeds([tokens]), cache.fetches());
    cache.advance(outputs, [tokens]);
    const logits = outputs.logits as ort.Tensor;
    const [, fed = 1, vocab = 0] = logits.dims;
    return (logits.data as Float32Array).slice((fed - 1) * vocab, fed * vocab);
  };
  // Read whole, left-padded beside a longer row, as a batch would leave it.
  const read = BatchCache.empty(layout, 2);
  const outputs = await session.run(read.feeds([[...ids, 5, 6, 7], ids]), read.fetches());
  read.advance(outputs, [[...ids, 5, 6, 7], ids]);
  const prefixes = new PrefixCache(1 << 20, {
    heads: layout.heads,
    headDim: layout.headDim,
    tensors: layout.layers.length * 2,
  });
  prefixes.insert(ids, (from, to) => read.slice(1, from, to));

  const next = [ids.at(-1) ?? 0, 3, 9];
  const uncached = BatchCache.empty(layout, 1);
  await run(uncached, ids.slice(0, 32));
  const want = await run(uncached, next);
  const hit = prefixes.lookup([...ids.slice(0, 32), ...next]);
  assert.equal(hit.tokens, 32);
  const got = await run(BatchCache.fromRows(layout, [prefixes.row(hit)]), next);
  const worst = want.reduce((most, value, i) => Math.max(most, Math.abs(value - (got[i] ?? NaN))), 0);
  assert.ok(worst < 1e-4, `off by ${worst}`);
});

test('the prefix cache keeps within its budget by evicting the least recently used blocks no other block continues', () => {
  const shape = { heads: 1, headDim: 1, tensors: 2 };
  const blockBytes = 2 * 16 * 4;
  const prefixes = new PrefixCache(3 * blockBytes, shape);
  // Each prompt's values say whose row they came from: 0 and up for a's, 1000 and up for b's.
  const sliceOf =
    (base: number) =>
    (from: number, to: number): Float32Array[] => [
      Float32Array.from({ length: to - from }, (_, k) => base + from + k),
      Float32Array.from({ length: to - from }, (_, k) => -(base + from + k)),
    ];
  const a = Array.from({ length: 48 }, (_, i) => i);
  const b = [...a.slice(0, 16), ...Array.from({ length: 32 }, (_, i) => 100 + i)];
  prefixes.insert(a, sliceOf(0));
  assert.equal(prefixes.bytes, 3 * blockBytes);
  assert.equal(prefixes.lookup([...a, 0]).tokens, 48);
  // b shares a's first block: its two own blocks evict a's last two (leaves first, oldest first).
  prefixes.insert(b, sliceOf(1000));
  assert.equal(prefixes.bytes, 3 * blockBytes);
  assert.equal(prefixes.lookup([...a, 0]).tokens, 16);
  const hit = prefixes.lookup([...b, 0]);
  assert.equal(hit.tokens, 48);
  assert.deepEqual(
    [...(prefixes.row(hit).tensors[0] ?? [])],
    Array.from({ length: 48 }, (_, k) => (k < 16 ? k : 1000 + k)),
    "a's first block, then b's own",
  );
  assert.equal(prefixes.lookup(b).tokens, 32, 'a lookup leaves the last token to read');
  assert.equal(new PrefixCache(blockBytes - 1, shape).lookup(a).tokens, 0);
});

for (const name of ['decoder-gpt2', 'decoder-llama'] as const) {
  test(`${name}: an answer bound to a JSON schema parses and validates, whatever the random weights would say`, async () => {
    const fixture = await open(name);
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 6 },
        ok: { type: 'boolean' },
        size: { enum: ['s', 'm', 'l'] },
      },
      required: ['name', 'ok', 'size'],
      additionalProperties: false,
    };
    const grammars = new Grammars(await readFile(torchTextFiles(name).tokenizer, 'utf8'), undefined, [
      fixture.answers.eos_token_id,
    ]);
    const prompts = fixture.answers.prompts.slice(0, 6);
    const { ends } = await generate(
      fixture,
      prompts.map((prompt, id) => ({
        ...submission(id, prompt.ids, 40),
        responseFormat: { type: 'json_schema' as const, schema },
      })),
      { max_context: 128 },
      undefined,
      grammars,
    );
    const validate = new Ajv().compile(schema);
    for (const [id, end] of ends) {
      assert.ok(!('error' in end), JSON.stringify(end));
      assert.equal(end.finishReason, 'stop', `sequence ${id}: ${end.text}`);
      const value: unknown = JSON.parse(end.text);
      assert.ok(validate(value), `${end.text}: ${JSON.stringify(validate.errors)}`);
    }
    // Unbound, the same prompts answer anything but JSON.
    const free = await generate(
      fixture,
      prompts.map((prompt, id) => submission(id, prompt.ids, 40)),
      { max_context: 128 },
    );
    assert.ok([...free.ends.values()].some((end) => !('error' in end) && !isJson(end.text)));
  });
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

test('n answers read their prompt once and each draws as a sequence of its own seed would', async () => {
  const fixture = await open('decoder-llama');
  const prompt = fixture.answers.prompts[3]?.ids ?? [];
  const sampled = (id: number, seed: number, choices?: number): GenerationSubmission => ({
    ...submission(id, prompt, 10),
    temperature: 1,
    seed,
    ...(choices ? { choices } : {}),
  });
  const rowsRead: number[] = [];
  const { session } = fixture;
  const run = session.run.bind(session);
  session.run = ((feeds: ort.InferenceSession.FeedsType, fetches: ort.InferenceSession.FetchesType) => {
    rowsRead.push((feeds.input_ids as ort.Tensor).dims[0] as number);
    return run(feeds, fetches);
  }) as typeof session.run;
  let together: Awaited<ReturnType<typeof generate>>;
  try {
    together = await generate(fixture, [sampled(10, 5, 3)], { max_context: 128, prefix_cache_bytes: 0 });
  } finally {
    session.run = run;
  }
  // The padding probe's six passes first; then the prompt read as one row, then the three decode.
  const ours = rowsRead.slice(6);
  assert.deepEqual(ours.slice(0, 2), [1, 3], JSON.stringify(rowsRead));
  assert.ok(ours.every((rows) => rows <= 3));
  const alone = await generate(fixture, [sampled(0, 5), sampled(1, 6), sampled(2, 7)], { max_context: 128 });
  for (let choice = 0; choice < 3; choice++) {
    const end = together.ends.get(10 + choice);
    assert.ok(end && !('error' in end), JSON.stringify(end));
    assert.deepEqual({ ...end, id: choice }, alone.ends.get(choice), `choice ${choice}`);
  }
  const texts = new Set([0, 1, 2].map((choice) => JSON.stringify(together.ends.get(10 + choice))));
  assert.ok(texts.size > 1, 'the draws differ');
});
