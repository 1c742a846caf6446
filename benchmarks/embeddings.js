// Does the server keep a text encoder as busy as calling it in process would? Judged on the
// simulated accelerator: the test suite's generated encoder and WordPiece tokenizer with the
// text-embedding handler on device `sim`, each pass of B texts held to T(B) = c + m·B of wall
// time (c = 4 ms, m = 0.25 ms) in its instance's thread. In process: the handler's whole
// lifecycle (tokenize, pad, pass, pool) on full batches of max_batch_size, back to back; that is
// the most the device allows at that size. Served: 16 clients in a closed loop, each sending one
// text a request to /v1/embeddings (bench --openai embeddings), with max_batch_size 16 (the
// loop's whole population in one batch) and 8 (two batches, one forming while one runs), each
// under two queue delays. The serving child is on CPU 0, this process on CPU 1; in process runs
// before and after the served runs (its two figures are the control).
// Aim: served texts/s ÷ in-process texts/s (same max_batch_size) ≥ 0.9 at concurrency 16.
// Writes benchmarks/results/embeddings.json (results.js: --quick, --check, --json).
// Usage: npm run bench:embeddings [-- --quick] [-- --check]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embeddings as render } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { CAN_PIN, pinSelfOffServerCpu, serveChild } from './serve-child.js';
import { packSimArchive } from './sim-archive.js';

const flags = benchFlags('embeddings');
const { textEncoderModel } = await import('../dist/test/fixtures/onnx-models.js');
const { TEXT_VOCAB, wordPieceTokenizer } = await import('../dist/test/fixtures/text-tokenizer.js');
const { runOpenAiLoad } = await import('../dist/src/bench/openai-load.js');
const { openInstance } = await import('../dist/src/runtime/open-instance.js');
const { runBatch } = await import('../dist/src/handlers/lifecycle.js');
const { readModelConfigFile } = await import('../dist/src/config/load.js');

const COST = { cMs: 4, mMs: 0.25 };
const BATCHES = [16, 8];
const CONCURRENCY = 16;
const TEXT = 'the cat runs, the dog runs';
const DELAYS = ['0', '2ms'];
const AIM = { served: 0.9 };
const settings = {
  pinned: CAN_PIN,
  cost: COST,
  batches: BATCHES,
  concurrency: CONCURRENCY,
  delays: DELAYS,
  warmupMs: flags.quick ? 500 : 2000,
  durationMs: flags.quick ? 2000 : 8000,
};

function packArchive(dir, batch, delay) {
  return packSimArchive({
    out: join(dir, `b${batch}-delay-${delay}`),
    modelName: 'encoder',
    model: join(dir, 'encoder.onnx'),
    cost: COST,
    config: {
      max_batch_size: batch,
      dynamic_batching: { max_queue_delay: delay },
      text: { tokenizer_file: 'tokenizer.json' },
    },
    handler: 'text-embedding',
    extraFiles: [join(dir, 'tokenizer.json')],
  });
}

/** The handler's whole lifecycle on full batches, back to back, on this thread: texts a second. */
async function inProcess(dir, config, batch) {
  const tokenizer = JSON.stringify(wordPieceTokenizer());
  const opened = await openInstance({
    modelName: 'encoder',
    modelVersion: '1',
    modelPath: join(dir, 'encoder.onnx'),
    modelSource: 'encoder.onnx',
    handler: 'text-embedding',
    config: await readModelConfigFile(config),
    configSource: config,
    labels: undefined,
    tokenizer,
    device: 'sim',
  });
  const requests = Array.from({ length: batch }, () => ({
    body: Buffer.from(JSON.stringify([TEXT])),
    contentType: 'application/json',
  }));
  const run = async (ms) => {
    let texts = 0;
    const started = performance.now();
    while (performance.now() - started < ms) {
      await runBatch(opened.handler, requests, opened.context);
      texts += batch;
    }
    return texts / ((performance.now() - started) / 1000);
  };
  await run(settings.warmupMs);
  const rate = await run(settings.durationMs);
  await opened.session.release();
  return rate;
}

if (settings.pinned) pinSelfOffServerCpu();
const dir = await mkdtemp(join(tmpdir(), 'batchserve-embeddings-'));
try {
  await writeFile(join(dir, 'encoder.onnx'), textEncoderModel(TEXT_VOCAB.length, 4));
  await writeFile(join(dir, 'tokenizer.json'), JSON.stringify(wordPieceTokenizer()));
  const packed = [];
  for (const batch of BATCHES) {
    for (const delay of DELAYS) packed.push({ batch, delay, ...(await packArchive(dir, batch, delay)) });
  }
  const configOf = (batch) => packed.find((entry) => entry.batch === batch).config;
  const before = new Map();
  for (const batch of BATCHES) before.set(batch, await inProcess(dir, configOf(batch), batch));
  const served = [];
  for (const { batch, delay, archive } of packed) {
    const server = await serveChild({ name: 'encoder', archive, dir, pinned: settings.pinned });
    try {
      const [point] = await runOpenAiLoad({
        url: server.urls.inference,
        model: 'encoder',
        api: 'embeddings',
        concurrency: [CONCURRENCY],
        maxTokens: [1, 1],
        prompt: TEXT,
        warmupMs: settings.warmupMs,
        durationMs: settings.durationMs,
        seed: 1,
      });
      served.push({
        batch,
        delay,
        textsPerSecond: point.requestsPerSecond,
        p50Ms: point.latencyMs.p50,
        p99Ms: point.latencyMs.p99,
        errors: Object.values(point.errors).reduce((sum, count) => sum + count, 0),
      });
    } finally {
      await server.stop();
    }
  }
  const inProcessFigures = [];
  for (const batch of BATCHES) {
    const after = await inProcess(dir, configOf(batch), batch);
    const first = before.get(batch);
    inProcessFigures.push({ batch, before: first, after, limit: (first + after) / 2, control: after / first });
  }
  const limitOf = (batch) => inProcessFigures.find((figures) => figures.batch === batch).limit;
  const levels = served.map((point) => ({ ...point, ratio: point.textsPerSecond / limitOf(point.batch) }));
  const best = Math.max(...levels.map((level) => level.ratio));
  const verdicts = [
    {
      label: `served ÷ in process (same max_batch_size) at concurrency ${CONCURRENCY} ≥ ${AIM.served}, best configuration`,
      met: best >= AIM.served,
    },
  ];
  const record = resultRecord('embeddings', flags, {
    settings,
    aim: AIM,
    inProcess: inProcessFigures,
    served: levels,
    verdicts,
  });
  console.log(render.render(record));
  await writeResult(flags.json, record);
  exitOnMissed(flags, verdicts);
} finally {
  await rm(dir, { recursive: true, force: true });
}
