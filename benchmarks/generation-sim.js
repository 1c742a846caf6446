// generation.js, part 2: does iteration-level ("continuous") batching beat whole-request
// batching? Judged on the simulated accelerator: the test suite's generated decoder (exact,
// tiny) on device `sim`, each decoding step held to T = c + m·tokens of wall time (c = 8 ms,
// m = 0.1 ms a token fed) without CPU, so this 2-core machine's noise barely touches it. 16
// sequences decode together (max_active_sequences), answers have no end token, so each is
// exactly its max_tokens long, drawn from 8–256: uniformly, and log-uniformly (most short, a
// few long, as real answers are). A closed loop of K streaming clients (bench --openai
// completions). One `serve` child per scheduling (iteration, request), both on CPU 0, the
// client on CPU 1; each level runs iteration, request, request, iteration (A B B A),
// iteration's two runs are the control (how far one configuration lands from itself).
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { serveChild } from './serve-child.js';
import { packSimArchive } from './sim-archive.js';

const { decoderModel } = await import('../dist/test/fixtures/onnx-models.js');
const { TEXT_VOCAB, wordPieceTokenizer } = await import('../dist/test/fixtures/text-tokenizer.js');
const { runOpenAiLoad } = await import('../dist/src/bench/openai-load.js');

/** The simulated step's cost, the rows decoded together, the answers' lengths. */
export const SIM = { cost: { cMs: 8, mMs: 0.1 }, activeSequences: 16, tokens: [8, 256] };
const SCHEDULINGS = ['iteration', 'request'];

async function packArchives(dir) {
  await mkdir(dir, { recursive: true });
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
      cost: SIM.cost,
      config: {
        max_batch_size: SIM.activeSequences,
        text: { tokenizer_file: 'tokenizer.json' },
        generation: {
          scheduling,
          max_active_sequences: SIM.activeSequences,
          max_new_tokens: SIM.tokens[1],
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
async function measure(server, settings, concurrency, workload) {
  const [point] = await runOpenAiLoad({
    url: server.urls.inference,
    model: 'writer',
    api: 'completions',
    concurrency: [concurrency],
    maxTokens: SIM.tokens,
    distribution: workload,
    prompt: 'hello',
    warmupMs: settings.warmupMs,
    durationMs: settings.durationMs,
    seed: 7,
  });
  return point;
}

/** Every workload × K level, A B B A; `log` hears each level as it ends. */
export async function measureSim(settings, { dir, pinned, log }) {
  const archives = await packArchives(join(dir, 'sim'));
  const servers = new Map();
  try {
    for (const scheduling of SCHEDULINGS) {
      servers.set(scheduling, await serveChild({ name: 'writer', archive: archives.get(scheduling), dir, pinned }));
    }
    const levels = [];
    for (const workload of settings.workloads) {
      for (const concurrency of settings.concurrency) {
        const runs = { iteration: [], request: [] };
        for (const scheduling of ['iteration', 'request', 'request', 'iteration']) {
          runs[scheduling].push(await measure(servers.get(scheduling), settings, concurrency, workload));
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
        log(levels.at(-1));
      }
    }
    return levels;
  } finally {
    for (const server of servers.values()) await server.stop();
  }
}
