// Does iteration-level ("continuous") batching beat whole-request batching for generation?
// Judged on the simulated accelerator: the test suite's generated decoder (exact, tiny) on
// device `sim`, each decoding step held to T = c + m·tokens of wall time (c = 8 ms, m = 0.1 ms
// a token fed) without CPU, so this 2-core machine's noise barely touches it. 16 sequences
// decode together (max_active_sequences), answers have no end token, so each is exactly its
// max_tokens long, drawn from 8–256: uniformly, and log-uniformly (most short, a few long, as
// real answers are). A closed loop of K streaming clients (bench --openai completions).
// One `serve` child per scheduling (iteration, request), both on CPU 0, this process on CPU 1;
// each level runs iteration, request, request, iteration (A B B A), iteration's two runs are
// the control (how far one configuration lands from itself).
// Aim: iteration ÷ request tokens/s ≥ 2, at the same p99 inter-token latency (iteration's at
// most 5 % above request's: a full step costs c + 16m where a thinning batch's costs less).
// Writes benchmarks/results/generation.json (results.js: --quick, --check, --json).
// Usage: npm run bench:generation [-- --quick] [-- --check]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generation as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { CAN_PIN, pinSelfOffServerCpu, serveChild } from './serve-child.js';
import { packSimArchive } from './sim-archive.js';

const flags = benchFlags('generation');
const { decoderModel } = await import('../dist/test/fixtures/onnx-models.js');
const { TEXT_VOCAB, wordPieceTokenizer } = await import('../dist/test/fixtures/text-tokenizer.js');
const { runOpenAiLoad } = await import('../dist/src/bench/openai-load.js');

const COST = { cMs: 8, mMs: 0.1 };
const ACTIVE = 16;
const TOKENS = [8, 256];
const AIM = { tokensRatio: 2, interTokenP99Ratio: 1.05 };
const settings = {
  pinned: CAN_PIN,
  cost: COST,
  activeSequences: ACTIVE,
  tokens: TOKENS,
  concurrency: flags.quick ? [16] : [16, 32],
  workloads: ['uniform', 'log-uniform'],
  warmupMs: flags.quick ? 1000 : 3000,
  durationMs: flags.quick ? 4000 : 15000,
};
const SCHEDULINGS = ['iteration', 'request'];

async function packArchives(dir) {
  const model = join(dir, 'decoder.onnx');
  await writeFile(model, decoderModel(TEXT_VOCAB.length));
  const tokenizer = join(dir, 'tokenizer.json');
  await writeFile(tokenizer, JSON.stringify(wordPieceTokenizer({ specialTokens: false })));
  const archives = new Map();
  for (const scheduling of SCHEDULINGS) {
    const { archive } = await packSimArchive({
      out: join(dir, scheduling),
      modelName: 'writer',
      model,
      cost: COST,
      config: {
        max_batch_size: ACTIVE,
        text: { tokenizer_file: 'tokenizer.json' },
        generation: {
          scheduling,
          max_active_sequences: ACTIVE,
          max_new_tokens: TOKENS[1],
          max_context: 1024,
          eos_token_ids: [],
        },
      },
      handler: 'text-generation',
      extraFiles: [tokenizer],
    });
    archives.set(scheduling, archive);
  }
  return archives;
}

/** One scheduling at one K on one workload: a streamed closed loop, the server's usage counts. */
async function measure(server, concurrency, workload) {
  const [low, high] = TOKENS;
  const [point] = await runOpenAiLoad({
    url: server.urls.inference,
    model: 'writer',
    api: 'completions',
    concurrency: [concurrency],
    maxTokens: [low, high],
    distribution: workload,
    prompt: 'hello',
    warmupMs: settings.warmupMs,
    durationMs: settings.durationMs,
    seed: 7,
  });
  return point;
}

if (settings.pinned) pinSelfOffServerCpu();
const dir = await mkdtemp(join(tmpdir(), 'batchserve-generation-'));
const servers = new Map();
try {
  const archives = await packArchives(dir);
  for (const scheduling of SCHEDULINGS) {
    servers.set(
      scheduling,
      await serveChild({ name: 'writer', archive: archives.get(scheduling), dir, pinned: settings.pinned }),
    );
  }
  const levels = [];
  for (const workload of settings.workloads) {
    for (const concurrency of settings.concurrency) {
      const runs = { iteration: [], request: [] };
      for (const scheduling of ['iteration', 'request', 'request', 'iteration']) {
        runs[scheduling].push(await measure(servers.get(scheduling), concurrency, workload));
      }
      const mean = (points, pick) => points.reduce((sum, point) => sum + pick(point), 0) / points.length;
      const summary = (points) => ({
        tokensPerSecond: mean(points, (point) => point.tokensPerSecond),
        interTokenP99Ms: Math.max(...points.map((point) => point.interTokenMs.p99)),
        interTokenP50Ms: mean(points, (point) => point.interTokenMs.p50),
        firstTokenP99Ms: Math.max(...points.map((point) => point.timeToFirstTokenMs.p99)),
        errors: points.reduce((sum, point) => sum + Object.values(point.errors).reduce((a, b) => a + b, 0), 0),
      });
      const iteration = summary(runs.iteration);
      const request = summary(runs.request);
      const [first, second] = runs.iteration;
      levels.push({
        workload,
        concurrency,
        iteration,
        request,
        ratio: iteration.tokensPerSecond / request.tokensPerSecond,
        control: second.tokensPerSecond / first.tokensPerSecond,
        runs,
      });
      console.log(render.level(levels.at(-1)));
    }
  }
  const verdicts = levels.map((level) => ({
    label:
      `${level.workload} K=${level.concurrency}: iteration ÷ request tokens/s ${level.ratio.toFixed(2)} ≥ ${AIM.tokensRatio}, ` +
      `p99 ITL ratio ${(level.iteration.interTokenP99Ms / level.request.interTokenP99Ms).toFixed(3)} ≤ ${AIM.interTokenP99Ratio}`,
    met:
      level.ratio >= AIM.tokensRatio &&
      level.iteration.interTokenP99Ms <= AIM.interTokenP99Ratio * level.request.interTokenP99Ms,
  }));
  const record = resultRecord('generation', flags, { settings, aim: AIM, levels, verdicts });
  console.log(`\n${render.summary(record)}`);
  await writeResult(flags.json, record);
  exitOnMissed(flags, verdicts);
} finally {
  for (const server of servers.values()) await server.stop();
  await rm(dir, { recursive: true, force: true });
}
