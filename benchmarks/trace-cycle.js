// Where a batch cycle's time goes on the simulated accelerator: one `serve` child on CPU 0
// with the batcher's diagnostics channels recorded (trace-batches.js), a closed loop of K
// clients on CPU 1 for a few seconds, then, averaged over the cycles of one instance:
//   dispatch → the instance starts it (the hop there, or the wait behind the batch before it),
//   start → end (the device), end → the batcher hears of it (the hop back), → its last answer
//   written, and end → the next batch starts on that instance (the instance idle); then, from
//   the batcher hearing of a batch, when the requests that form the next arrived and it left.
// Usage: node benchmarks/trace-cycle.js [--concurrency 16] [--delay auto|0|2000] [--instances 1] [--seconds 3]
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import { writeIdentityModel } from './identity-model.js';
import { serveChild } from './serve-child.js';

const { values } = parseArgs({
  options: {
    concurrency: { type: 'string', default: '16' },
    delay: { type: 'string', default: 'auto' },
    instances: { type: 'string', default: '1' },
    seconds: { type: 'string', default: '3' },
    thread: { type: 'string', default: 'worker' },
  },
});
const concurrency = Number(values.concurrency);
const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const preload = fileURLToPath(new URL('./trace-batches.js', import.meta.url));
const { runLoad } = await import('../dist/src/bench/load-generator.js');
const { plainHttpPayload } = await import('../dist/src/bench/plain-http.js');
const { SERVING_NODE_FLAGS } = await import('../dist/src/core/serving-node-flags.js');

const dir = await mkdtemp(join(tmpdir(), 'batchserve-trace-'));
try {
  spawnSync('taskset', ['-a', '-p', '-c', '1-1023', String(process.pid)], { stdio: 'ignore' });
  await writeIdentityModel(join(dir, 'id.onnx'));
  const delay = values.delay === 'auto' ? 'auto' : Number(values.delay);
  await writeFile(
    join(dir, 'config.yaml'),
    stringify({
      max_batch_size: 32,
      instances: [{ count: Number(values.instances), device: 'sim' }],
      runtime: { thread: values.thread },
      dynamic_batching: { max_queue_delay: delay, max_latency: '100ms', max_queue_size: 4096 },
    }),
  );
  spawnSync(
    process.execPath,
    [
      bin,
      'model-archive',
      'pack',
      '--model-name',
      'sim',
      '--serialized-file',
      join(dir, 'id.onnx'),
      '--config-file',
      join(dir, 'config.yaml'),
      '--export-path',
      dir,
    ],
    { stdio: 'inherit' },
  );
  const traceFile = join(dir, 'trace.jsonl');
  const server = await serveChild({
    name: 'sim',
    archive: join(dir, 'sim.mar'),
    dir,
    pinned: true,
    nodeFlags: [...SERVING_NODE_FLAGS, '--import', preload],
    env: { BATCHSERVE_TRACE_FILE: traceFile },
  });
  const body = JSON.stringify({
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) }],
  });
  await writeFile(join(dir, 'body.json'), body);
  const url = `${server.urls.inference}/v2/models/sim/infer`;
  const payload = await plainHttpPayload(url, join(dir, 'body.json'), 'application/json', 1);
  const result = await runLoad(url, payload, {
    level: { kind: 'concurrency', concurrency },
    warmupMs: 500,
    windowMs: Number(values.seconds) * 1000,
    minWindows: 1,
    maxWindows: 1,
    stabilityPct: 0,
    requestTimeoutMs: 60_000,
    workers: 1,
  });
  await server.stop();
  const events = (await readFile(traceFile, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));
  analyse(events, result);
} finally {
  await rm(dir, { recursive: true, force: true });
}

function analyse(events, result) {
  // The middle half of the run: no start-up, no wind-down.
  const from = events[Math.floor(events.length / 4)].at;
  const to = events[Math.floor((events.length * 3) / 4)].at;
  const instance = events.find((event) => event.kind === 'answered')?.instance;
  const dispatches = events.filter((e) => e.kind === 'dispatched' && e.instance === instance);
  const answers = events.filter((e) => e.kind === 'answered' && e.instance === instance);
  const written = events.filter((e) => e.kind === 'written');
  const queued = events.filter((e) => e.kind === 'queued');
  const cycles = [];
  for (let index = 0; index + 1 < answers.length; index++) {
    const answer = answers[index];
    if (answer.at < from || answer.at > to) continue;
    const dispatch = dispatches[index];
    const next = answers[index + 1];
    const lastWritten = written.filter((w) => w.at >= answer.at && w.at < next.at).at(-1);
    const deviceEnd = answer.startedAt + answer.computeMs;
    const nextDispatch = dispatches[index + 1];
    const arrivals = queued.filter((q) => q.at >= answer.at && q.at <= nextDispatch.at);
    cycles.push({
      rows: answer.rows,
      toStart: answer.startedAt - dispatch.at,
      device: answer.computeMs,
      hopBack: answer.at - deviceEnd,
      toWritten: lastWritten ? lastWritten.at - answer.at : 0,
      idle: next.startedAt - deviceEnd,
      arrivals: arrivals.length,
      firstArrival: arrivals.length ? arrivals[0].at - answer.at : 0,
      lastArrival: arrivals.length ? arrivals.at(-1).at - answer.at : 0,
      toDispatch: nextDispatch.at - answer.at,
      queuedBehind: dispatch.queuedBehind,
    });
  }
  const mean = (key) => cycles.reduce((sum, cycle) => sum + cycle[key], 0) / cycles.length;
  const behind = cycles.filter((cycle) => cycle.queuedBehind).length;
  console.log(
    `K=${concurrency} delay ${values.delay} × ${values.instances} (${values.thread} thread): ${result.throughput.toFixed(0)} req/s, p50 ${result.latency.p50.toFixed(2)} ms`,
  );
  console.log(
    `${cycles.length} cycles of ${instance}: batch ${mean('rows').toFixed(1)} rows, ${behind} sent while another ran`,
  );
  console.log(
    `  dispatch → start ${mean('toStart').toFixed(3)} ms   device ${mean('device').toFixed(3)} ms   end → batcher ${mean('hopBack').toFixed(3)} ms`,
  );
  console.log(
    `  batcher → last answer written ${mean('toWritten').toFixed(3)} ms   device idle between batches ${mean('idle').toFixed(3)} ms`,
  );
  console.log(
    `  from the batcher hearing of a batch: ${mean('arrivals').toFixed(1)} arrivals before the next dispatch, the first at ${mean('firstArrival').toFixed(3)} ms, ` +
      `the last at ${mean('lastArrival').toFixed(3)} ms; the next dispatch at ${mean('toDispatch').toFixed(3)} ms`,
  );
}
