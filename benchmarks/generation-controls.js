// What structured output and prefix caching cost and save on the bench decoder (issue #51),
// served with a byte-level BPE tokenizer of its 1,024 ids (xgrammar needs one: the decoder's own
// is a word list). Two parts, each a ratio measured in one run with a control:
// 1. Constrained decoding: B = 16 streaming completions (32-token prompts, 64 tokens, greedy)
//    at once, free and bound to a response_format json_schema; decode tokens/s = the tokens after
//    each stream's first ÷ the time from the first token to the last. Rounds free, json, json,
//    free; the control is free ÷ free. Aim: json ÷ free ≥ 0.9.
// 2. Prefix caching: one completion at a time, a 256-token shared system prompt and a distinct
//    32-token user turn each, to a server with prefix caching (the default) and one with
//    generation.prefix_cache_bytes 0; time to first token p50. Phases cached, uncached, uncached,
//    cached; the control is cached ÷ cached. Aim: cached ÷ uncached ≤ 0.3, the same answers.
// Server on CPU 0 and this process on CPU 1 where taskset is. Writes
// benchmarks/results/generation-controls.json (results.js: --quick, --check, --json).
// Usage: npm run bench:controls [-- --quick]   (about 3 min; --quick 1)
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { benchDecoder, packDecoderArchive } from './bench-decoder.js';
import { streamCompletion } from './completion-stream.js';
import { generationControls as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { CAN_PIN, pinSelfOffServerCpu, serveChild } from './serve-child.js';

const flags = benchFlags('generation-controls');
const { quick } = flags;
const { mulberry32 } = await import('../dist/src/core/random.js');
const { loadTokenizer } = await import('../dist/src/handlers/text-tokens.js');

const AIM = { constrained: 0.9, prefixTtft: 0.3 };
const BATCH = 16;
const NEW_TOKENS = 64;
const SYSTEM_TOKENS = 256;
const TURN_TOKENS = 32;
const TURNS = quick ? 12 : 30;
const ROUNDS = quick ? 1 : 2;
const EOS = 1023;

/** A byte-level BPE tokenizer.json of 1,024 ids: the 256 byte symbols, merges of common pairs, an end token. */
function byteLevelTokenizer() {
  const printable = [];
  for (let b = 33; b <= 126; b++) printable.push(b);
  for (let b = 161; b <= 172; b++) printable.push(b);
  for (let b = 174; b <= 255; b++) printable.push(b);
  const symbol = new Map(printable.map((b) => [b, String.fromCharCode(b)]));
  let extra = 0;
  for (let b = 0; b < 256; b++) if (!symbol.has(b)) symbol.set(b, String.fromCharCode(256 + extra++));
  const vocab = {};
  let id = 0;
  for (let b = 0; b < 256; b++) vocab[symbol.get(b)] = id++;
  const chars = [...'abcdefghijklmnopqrstuvwxyz0123456789{}":, '].map((c) => symbol.get(c.charCodeAt(0)));
  const merges = [];
  for (const a of chars) {
    for (const b of chars) {
      if (id >= EOS) break;
      if (vocab[a + b] !== undefined) continue;
      vocab[a + b] = id++;
      merges.push(`${a} ${b}`);
    }
  }
  vocab['<|endoftext|>'] = EOS;
  const byteLevel = { add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      {
        id: EOS,
        content: '<|endoftext|>',
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      },
    ],
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', ...byteLevel },
    post_processor: null,
    decoder: { type: 'ByteLevel', ...byteLevel },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      vocab,
      merges,
    },
  };
}

/** Text of exactly `count` tokens: random letters and spaces, cut by the tokenizer. */
function textOf(tokenizer, random, count) {
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  for (;;) {
    let text = '';
    while (tokenizer.encode(text).ids.length < count + 8) {
      const length = 2 + Math.floor(random() * 6);
      text += ' ' + Array.from({ length }, () => letters[Math.floor(random() * 26)]).join('');
    }
    const cut = tokenizer.decode(tokenizer.encode(text).ids.slice(0, count));
    if (tokenizer.encode(cut).ids.length === count) return cut;
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

async function decodeRate(server, prompts, fields, dispatcher) {
  const url = `${server.urls.inference}/v1/completions`;
  const streams = await Promise.all(
    prompts.map((prompt) => streamCompletion(url, 'bench', prompt, NEW_TOKENS, dispatcher, { fields })),
  );
  const first = Math.min(...streams.map((stream) => stream.arrivals[0]));
  const last = Math.max(...streams.map((stream) => stream.arrivals.at(-1)));
  const tokens = streams.reduce((sum, stream) => sum + stream.usage.completion_tokens - 1, 0);
  return { tokensPerSecond: tokens / ((last - first) / 1000), tokens, texts: streams.map((stream) => stream.text) };
}

async function ttftP50(server, system, turns, dispatcher) {
  const url = `${server.urls.inference}/v1/completions`;
  const firsts = [];
  const texts = [];
  for (const turn of turns) {
    const stream = await streamCompletion(url, 'bench', `${system}\n${turn}`, 8, dispatcher);
    firsts.push(stream.arrivals[0] - stream.sentAt);
    texts.push(stream.text);
  }
  return { p50: median(firsts), texts };
}

if (CAN_PIN) pinSelfOffServerCpu();
const decoder = await benchDecoder();
const dir = await mkdtemp(join(tmpdir(), 'batchserve-generation-controls-'));
const dispatcher = new Agent({ connections: 64 });
const figures = {};
try {
  const tokenizerFile = join(dir, 'tokenizer.json');
  const json = byteLevelTokenizer();
  await writeFile(tokenizerFile, JSON.stringify(json));
  const { tokenizer } = loadTokenizer(JSON.stringify(json), 'text-generation');
  const random = mulberry32(5);
  const generation = (prefixBytes) => ({
    max_active_sequences: BATCH,
    max_new_tokens: NEW_TOKENS,
    max_context: 1024,
    eos_token_ids: [EOS],
    ...(prefixBytes !== undefined ? { prefix_cache_bytes: prefixBytes } : {}),
  });
  const pack = (name, prefixBytes) =>
    packDecoderArchive({
      out: join(dir, name),
      modelName: 'bench',
      decoder: { ...decoder, tokenizer: tokenizerFile },
      generation: generation(prefixBytes),
    });
  const serve = async (name, archive) => serveChild({ name: 'bench', archive, dir: join(dir, name), pinned: CAN_PIN });

  // Part 1: constrained decoding at B = 16.
  const cached = await serve('cached', await pack('cached'));
  const runs = [];
  try {
    const prompts = Array.from({ length: BATCH }, () => textOf(tokenizer, random, 32));
    // An object whose one string must run past 64 tokens: every bound answer runs all 64, as free ones do.
    const schema = { type: 'object', properties: { t: { type: 'string', minLength: 200 } }, required: ['t'] };
    const json = { response_format: { type: 'json_schema', json_schema: { name: 'long', schema } } };
    await decodeRate(cached, prompts, json, dispatcher); // compiles the grammar, warms the session
    for (let round = 0; round < ROUNDS; round++) {
      for (const kind of ['free', 'json', 'json', 'free']) {
        const run = await decodeRate(cached, prompts, kind === 'json' ? json : undefined, dispatcher);
        if (kind === 'json')
          for (const text of run.texts) if (!text.startsWith('{')) throw new Error(`not JSON: ${text}`);
        runs.push({ round, kind, tokensPerSecond: run.tokensPerSecond, tokens: run.tokens });
        console.log(`  round ${round + 1} ${kind}: ${run.tokensPerSecond.toFixed(1)} tokens/s (${run.tokens} tokens)`);
      }
    }
    const rate = (kind) => median(runs.filter((run) => run.kind === kind).map((run) => run.tokensPerSecond));
    const rounds = Array.from({ length: ROUNDS }, (_, round) => {
      const of = (kind) => runs.filter((run) => run.round === round && run.kind === kind);
      const [free1, free2] = of('free');
      const [json1, json2] = of('json');
      return {
        ratio: (json1.tokensPerSecond + json2.tokensPerSecond) / (free1.tokensPerSecond + free2.tokensPerSecond),
        control: free2.tokensPerSecond / free1.tokensPerSecond,
      };
    });
    figures.constrained = { free: rate('free'), json: rate('json'), ratio: rate('json') / rate('free'), rounds, runs };

    // Part 2: prefix caching, the same server against one without.
    const uncached = await serve('uncached', await pack('uncached', 0));
    try {
      const system = textOf(tokenizer, random, SYSTEM_TOKENS);
      const turns = Array.from({ length: TURNS }, () => textOf(tokenizer, random, TURN_TOKENS));
      const warm = turns.slice(0, 2).map((turn) => `warm ${turn}`);
      await ttftP50(cached, system, warm, dispatcher);
      await ttftP50(uncached, system, warm, dispatcher);
      const phases = [];
      for (let round = 0; round < ROUNDS; round++) {
        for (const [kind, server] of [
          ['cached', cached],
          ['uncached', uncached],
          ['uncached', uncached],
          ['cached', cached],
        ]) {
          const phase = await ttftP50(server, system, turns, dispatcher);
          phases.push({ round, kind, p50Ms: phase.p50, texts: phase.texts });
          console.log(`  round ${round + 1} ${kind}: TTFT p50 ${phase.p50.toFixed(1)} ms`);
        }
      }
      const p50 = (kind) => median(phases.filter((phase) => phase.kind === kind).map((phase) => phase.p50Ms));
      const rounds = Array.from({ length: ROUNDS }, (_, round) => {
        const of = (kind) => phases.filter((phase) => phase.round === round && phase.kind === kind);
        const [cached1, cached2] = of('cached');
        const [uncached1, uncached2] = of('uncached');
        return {
          ratio: (cached1.p50Ms + cached2.p50Ms) / (uncached1.p50Ms + uncached2.p50Ms),
          control: cached2.p50Ms / cached1.p50Ms,
        };
      });
      figures.prefix = {
        cachedMs: p50('cached'),
        uncachedMs: p50('uncached'),
        ratio: p50('cached') / p50('uncached'),
        sameAnswers: phases.every((phase) => JSON.stringify(phase.texts) === JSON.stringify(phases[0].texts)),
        rounds,
        phases: phases.map(({ round, kind, p50Ms }) => ({ round, kind, p50Ms })),
      };
    } finally {
      await uncached.stop();
    }
  } finally {
    await cached.stop();
  }
} finally {
  await dispatcher.close();
  await rm(dir, { recursive: true, force: true });
}

const verdicts = [
  {
    label: `constrained decoding at B = ${BATCH}: json ÷ free decode tokens/s ${figures.constrained.ratio.toFixed(3)} ≥ ${AIM.constrained}`,
    met: figures.constrained.ratio >= AIM.constrained,
  },
  {
    label: `prefix caching: TTFT p50 cached ÷ uncached ${figures.prefix.ratio.toFixed(3)} ≤ ${AIM.prefixTtft}, the same answers`,
    met: figures.prefix.ratio <= AIM.prefixTtft && figures.prefix.sameAnswers,
  },
];
const record = resultRecord('generation-controls', flags, {
  settings: {
    pinned: CAN_PIN,
    batch: BATCH,
    newTokens: NEW_TOKENS,
    systemTokens: SYSTEM_TOKENS,
    turnTokens: TURN_TOKENS,
    turns: TURNS,
    rounds: ROUNDS,
  },
  ...figures,
  verdicts,
});
console.log(`\n${render.render(record)}`);
await writeResult(flags.json, record);
exitOnMissed(flags, verdicts);
