// What does serving the OCR pipeline give over reading images one at a time in process?
// The reference: readText() (the same stages and the three models with onnxruntime-node, one
// image after another) in a process of its own. Against it, the pipeline served by
// `batchserve serve` (ocr-det, ocr-cls, ocr-rec and ocr), sent the same images by POST
// /predictions/ocr at concurrency 1 and 16 in a closed loop, in rounds that alternate the two.
// Reference and server run on CPU 0, the client on CPU 1 (taskset, when present). Prints
// images/s, the ratios to the reference (medians over rounds), how many lines the recogniser
// ran per pass, and checks every answer reads the drawn text.
// Writes benchmarks/results/ocr-pipeline.json (see results.js for --quick, --json).
// Usage: npm run bench:ocr [-- --quick]
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { packOcrPipeline } from '../dist/examples/ocr/pipeline/pack.js';
import { serveOcr } from '../dist/examples/ocr/pipeline/serve-child.js';
import { loadOcrSessions, releaseOcrSessions } from '../dist/examples/ocr/src/models.js';
import { readText } from '../dist/examples/ocr/src/read-text.js';
import { renderTextPng } from '../dist/test/examples/ocr/render-text.js';
import { ocrPipeline } from './render.js';
import { ROOT, benchFlags, resultRecord, writeResult } from './results.js';

const CONCURRENCY = [1, 16];
const WORDS = ['Batchserve', 'HELLO2024', 'pipelines8', 'Invoice4096', 'QUEUE77', 'Recogniser', 'Tensor42', 'LATENCY9'];

/** Image i: three lines of words from the list, the middle one upside down in every other image. */
function drawnLines(i) {
  return [0, 1, 2].map((line) => ({
    text: WORDS[(i * 3 + line) % WORDS.length],
    x: 24,
    baseline: 48 + line * 60,
    size: 32,
    upsideDown: line === 1 && i % 2 === 1,
  }));
}

const images = (count) =>
  Array.from({ length: count }, (_, i) => ({
    png: renderTextPng(360, 200, drawnLines(i)),
    texts: drawnLines(i).map((line) => line.text),
  }));

const sameTexts = (read, expected) => read.length === expected.length && read.every((text, i) => text === expected[i]);

/** The reference, run in this process when the parent starts it as its child on CPU 0. */
async function inProcessChild(settings) {
  const sessions = await loadOcrSessions();
  const set = images(settings.images);
  for (const image of set.slice(0, 2)) await readText(image.png, sessions);
  let correct = 0;
  const started = performance.now();
  for (let pass = 0; pass < settings.passes; pass++) {
    for (const image of set) {
      const lines = await readText(image.png, sessions);
      if (
        sameTexts(
          lines.map((line) => line.text),
          image.texts,
        )
      )
        correct++;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  await releaseOcrSessions(sessions);
  const count = settings.images * settings.passes;
  process.stdout.write(`${JSON.stringify({ images: count, seconds, rate: count / seconds, correct })}\n`);
}

/**
 * Each measurement on connections of its own: the reference runs for many seconds between
 * them, long enough for the server to close idle keep-alive connections under a pooled client.
 */
async function withAgent(use) {
  const agent = new Agent();
  try {
    return await use(agent);
  } finally {
    await agent.close();
  }
}

const statsOf = (inference, model) =>
  withAgent(async (dispatcher) => {
    const response = await request(`${inference}/v2/models/${model}/stats`, { dispatcher });
    const [stats] = (await response.body.json()).model_stats;
    return { inferences: stats.inference_count, executions: stats.execution_count };
  });

/** `total` requests from `concurrency` workers, each sending its next image as soon as it has an answer. */
const closedLoop = (inference, set, concurrency, total) =>
  withAgent(async (dispatcher) => {
    let next = 0;
    let correct = 0;
    const worker = async () => {
      while (next < total) {
        const image = set[next++ % set.length];
        const response = await request(`${inference}/predictions/ocr`, {
          method: 'POST',
          headers: { 'content-type': 'image/png' },
          body: image.png,
          dispatcher,
        });
        const body = await response.body.json();
        if (response.statusCode !== 200) {
          throw new Error(`POST /predictions/ocr: ${response.statusCode} ${JSON.stringify(body)}`);
        }
        const texts = body.lines.map((line) => JSON.parse(line).text);
        if (sameTexts(texts, image.texts)) correct++;
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: concurrency }, worker));
    const seconds = (performance.now() - started) / 1000;
    return { images: total, seconds, rate: total / seconds, correct };
  });

/** readText over the images, in a process of its own on CPU 0. */
function inProcess(settings) {
  const script = fileURLToPath(import.meta.url);
  const [command, args] = settings.pinned
    ? ['taskset', ['-c', '0', process.execPath, script]]
    : [process.execPath, [script]];
  return JSON.parse(
    execFileSync(command, args, {
      env: { ...process.env, OCR_BENCH_CHILD: JSON.stringify(settings) },
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

async function main() {
  const flags = benchFlags('ocr-pipeline');
  // Rounds alternate the reference and the served runs, so a change in the machine's load
  // (it is shared) shows as a spread between rounds instead of skewing one side.
  const settings = {
    pinned: spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0,
    images: 16,
    passes: flags.quick ? 1 : 2,
    rounds: flags.quick ? 1 : 3,
  };
  if (settings.pinned) execFileSync('taskset', ['-cp', '1', String(process.pid)], { stdio: 'ignore' });
  const dir = await mkdtemp(join(tmpdir(), 'batchserve-ocr-bench-'));
  try {
    const archives = await packOcrPipeline(dir);
    const server = await serveOcr(ROOT, archives, { workDir: dir, ...(settings.pinned ? { cpus: '0' } : {}) });
    try {
      const { inference } = server.urls;
      const set = images(settings.images);
      await closedLoop(inference, set, Math.max(...CONCURRENCY), set.length);
      const rounds = [];
      for (let round = 1; round <= settings.rounds; round++) {
        const reference = inProcess(settings);
        const served = [];
        for (const concurrency of CONCURRENCY) {
          const before = await statsOf(inference, 'ocr-rec');
          const run = await closedLoop(inference, set, concurrency, settings.images * settings.passes);
          const after = await statsOf(inference, 'ocr-rec');
          served.push({
            concurrency,
            ...run,
            ratio: run.rate / reference.rate,
            recognizerRowsPerPass: (after.inferences - before.inferences) / (after.executions - before.executions),
          });
        }
        rounds.push({ round, reference, served });
      }
      const medians = CONCURRENCY.map((concurrency) => {
        const runs = rounds.map((each) => each.served.find((run) => run.concurrency === concurrency));
        return {
          concurrency,
          rate: median(runs.map((run) => run.rate)),
          ratio: median(runs.map((run) => run.ratio)),
          ratios: runs.map((run) => run.ratio),
        };
      });
      const record = resultRecord('ocr-pipeline', flags, {
        settings,
        linesPerImage: 3,
        rounds,
        medians: { referenceRate: median(rounds.map((each) => each.reference.rate)), served: medians },
      });
      console.log(ocrPipeline.render(record));
      await writeResult(flags.json, record);
    } finally {
      await server.stop();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

if (process.env.OCR_BENCH_CHILD) await inProcessChild(JSON.parse(process.env.OCR_BENCH_CHILD));
else await main();
