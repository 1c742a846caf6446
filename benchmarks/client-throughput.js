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
// Usage: npm run bench:client
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { cpus, release, tmpdir } from 'node:os';
import { join } from 'node:path';

const CONCURRENCY = 64;
const SECONDS = 5;
const WARMUP_SECONDS = 1;
const ROUNDS = 3;
const BODY = '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}';
const root = new URL('../', import.meta.url).pathname;

if (process.argv[2] === '--ours') {
  // The child that runs our client, pinned like the other clients.
  const { runLoad } = await import('../dist/src/bench/load-generator.js');
  const result = await runLoad(
    process.argv[3],
    { path: '/', headers: { 'content-type': 'application/json' }, body: Buffer.from(BODY), rows: 1 },
    {
      level: { kind: 'concurrency', concurrency: CONCURRENCY },
      warmupMs: WARMUP_SECONDS * 1000,
      windowMs: 1000,
      minWindows: SECONDS,
      maxWindows: SECONDS,
      stabilityPct: 0,
      requestTimeoutMs: 10_000,
    },
  );
  process.stdout.write(JSON.stringify(result));
  process.exit(0);
}

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
const version = (pkg) => JSON.parse(readFileSync(join(root, 'node_modules', pkg, 'package.json'), 'utf8')).version;
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
      ...onCpu(1, process.execPath, [join(root, 'benchmarks/client-throughput.js'), '--ours', url]),
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
try {
  console.log(`machine: ${cpus()[0]?.model ?? 'unknown CPU'} × ${cpus().length}, ${process.platform} ${release()}`);
  console.log(`node ${process.version}, onnxruntime-node ${version('onnxruntime-node')} (not loaded)`);
  console.log(`undici ${version('undici')}, autocannon ${version('autocannon')}`);
  console.log(
    pinned
      ? 'server pinned to CPU 0 (taskset -c 0), each client to CPU 1 (taskset -c 1)'
      : 'not pinned (taskset missing or a single CPU): figures include CPU contention with the server',
  );
  if (!clients.wrk) console.log('wrk not installed, skipped');
  console.log(
    `load: POST ${BODY.length}-byte JSON body, concurrency ${CONCURRENCY}, ${SECONDS} s per run ` +
      `(after ${WARMUP_SECONDS} s warm-up for ours and autocannon), ${ROUNDS} rounds\n`,
  );

  const results = Object.fromEntries(Object.keys(clients).map((name) => [name, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [name, measure] of Object.entries(clients)) {
      const before = await answered(url);
      const { child, rate, note } = await measure(url, tmp);
      const result = { rate, cpuUs: (child.cpuSeconds / ((await answered(url)) - before)) * 1e6, note };
      results[name].push(result);
      console.log(
        `round ${round}  ${name.padEnd(15)} ${result.rate.toFixed(0).padStart(7)} req/s  ` +
          `${result.cpuUs.toFixed(1).padStart(5)} µs CPU/request  (${result.note})`,
      );
    }
  }

  const medians = Object.fromEntries(
    Object.entries(results).map(([name, runs]) => [
      name,
      { rate: median(runs.map((run) => run.rate)), cpuUs: median(runs.map((run) => run.cpuUs)) },
    ]),
  );
  console.log(`\nmedians of ${ROUNDS} rounds:`);
  for (const [name, { rate, cpuUs }] of Object.entries(medians)) {
    console.log(
      `  ${name.padEnd(15)} ${rate.toFixed(0).padStart(7)} req/s  ${cpuUs.toFixed(1).padStart(5)} µs CPU/request`,
    );
  }
  const ours = medians['ours (runLoad)'];
  for (const [name, target] of [
    ['autocannon', 1],
    ['wrk', 0.6],
  ]) {
    const reference = medians[name];
    if (!reference) continue;
    const ratio = ours.rate / reference.rate;
    console.log(
      `ours / ${name}: ${ratio.toFixed(2)} req/s (target ≥ ${target.toFixed(2)}: ${ratio >= target ? 'met' : 'MISSED'}), ` +
        `${(ours.cpuUs / reference.cpuUs).toFixed(2)}× its CPU per request`,
    );
  }
} finally {
  server.kill();
  await rm(tmp, { recursive: true, force: true });
}
