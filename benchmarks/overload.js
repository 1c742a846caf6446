// Does a full queue cost the requests it admits? Serves the demo model with a small queue
// (dynamic_batching.max_queue_size 8) on CPU 0 and drives it from CPU 1 (taskset, when
// present) with closed-loop clients: first at concurrency 1, 2, 4, … until goodput (2xx
// answers per second) rises by 5% or less twice in a row — the peak goodput is the best seen,
// the saturation concurrency the last that raised it by more — then at 4 × that concurrency,
// where most requests get 503. Admission is decided from the request line and headers, so a
// rejected request should cost the server little and wait for nothing. For JSON and for
// binary (Triton binary extension) bodies it prints the ratios the project aims at (AIMS
// below), each marked met or MISSED:
//   goodput at 4 × saturation ÷ peak goodput   ≥ 0.9
//   p99 latency of the 503 answers             ≤ 5 ms
// runLoad keeps latency for 2xx answers only, so the client here is a small closed loop over
// undici with a histogram per status; the bodies are the bench's own (randomPayload). A 503
// that arrives while undici is still sending the body ends that connection (undici resets a
// socket whose answer came before its request was written), so the next request reconnects.
// Writes benchmarks/results/overload.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:overload [-- --quick] [-- --check]
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { overload } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { CAN_PIN, serveChild } from './serve-child.js';

const MODEL = 'orientation';
const PROTOCOLS = ['v2-json', 'v2-binary'];
const AIMS = { goodputRatio: 0.9, rejectP99Ms: 5 };

if (process.argv[2] === '--client') {
  // The child that drives one run, pinned to CPU 1: --client '{"url", "protocol", …}'.
  process.stdout.write(JSON.stringify(await closedLoop(JSON.parse(process.argv[3]))));
  process.exit(0);
}

/**
 * `concurrency` connections, one request in flight on each, for `warmupMs` unmeasured then
 * `measureMs` measured: per status, the count and the latency (send to the end of the answer).
 */
async function closedLoop({ url, protocol, concurrency, warmupMs, measureMs }) {
  const { Client } = await import('undici');
  const { build } = await import('hdr-histogram-js');
  const { fetchModelMetadata, randomPayload } = await import('../dist/src/bench/payload.js');
  const payload = randomPayload(await fetchModelMetadata(url, MODEL), { protocol, clientBatch: 1, seed: 1 });
  const request = { path: payload.path, method: 'POST', headers: payload.headers, body: payload.body };
  const histograms = new Map();
  const errors = {};
  let measuring = false;
  let stopped = false;
  const record = (status, micros) => {
    let histogram = histograms.get(status);
    if (!histogram) {
      histogram = build({
        lowestDiscernibleValue: 1,
        highestTrackableValue: 60_000_000,
        numberOfSignificantValueDigits: 3,
      });
      histograms.set(status, histogram);
    }
    histogram.recordValue(Math.max(1, Math.round(micros)));
  };
  const loop = async (client) => {
    while (!stopped) {
      const sentAt = performance.now();
      try {
        const { statusCode, body } = await client.request(request);
        await body.arrayBuffer();
        if (measuring) record(statusCode, (performance.now() - sentAt) * 1000);
      } catch (error) {
        if (measuring) errors[error.code ?? 'other'] = (errors[error.code ?? 'other'] ?? 0) + 1;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
  };
  const clients = Array.from(
    { length: concurrency },
    () => new Client(new URL(url).origin, { pipelining: 1, headersTimeout: 0, bodyTimeout: 0 }),
  );
  const loops = clients.map(loop);
  await sleep(warmupMs);
  measuring = true;
  const start = performance.now();
  const cpuAtStart = process.cpuUsage();
  await sleep(measureMs);
  measuring = false;
  const seconds = (performance.now() - start) / 1000;
  const { user, system } = process.cpuUsage(cpuAtStart);
  stopped = true;
  // What is still in flight is not counted: destroying it keeps a stuck answer from hanging the run.
  await Promise.all(clients.map((client) => client.destroy()));
  await Promise.all(loops);
  const ms = (histogram, percentile) => Math.min(histogram.getValueAtPercentile(percentile), histogram.maxValue) / 1000;
  const statuses = Object.fromEntries(
    [...histograms].map(([status, histogram]) => [
      status,
      {
        count: histogram.totalCount,
        p50Ms: ms(histogram, 50),
        p99Ms: ms(histogram, 99),
        maxMs: histogram.maxValue / 1000,
      },
    ]),
  );
  // Near 1, the client's own core was the limit, not the server.
  return { seconds, statuses, errors, clientCpuShare: (user + system) / 1e6 / seconds };
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const flags = benchFlags('overload');
// --quick: shorter runs, and the search stops at concurrency 16.
const settings = {
  pinned: CAN_PIN,
  maxQueueSize: 8,
  riseAtLeastPct: 5,
  // Two doublings in a row that don't raise goodput end the search: one slow run on a busy
  // machine would otherwise stop it early.
  flatRuns: 2,
  searchUpTo: flags.quick ? 16 : 64,
  overloadFactor: 4,
  warmupMs: flags.quick ? 500 : 1000,
  measureMs: flags.quick ? 1500 : 5000,
};

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const { demoPackArgs, DEMO_EXAMPLES } = await import('./demo-archive.js');
const onCpu = (cpu, args) =>
  settings.pinned ? ['taskset', ['-c', String(cpu), process.execPath, ...args]] : [process.execPath, args];

/** Runs a child to its end; its stdout. */
function run([command, args]) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${command} exited ${code}`))));
  });
}

/** One closed-loop run from CPU 1, summed up. */
async function measureAt(url, protocol, concurrency) {
  const options = { url, protocol, concurrency, warmupMs: settings.warmupMs, measureMs: settings.measureMs };
  const { seconds, statuses, errors, clientCpuShare } = JSON.parse(
    await run(onCpu(1, [fileURLToPath(import.meta.url), '--client', JSON.stringify(options)])),
  );
  const count = (test) =>
    Object.entries(statuses).reduce((sum, [status, { count }]) => sum + (test(Number(status)) ? count : 0), 0);
  const answers = count(() => true) + Object.values(errors).reduce((sum, n) => sum + n, 0);
  const ok = count((status) => status >= 200 && status < 300);
  return {
    concurrency,
    goodput: ok / seconds,
    rejectedPerSecond: count((status) => status === 503) / seconds,
    rejectedShare: answers > 0 ? count((status) => status === 503) / answers : 0,
    ok: statuses['200'] ?? null,
    rejected: statuses['503'] ?? null,
    statuses,
    errors,
    clientCpuShare,
  };
}

/** The search for saturation, then the run at `overloadFactor` × it. */
async function overloadProtocol(url, protocol) {
  const search = [];
  let peak = 0;
  let saturation = 1;
  let flat = 0;
  for (let concurrency = 1; concurrency <= settings.searchUpTo && flat < settings.flatRuns; concurrency *= 2) {
    const point = await measureAt(url, protocol, concurrency);
    search.push(point);
    const rose = point.goodput > peak * (1 + settings.riseAtLeastPct / 100);
    peak = Math.max(peak, point.goodput);
    flat = rose ? 0 : flat + 1;
    if (rose) saturation = concurrency;
  }
  const overloaded = await measureAt(url, protocol, saturation * settings.overloadFactor);
  const goodputRatio = overloaded.goodput / peak;
  const rejectP99Ms = overloaded.rejected?.p99Ms ?? null;
  return {
    protocol,
    search,
    peakGoodput: peak,
    saturation,
    overloaded,
    goodputRatio,
    rejectP99Ms,
    verdicts: [
      { key: 'goodput', aim: `≥ ${AIMS.goodputRatio}`, met: goodputRatio >= AIMS.goodputRatio },
      // No 503 at all means the run never overloaded the queue: nothing was shown.
      {
        key: 'reject-p99',
        aim: `≤ ${AIMS.rejectP99Ms} ms`,
        met: rejectP99Ms !== null && rejectP99Ms <= AIMS.rejectP99Ms,
      },
    ],
  };
}

const dir = await mkdtemp(join(tmpdir(), 'batchserve-overload-'));
try {
  const config = parse(await readFile(join(DEMO_EXAMPLES, 'model-config.yaml'), 'utf8'));
  config.dynamic_batching.max_queue_size = settings.maxQueueSize;
  await writeFile(join(dir, 'model-config.yaml'), stringify(config));
  await run(onCpu(0, [bin, ...demoPackArgs({ exportPath: dir, configFile: join(dir, 'model-config.yaml') })]));
  const protocols = [];
  for (const protocol of PROTOCOLS) {
    // A fresh server per protocol, so neither inherits the other's queue or warm caches.
    const server = await serveChild({ name: MODEL, archive: join(dir, `${MODEL}.mar`), dir, pinned: settings.pinned });
    try {
      protocols.push(await overloadProtocol(server.urls.inference, protocol));
    } finally {
      await server.stop();
    }
  }
  const record = resultRecord('overload', flags, { settings, protocols });
  console.log(overload.render(record));
  await writeResult(flags.json, record);
  exitOnMissed(
    flags,
    protocols.flatMap(({ protocol, verdicts }) =>
      verdicts.map(({ key, aim, met }) => ({ label: `${protocol} ${key} ${aim}`, met })),
    ),
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
