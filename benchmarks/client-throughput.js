// How fast is the bench's own client? Drives a trivial endpoint (a plain node:http server in
// a child process answering 200 "ok") at concurrency 64 for ~5 s with our runLoad, with
// autocannon and with wrk when it is installed, and prints each one's req/s, the client CPU
// it spent per request, and the ratios. The server runs on CPU 0 and every client on CPU 1
// (taskset), so a client that needs more CPU per request shows up as fewer requests per
// second once it, not the server, is the limit. The Node clients warm up for 1 s first (JIT,
// undici's WebAssembly parser) and req/s counts the steady 5 s after it; CPU per request is
// the client's CPU time over the requests the server counted during the whole run. The
// clients take turns for ROUNDS rounds and the medians are compared, so a burst of other work
// on the machine moves one figure, not the verdict. Targets: ours ≥ autocannon, ≥ 0.6 × wrk.
// Writes benchmarks/results/client-throughput.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:client [-- --quick] [-- --check]
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { clientThroughput } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, ROOT as root, writeResult } from './results.js';

const CONCURRENCY = 64;
const BODY = '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}';

if (process.argv[2] === '--ours') {
  // The child that runs our client, pinned like the other clients: --ours URL SECONDS WARMUP.
  const { runLoad } = await import('../dist/src/bench/load-generator.js');
  const [url, seconds, warmupSeconds] = [process.argv[3], Number(process.argv[4]), Number(process.argv[5])];
  const result = await runLoad(
    url,
    {
      protocol: 'v2-json',
      path: '/',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(BODY),
      rows: 1,
    },
    {
      level: { kind: 'concurrency', concurrency: CONCURRENCY },
      warmupMs: warmupSeconds * 1000,
      windowMs: 1000,
      minWindows: seconds,
      maxWindows: seconds,
      stabilityPct: 0,
      requestTimeoutMs: 10_000,
    },
  );
  process.stdout.write(JSON.stringify(result));
  process.exit(0);
}

const flags = benchFlags('client-throughput');
// --quick: one round of 2 s runs.
const [SECONDS, WARMUP_SECONDS, ROUNDS] = flags.quick ? [2, 1, 1] : [5, 1, 3];

// GET /count answers how many requests the server has answered, for CPU per request.
const SERVER = `
let answered = 0;
const server = require('node:http').createServer((req, res) => {
  if (req.url === '/count') return res.end(String(answered));
  req.resume();
  req.on('end', () => {
    answered++;
    res.end('ok');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

const has = (command) => {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
const pinned = has('taskset') && cpus().length >= 2;
const onCpu = (cpu, command, args) => (pinned ? ['taskset', ['-c', String(cpu), command, ...args]] : [command, args]);
const answered = async (url) => Number(await (await fetch(`${url}count`)).text());
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Runs a client to completion; bash's `time` reports the CPU seconds it used (user + system). */
function run(command, args) {
  return new Promise((resolve, reject) => {
    const timed = ['-c', 'TIMEFORMAT="cpu %U %S"; time "$@"', 'bash', command, ...args];
    const child = spawn('bash', timed, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.stderr.on('data', (chunk) => (err += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const cpu = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(err);
      if (code !== 0 || !cpu) reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${err}`));
      else resolve({ out, cpuSeconds: Number(cpu[1]) + Number(cpu[2]) });
    });
  });
}

/** Each client's run: steady requests/s and a note; the CPU it used comes with `run`. */
const clients = {
  'ours (runLoad)': async (url) => {
    const child = await run(
      ...onCpu(1, process.execPath, [
        join(root, 'benchmarks/client-throughput.js'),
        '--ours',
        url,
        String(SECONDS),
        String(WARMUP_SECONDS),
      ]),
    );
    const result = JSON.parse(child.out);
    const note = `p99 ${result.latency.p99.toFixed(1)} ms, errors ${result.errorCount}`;
    return { child, rate: result.requests / result.durationSeconds, note };
  },
  autocannon: async (url) => {
    const args = ['-c', String(CONCURRENCY), '-d', String(SECONDS), '--json', '-m', 'POST'];
    args.push('-W', '[', '-c', String(CONCURRENCY), '-d', String(WARMUP_SECONDS), ']');
    args.push('-H', 'content-type=application/json', '-b', BODY, url);
    const child = await run(...onCpu(1, join(root, 'node_modules/.bin/autocannon'), args));
    // With a warm-up, autocannon prints the warm-up's JSON line first.
    const result = JSON.parse(child.out.trim().split('\n').at(-1));
    const note = `p99 ${result.latency.p99} ms, errors ${result.errors + result.non2xx}`;
    return { child, rate: result.requests.total / result.duration, note };
  },
  wrk: async (url, tmp) => {
    const script = join(tmp, 'post.lua');
    const lua = `wrk.method = "POST"\nwrk.body = '${BODY}'\nwrk.headers["Content-Type"] = "application/json"\n`;
    await writeFile(script, lua);
    const child = await run(
      ...onCpu(1, 'wrk', ['-t1', `-c${CONCURRENCY}`, `-d${SECONDS}s`, '--latency', '-s', script, url]),
    );
    const [, total, seconds] = /(\d+) requests in ([\d.]+)s/.exec(child.out) ?? [];
    const p99 = /99%\s+(\S+)/.exec(child.out)?.[1];
    return { child, rate: Number(total) / Number(seconds), note: `p99 ${p99}` };
  },
};
if (!has('wrk')) delete clients.wrk;

const server = spawn(...onCpu(0, process.execPath, ['-e', SERVER]), { stdio: ['ignore', 'pipe', 'inherit'] });
const port = await new Promise((resolve, reject) => {
  server.stdout.once('data', (chunk) => resolve(Number(String(chunk).trim())));
  server.once('error', reject);
});
const url = `http://127.0.0.1:${port}/`;
const tmp = await mkdtemp(join(tmpdir(), 'batchserve-client-bench-'));
const record = resultRecord(
  'client-throughput',
  flags,
  {
    settings: {
      concurrency: CONCURRENCY,
      seconds: SECONDS,
      warmupSeconds: WARMUP_SECONDS,
      rounds: ROUNDS,
      bodyBytes: BODY.length,
      pinned,
      wrk: clients.wrk !== undefined,
    },
    runs: [],
    medians: [],
    targets: [],
  },
  ['undici', 'autocannon'],
);
try {
  console.log(clientThroughput.header(record));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [client, measure] of Object.entries(clients)) {
      const before = await answered(url);
      const { child, rate, note } = await measure(url, tmp);
      const cpuUs = (child.cpuSeconds / ((await answered(url)) - before)) * 1e6;
      const entry = { round, client, rate, cpuUs, note };
      record.runs.push(entry);
      console.log(clientThroughput.run(entry));
    }
  }
  for (const client of Object.keys(clients)) {
    const runs = record.runs.filter((entry) => entry.client === client);
    const rate = median(runs.map((entry) => entry.rate));
    record.medians.push({ client, rate, cpuUs: median(runs.map((entry) => entry.cpuUs)) });
  }
  const medianOf = (client) => record.medians.find((each) => each.client === client);
  const ours = medianOf('ours (runLoad)');
  for (const [reference, target] of [
    ['autocannon', 1],
    ['wrk', 0.6],
  ]) {
    const other = medianOf(reference);
    if (!other) continue;
    const ratio = ours.rate / other.rate;
    record.targets.push({ reference, target, ratio, cpuRatio: ours.cpuUs / other.cpuUs, met: ratio >= target });
  }
  console.log(clientThroughput.summary(record));
  await writeResult(flags.json, record);
  exitOnMissed(
    flags,
    record.targets.map(({ reference, target, met }) => ({ label: `ours / ${reference} ≥ ${target}`, met })),
  );
} finally {
  server.kill();
  await rm(tmp, { recursive: true, force: true });
}
