// Does JavaScript-side work for one model (image decoding and resizing in the image-classifier
// handler) stall the HTTP loop for another model? Serves the demo classifier and a tiny tensor
// model in one server, measures the tiny model's latency at concurrency 1 alone, then while 8
// clients send PNG images to the classifier, and prints the ratios — once with instances on
// the main thread and once in worker threads (runtime.thread).
// Writes benchmarks/results/event-loop-stall.json (see results.js for --quick, --json).
// Usage: npm run bench:stall [-- --quick]
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { PNG } from 'pngjs';
import { pino } from 'pino';
import { request } from 'undici';
import onnxProto from 'onnx-proto';
import { packArchive } from '../dist/src/archive/pack.js';
import { DEMO_MODEL_PATH } from '../dist/src/runtime/demo-model.js';
import { validateServerConfig } from '../dist/src/server/server-config.js';
import { startServer } from '../dist/src/server/server.js';
import { eventLoopStall } from './render.js';
import { benchFlags, resultRecord, writeResult } from './results.js';

const flags = benchFlags('event-loop-stall');
// --quick: a quarter of the requests.
const settings = {
  warmupRequests: flags.quick ? 50 : 200,
  requests: flags.quick ? 100 : 400,
  imageClients: 8,
  image: '1280×320',
};

const { onnx } = onnxProto;
const dir = await mkdtemp(join(tmpdir(), 'batchserve-stall-'));
const examples = new URL('../examples/orientation/', import.meta.url).pathname;
const tensor = { tensorType: { elemType: 1, shape: { dim: [{ dimParam: 'b' }, { dimValue: 4 }] } } };
await writeFile(
  join(dir, 'identity.onnx'),
  onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'identity',
      node: [{ opType: 'Identity', input: ['x'], output: ['y'] }],
      input: [{ name: 'x', type: tensor }],
      output: [{ name: 'y', type: tensor }],
    },
  }).finish(),
);
const photo = (() => {
  const image = new PNG({ width: 1280, height: 320 });
  for (let i = 0; i < image.data.length; i += 4) image.data.set([(i * 7) % 255, (i * 13) % 255, (i * 3) % 255, 255], i);
  return PNG.sync.write(image);
})();
const tinyBody = JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] });
const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))];

async function measure(thread) {
  const runtime = `runtime:\n  thread: ${thread}\n`;
  await writeFile(join(dir, 'tiny.yaml'), `max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 0\n${runtime}`);
  await writeFile(
    join(dir, 'orientation.yaml'),
    `${await readFile(join(examples, 'model-config.yaml'), 'utf8')}${runtime}`,
  );
  const common = { exportPath: dir, force: true };
  const tiny = await packArchive({
    modelName: 'tiny',
    serializedFile: join(dir, 'identity.onnx'),
    configFile: join(dir, 'tiny.yaml'),
    ...common,
  });
  const classifier = await packArchive({
    modelName: 'orientation',
    serializedFile: DEMO_MODEL_PATH,
    handler: 'image-classifier',
    configFile: join(dir, 'orientation.yaml'),
    extraFiles: [join(examples, 'labels.txt')],
    ...common,
  });
  const models = [`tiny=${tiny.path}`, `orientation=${classifier.path}`];
  const server = await startServer({
    config: validateServerConfig(
      { models, port: 0, management_port: 0, metrics_port: 0, auth: { enabled: false } },
      'bench',
    ),
    logger: pino({ level: 'silent' }),
  });
  const post = async (path, body, type) => {
    const response = await request(`${server.urls.inference}${path}`, {
      method: 'POST',
      headers: { 'content-type': type },
      body,
    });
    await response.body.dump();
  };
  const tinyLatencies = async (count) => {
    const latencies = [];
    for (let i = 0; i < count; i++) {
      const start = performance.now();
      await post('/v2/models/tiny/infer', tinyBody, 'application/json');
      latencies.push(performance.now() - start);
    }
    return latencies.sort((a, b) => a - b);
  };
  await tinyLatencies(settings.warmupRequests);
  const alone = await tinyLatencies(settings.requests);
  let loading = true;
  const clients = Array.from({ length: settings.imageClients }, async () => {
    while (loading) await post('/predictions/orientation', photo, 'image/png');
  });
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  const loaded = await tinyLatencies(settings.requests);
  loopDelay.disable();
  loading = false;
  await Promise.all(clients);
  await server.close();
  return { alone, loaded, loopDelay };
}

const record = resultRecord('event-loop-stall', flags, { settings, modes: [] });
console.log(eventLoopStall.header(record));
for (const thread of ['main', 'worker']) {
  const { alone, loaded, loopDelay } = await measure(thread);
  const mode = {
    thread,
    alone: { p50: pct(alone, 0.5), p99: pct(alone, 0.99) },
    loaded: { p50: pct(loaded, 0.5), p99: pct(loaded, 0.99) },
    ratio: { p50: pct(loaded, 0.5) / pct(alone, 0.5), p99: pct(loaded, 0.99) / pct(alone, 0.99) },
    loopDelay: { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 },
  };
  record.modes.push(mode);
  console.log(eventLoopStall.mode(mode, settings));
}
await writeResult(flags.json, record);
await rm(dir, { recursive: true, force: true });
