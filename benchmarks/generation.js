// Is the served generation engine (generation-engine.ts, in a worker thread beside its
// onnxruntime session; the main thread streams /v1/completions) as fast and as lean as the
// plainest loop, and does iteration-level batching pay? Issue #47. Three parts:
// 1. Served ÷ plain loop, on the bench decoder (bench-decoder.js: Llama-shaped, 23.2 M
//    parameters, made by torch into a temp folder on the first run): B prompts of P tokens,
//    N new tokens each, greedy, no end token; decode tokens/s = B·(N − 1) ÷ the time from the
//    first token to the last (generation-vs-loop.js; the loop is ort-generation-loop.js), and
//    each process's peak RSS (VmHWM; a fresh process every run). Server or loop on CPU 0, this
//    process on CPU 1, one intra-op thread each side. Each point runs loop, served, served,
//    loop per round; the control is the loop ÷ itself. Aims: served ÷ loop ≥ 0.9 at B = 1, 4,
//    16 (P 32, N 128), ≥ 0.85 at B = 8 with P 256, N 256; the server's peak RSS ≤ 1.3 × the
//    loop's. Every stream must send one chunk a token (chunks = usage.completion_tokens = N).
// 2. Iteration against whole-request scheduling on the simulated accelerator
//    (generation-sim.js): aim iteration ÷ request tokens/s ≥ 2.5 on log-uniform answer
//    lengths, each workload's p99 inter-token latency at most 5 % above request's.
// 3. Report only: time to first token of 8 streaming clients (32-token prompts, 64 tokens
//    each) on the bench decoder, alone and while a ninth keeps sending 1024-token prompts
//    (16 tokens each): a joining prompt whose padding would more than double the step runs a
//    prefill step of its own, which every decoding row waits for. Alone, loaded, loaded, alone.
// Writes benchmarks/results/generation.json (results.js: --quick, --check, --json).
// Usage: npm run bench:generation [-- --quick] [-- --check]   (--quick ≈ 4 min, in full ≈ 15 min)
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { benchDecoder, packDecoderArchive, prompts } from './bench-decoder.js';
import { measureLongPrompt } from './generation-long-prompt.js';
import { runLoop, runServed } from './generation-vs-loop.js';
import { measureSim, SIM } from './generation-sim.js';
import { generation as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { CAN_PIN, pinSelfOffServerCpu } from './serve-child.js';

const flags = benchFlags('generation');
const { mulberry32 } = await import('../dist/src/core/random.js');

const AIM = {
  servedVsLoop: 0.9,
  servedVsLoopLong: 0.85,
  rssRatio: 1.3,
  sim: { tokensRatio: 2.5, interTokenP99Ratio: 1.05 },
};
const settings = {
  pinned: CAN_PIN,
  vsLoop: {
    points: [
      { batch: 1, promptTokens: 32, newTokens: 128, aim: AIM.servedVsLoop },
      { batch: 4, promptTokens: 32, newTokens: 128, aim: AIM.servedVsLoop },
      { batch: 16, promptTokens: 32, newTokens: 128, aim: AIM.servedVsLoop },
      { batch: 8, promptTokens: 256, newTokens: 256, aim: AIM.servedVsLoopLong },
    ],
    rounds: flags.quick ? 1 : 3,
    warmupTokens: 8,
    // Seeded words; with seed 2 no greedy answer holds <unk> or <s>, which decode to no text
    // and so send no chunk (the runs check chunks = usage).
    promptSeed: 2,
  },
  sim: {
    ...SIM,
    concurrency: flags.quick ? [16] : [16, 32],
    workloads: ['uniform', 'log-uniform'],
    warmupMs: flags.quick ? 1000 : 3000,
    durationMs: flags.quick ? 4000 : 15000,
  },
  longPrompt: {
    clients: 8,
    promptTokens: 32,
    maxTokens: 64,
    longPromptTokens: 1024,
    longMaxTokens: 16,
    // With long prompts joining, a short answer took 7–10 s here: the window holds a few a client.
    warmupMs: flags.quick ? 3000 : 5000,
    durationMs: flags.quick ? 15000 : 30000,
  },
};
const MODEL = 'writer';
// Every part's archive: the sequences part 1 and 3 run at most, answers exactly max_tokens long;
// max_context left at its default (2,048, the decoder's position limit).
const GENERATION = { max_active_sequences: 16, max_new_tokens: 256, eos_token_ids: [] };

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};
const mean = (values) => values.reduce((sum, value) => sum + value, 0) / values.length;

/** Part 1 at one point: rounds of loop, served, served, loop, and what they come to. */
async function servedVsLoop(point, context) {
  const { batch, promptTokens, newTokens } = point;
  const { warmupTokens, promptSeed } = settings.vsLoop;
  const run = {
    ...context,
    prompts: prompts(context.decoder, mulberry32(promptSeed), batch, promptTokens),
    newTokens,
    warmupTokens,
  };
  const rounds = [];
  for (let round = 1; round <= settings.vsLoop.rounds; round++) {
    const runs = [];
    // The round's first loop run's answers, which each served run's are compared with.
    let loopTokens;
    for (const side of ['loop', 'served', 'served', 'loop']) {
      const figures = side === 'loop' ? await runLoop(run) : await runServed(run);
      loopTokens ??= figures.tokens;
      runs.push(side === 'loop' ? loopRun(figures) : servedRun(figures, loopTokens, point));
      console.log(render.vsLoopRun({ ...point, round }, runs.at(-1)));
    }
    const loops = runs.filter((each) => each.side === 'loop');
    const served = runs.filter((each) => each.side === 'served');
    const rate = (sides) => mean(sides.map((each) => each.tokensPerSecond));
    rounds.push({
      round,
      ratio: rate(served) / rate(loops),
      control: loops[1].tokensPerSecond / loops[0].tokensPerSecond,
      runs,
    });
  }
  const runs = rounds.flatMap((round) => round.runs);
  const of = (side) => runs.filter((each) => each.side === side);
  // The median run's peak: one run's garbage collector can leave a peak far above the others'.
  const peak = (side) => median(of(side).map((each) => each.peakRssMiB));
  const result = {
    ...point,
    loop: { tokensPerSecond: median(of('loop').map((each) => each.tokensPerSecond)), peakRssMiB: peak('loop') },
    served: {
      tokensPerSecond: median(of('served').map((each) => each.tokensPerSecond)),
      firstTokenMs: median(of('served').map((each) => each.firstTokenMs)),
      peakRssMiB: peak('served'),
      sampledRssMiB: Math.max(...of('served').map((each) => each.sampledRssMiB)),
      chunksMatchUsage: of('served').every((each) => each.chunksMatchUsage),
      sameAnswers: Math.min(...of('served').map((each) => each.sameAnswers)),
    },
    ratio: median(rounds.map((round) => round.ratio)),
    ratios: rounds.map((round) => round.ratio),
    controls: rounds.map((round) => round.control),
    rssRatio: peak('served') / peak('loop'),
    rounds,
  };
  console.log(render.vsLoopPoint(result));
  return result;
}

function loopRun(figures) {
  const { decodeTokensPerSecond, prefillMs, peakRssMiB, endRssMiB } = figures;
  return { side: 'loop', tokensPerSecond: decodeTokensPerSecond, prefillMs, peakRssMiB, endRssMiB };
}

/** A served run's figures, checked: one chunk a token, the prompt's length, the loop's answers. */
function servedRun(figures, loopTokens, { batch, promptTokens, newTokens }) {
  const { streams } = figures;
  return {
    side: 'served',
    tokensPerSecond: figures.decodeTokensPerSecond,
    firstTokenMs: figures.firstTokenMs,
    tokensAfterT0: figures.tokensAfterT0,
    expectedAfterT0: batch * (newTokens - 1),
    peakRssMiB: figures.peakRssMiB,
    sampledRssMiB: figures.sampledRssMiB,
    chunksMatchUsage: streams.every(
      (stream) =>
        stream.chunks === stream.completionTokens &&
        stream.completionTokens === newTokens &&
        stream.promptTokens === promptTokens,
    ),
    sameAnswers: streams.filter((stream, row) => JSON.stringify(stream.tokens) === JSON.stringify(loopTokens[row]))
      .length,
    chunks: streams.reduce((sum, stream) => sum + stream.chunks, 0),
    completionTokens: streams.reduce((sum, stream) => sum + (stream.completionTokens ?? 0), 0),
  };
}

if (settings.pinned) pinSelfOffServerCpu();
const decoder = await benchDecoder();
const dir = await mkdtemp(join(tmpdir(), 'batchserve-generation-'));
try {
  const archive = await packDecoderArchive({
    out: join(dir, 'decoder'),
    modelName: MODEL,
    decoder,
    generation: GENERATION,
  });
  const context = { decoder, archive, modelName: MODEL, dir, pinned: settings.pinned };
  console.log(render.header({ settings, decoder: decoder.bench }));
  const vsLoop = [];
  for (const point of settings.vsLoop.points) vsLoop.push(await servedVsLoop(point, context));
  const levels = await measureSim(settings.sim, {
    dir,
    pinned: settings.pinned,
    log: (level) => console.log(render.level(level)),
  });
  const random = mulberry32(settings.vsLoop.promptSeed);
  const [short] = prompts(decoder, random, 1, settings.longPrompt.promptTokens);
  const [long] = prompts(decoder, random, 1, settings.longPrompt.longPromptTokens);
  // Every long request sends the same prompt: with the prefix cache it would be read once, and
  // the part would measure nothing of how a prompt is read beside decoding rows.
  const unCached = await packDecoderArchive({
    out: join(dir, 'decoder-no-prefix-cache'),
    modelName: MODEL,
    decoder,
    generation: { ...GENERATION, prefix_cache_bytes: 0 },
  });
  const longPrompt = await measureLongPrompt(settings.longPrompt, {
    ...context,
    archive: unCached,
    prompts: { short, long },
    log: (phase) => console.log(render.longPromptPhase(phase, settings.longPrompt)),
  });
  const verdicts = [
    ...vsLoop.flatMap((point) => {
      const name = `B=${point.batch} P=${point.promptTokens}`;
      return [
        {
          label: `${name}: served ÷ loop tokens/s ${point.ratio.toFixed(2)} ≥ ${point.aim}`,
          met: point.ratio >= point.aim,
        },
        {
          label: `${name}: peak RSS ÷ loop's ${point.rssRatio.toFixed(2)} ≤ ${AIM.rssRatio}`,
          met: point.rssRatio <= AIM.rssRatio,
        },
      ];
    }),
    {
      label: 'every served stream sent one chunk a token (chunks = usage.completion_tokens = N)',
      met: vsLoop.every((point) => point.served.chunksMatchUsage),
    },
    ...levels.map((level) => {
      const itl = level.iteration.interTokenP99Ms / level.request.interTokenP99Ms;
      const judged = level.workload === 'log-uniform';
      return {
        label:
          `sim ${level.workload} K=${level.concurrency}: ` +
          (judged ? `iteration ÷ request tokens/s ${level.ratio.toFixed(2)} ≥ ${AIM.sim.tokensRatio}, ` : '') +
          `p99 ITL ratio ${itl.toFixed(3)} ≤ ${AIM.sim.interTokenP99Ratio}`,
        met: (!judged || level.ratio >= AIM.sim.tokensRatio) && itl <= AIM.sim.interTokenP99Ratio,
      };
    }),
  ];
  const record = resultRecord('generation', flags, {
    settings,
    decoder: decoder.bench,
    aim: AIM,
    vsLoop,
    levels,
    longPrompt,
    verdicts,
  });
  console.log(`\n${render.render(record)}`);
  await writeResult(flags.json, record);
  exitOnMissed(flags, verdicts);
} finally {
  await rm(dir, { recursive: true, force: true });
}
