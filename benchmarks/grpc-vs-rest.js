// Does gRPC cost the demo model more than REST? Serves the demo orientation classifier
// (max_queue_delay 0, so a request at concurrency 1 never waits for company; one intra-op
// thread, so the whole server stays where taskset puts it) on CPU 0 and
// drives it from CPU 1 (taskset, when present) with the bench's own client (runLoad) in a child
// process: REST with the Triton binary extension (v2-binary), unary gRPC ModelInfer with
// raw_input_contents (grpc) and ModelStreamInfer (grpc-stream), each sending the same random
// 1×3×48×192 FP32 row. Each round runs every protocol at concurrency 16 (throughput) and 1 (p50),
// the protocols' order rotating from round to round; a ratio is the median over rounds of
// that round's gRPC figure ÷ its REST figure. Aims (AIMS below), each marked met or MISSED:
//   grpc throughput at concurrency 16 ÷ v2-binary's   ≥ 1.0
//   grpc p50 at concurrency 1 ÷ v2-binary's           ≤ 1.1
// grpc-stream's ratios are printed beside them. Each run also reports the CPU per request of
// the server (its process over the whole run, warm-up included, against the requests its
// statistics counted) and of the client (over the measured windows), which say where a
// difference comes from.
// Writes benchmarks/results/grpc-vs-rest.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:grpc [-- --quick] [-- --check]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { grpcVsRest } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, writeResult } from './results.js';
import { CAN_PIN, serveChild } from './serve-child.js';

const MODEL = 'orientation';
const PROTOCOLS = ['v2-binary', 'grpc', 'grpc-stream'];
const AIMS = { throughputRatio: 1.0, p50Ratio: 1.1 };
const LEVELS = { throughput: 16, latency: 1 };

if (process.argv[2] === '--client') {
  // The child that drives one run, pinned to CPU 1: --client '{"urls", "protocol", …}'.
  process.stdout.write(JSON.stringify(await drive(JSON.parse(process.argv[3]))));
  process.exit(0);
}

/** One closed-loop run with runLoad; the client's CPU is counted over the measured windows only. */
async function drive({ urls, protocol, concurrency, warmupMs, windowMs, windows }) {
  const { runLoad } = await import('../dist/src/bench/load-generator.js');
  const { fetchModelMetadata, randomPayload } = await import('../dist/src/bench/payload.js');
  const payload = randomPayload(await fetchModelMetadata(urls.inference, MODEL), { protocol, clientBatch: 1, seed: 1 });
  let cpuAtStart;
  const result = await runLoad(protocol.startsWith('grpc') ? urls.grpc : urls.inference, payload, {
    level: { kind: 'concurrency', concurrency },
    warmupMs,
    windowMs,
    minWindows: windows,
    maxWindows: windows,
    stabilityPct: 0,
    requestTimeoutMs: 60_000,
    onMeasureStart: async () => {
      cpuAtStart = process.cpuUsage();
    },
  });
  const { user, system } = process.cpuUsage(cpuAtStart);
  return {
    throughput: result.throughput,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests,
    errors: result.errors,
    clientCpuUs: (user + system) / result.requests,
  };
}

const flags = benchFlags('grpc-vs-rest');
// --quick: half-second windows, two of them; still three rounds.
const settings = {
  pinned: CAN_PIN,
  rounds: 3,
  levels: LEVELS,
  warmupMs: flags.quick ? 500 : 1000,
  windowMs: flags.quick ? 500 : 1000,
  windows: flags.quick ? 2 : 4,
};

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const { demoPackArgs, DEMO_EXAMPLES } = await import('./demo-archive.js');
const onCpu = (cpu, args) =>
  settings.pinned ? ['taskset', ['-c', String(cpu), process.execPath, ...args]] : [process.execPath, args];
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

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

/** The server process's CPU time so far, in µs (all its threads: /proc/PID/stat utime + stime). */
async function serverCpuUs(pid) {
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  const ticksPerSecond = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;
  return ((Number(fields[11]) + Number(fields[12])) / ticksPerSecond) * 1e6;
}

/** The CPUs the server's threads may run on, each list once: "0" alone when the pinning holds. */
async function threadCpus(pid) {
  const tasks = await readdir(`/proc/${pid}/task`);
  const lists = await Promise.all(
    tasks.map(
      async (task) =>
        /Cpus_allowed_list:\s*(\S+)/.exec(await readFile(`/proc/${pid}/task/${task}/status`, 'utf8'))?.[1],
    ),
  );
  return [...new Set(lists)].sort();
}

async function answered(urls) {
  const stats = await (await fetch(`${urls.inference}/v2/models/${MODEL}/stats`)).json();
  return stats.model_stats.reduce((sum, model) => sum + model.inference_stats.success.count, 0);
}

/** One run from CPU 1, with the server's CPU per request over it. */
async function measure(server, round, protocol, concurrency) {
  const { warmupMs, windowMs, windows } = settings;
  const options = { urls: server.urls, protocol, concurrency, warmupMs, windowMs, windows };
  const [cpuBefore, answeredBefore] = [await serverCpuUs(server.pid), await answered(server.urls)];
  const result = JSON.parse(await run(onCpu(1, [fileURLToPath(import.meta.url), '--client', JSON.stringify(options)])));
  const [cpuAfter, answeredAfter] = [await serverCpuUs(server.pid), await answered(server.urls)];
  return {
    round,
    protocol,
    concurrency,
    ...result,
    serverCpuUs: (cpuAfter - cpuBefore) / (answeredAfter - answeredBefore),
  };
}

const dir = await mkdtemp(join(tmpdir(), 'batchserve-grpc-vs-rest-'));
const record = resultRecord('grpc-vs-rest', flags, { settings, runs: [], medians: [], ratios: [] }, [
  '@grpc/grpc-js',
  'undici',
]);
let server;
try {
  const config = parse(await readFile(join(DEMO_EXAMPLES, 'model-config.yaml'), 'utf8'));
  config.dynamic_batching.max_queue_delay = 0;
  // onnxruntime pins the threads of its intra-op pool to cores of its own choosing, whatever
  // taskset said: with the default pool the forward pass ran on CPU 1, beside the client.
  config.runtime = { ...config.runtime, intra_op_threads: 1 };
  await writeFile(join(dir, 'model-config.yaml'), stringify(config));
  await run(onCpu(0, [bin, ...demoPackArgs({ exportPath: dir, configFile: join(dir, 'model-config.yaml') })]));
  server = await serveChild({ name: MODEL, archive: join(dir, `${MODEL}.mar`), dir, pinned: settings.pinned });
  record.settings.serverThreadCpus = await threadCpus(server.pid);
  console.log(grpcVsRest.header(record));
  for (let round = 1; round <= settings.rounds; round++) {
    const order = PROTOCOLS.map((_, index) => PROTOCOLS[(index + round - 1) % PROTOCOLS.length]);
    for (const protocol of order) {
      for (const concurrency of [LEVELS.throughput, LEVELS.latency]) {
        const entry = await measure(server, round, protocol, concurrency);
        record.runs.push(entry);
        console.log(grpcVsRest.run(entry));
      }
    }
  }
  const runOf = (round, protocol, concurrency) =>
    record.runs.find((each) => each.round === round && each.protocol === protocol && each.concurrency === concurrency);
  for (const protocol of PROTOCOLS) {
    const at = (concurrency, key) =>
      median(
        record.runs
          .filter((each) => each.protocol === protocol && each.concurrency === concurrency)
          .map((each) => each[key]),
      );
    record.medians.push({
      protocol,
      throughput: at(LEVELS.throughput, 'throughput'),
      p50Ms: at(LEVELS.latency, 'p50Ms'),
      serverCpuUs: { throughput: at(LEVELS.throughput, 'serverCpuUs'), latency: at(LEVELS.latency, 'serverCpuUs') },
      clientCpuUs: { throughput: at(LEVELS.throughput, 'clientCpuUs'), latency: at(LEVELS.latency, 'clientCpuUs') },
    });
    if (protocol === 'v2-binary') continue;
    const rounds = Array.from({ length: settings.rounds }, (_, index) => index + 1);
    const throughputRatios = rounds.map(
      (round) =>
        runOf(round, protocol, LEVELS.throughput).throughput / runOf(round, 'v2-binary', LEVELS.throughput).throughput,
    );
    const p50Ratios = rounds.map(
      (round) => runOf(round, protocol, LEVELS.latency).p50Ms / runOf(round, 'v2-binary', LEVELS.latency).p50Ms,
    );
    const throughputRatio = median(throughputRatios);
    const p50Ratio = median(p50Ratios);
    record.ratios.push({
      protocol,
      throughputRatio,
      throughputRatios,
      p50Ratio,
      p50Ratios,
      verdicts: [
        { key: 'throughput', aim: `≥ ${AIMS.throughputRatio}`, met: throughputRatio >= AIMS.throughputRatio },
        { key: 'p50', aim: `≤ ${AIMS.p50Ratio}`, met: p50Ratio <= AIMS.p50Ratio },
      ],
    });
  }
  console.log(grpcVsRest.summary(record));
  await writeResult(flags.json, record);
  // The aims are gRPC's (unary ModelInfer); grpc-stream's ratios are for comparison.
  exitOnMissed(
    flags,
    record.ratios
      .filter(({ protocol }) => protocol === 'grpc')
      .flatMap(({ protocol, verdicts }) =>
        verdicts.map(({ key, aim, met }) => ({ label: `${protocol} ${key} ${aim}`, met })),
      ),
  );
} finally {
  await server?.stop();
  await rm(dir, { recursive: true, force: true });
}
