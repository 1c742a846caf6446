// What does tracing cost when it is off? The served demo model (bench:served's setup: binary v2
// tensors, server on CPU 0, client on CPU 1 when taskset is there) driven at concurrency 8 by
// this build's server with no --otlp-endpoint, and by the build just before tracing was added
// (its parent commit, extracted with git archive and compiled in a temp folder), in rounds of
// reference, current, current, reference, so that drift within a round falls on both. A round's
// ratio is its two current runs' throughput over its two reference runs'; its control is its
// first reference run over its last, the same configuration measured twice. The figures are
// the medians over rounds; the aim is judged only when the control's median is within 2 % of 1
// (a machine busier than that cannot resolve a 2 % cost).
//   tracing off: current ÷ reference throughput ≥ 0.98
// Writes benchmarks/results/tracing-off.json (see results.js for --quick, --check, --json).
// Usage: npm run bench:tracing [-- --quick] [-- --check]
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { demoPackArgs } from './demo-archive.js';
import { tracingOff } from './render.js';
import { benchFlags, exitOnMissed, resultRecord, ROOT, writeResult } from './results.js';
import { CAN_PIN, pinSelfOffServerCpu, serveChild } from './serve-child.js';

const AIM = 0.98;
const flags = benchFlags('tracing-off');
const settings = {
  pinned: CAN_PIN,
  concurrency: 8,
  rounds: flags.quick ? 1 : 8,
  warmupMs: flags.quick ? 500 : 1000,
  windowMs: flags.quick ? 500 : 1000,
  windows: 2,
};

const git = (...args) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
/**
 * The build without tracing: $TRACING_OFF_REFERENCE (a commit, e.g. the main branch a branch
 * was just merged with), else the parent of the commit that added src/server/tracing.ts.
 */
const added = git('log', '--format=%H', '--diff-filter=A', '--', 'src/server/tracing.ts').split('\n').at(-1);
const reference = git('rev-parse', '--short', process.env.TRACING_OFF_REFERENCE ?? `${added}^`);

async function buildReference(dir) {
  const folder = join(dir, 'reference');
  execFileSync('mkdir', ['-p', folder]);
  execFileSync('sh', ['-c', `git archive ${reference} | tar -x -C ${folder}`], { cwd: ROOT });
  await symlink(join(ROOT, 'node_modules'), join(folder, 'node_modules'));
  execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], {
    cwd: folder,
    stdio: 'inherit',
  });
  return join(folder, 'bin/batchserve.js');
}

/** One closed-loop run with the bench's own client against a fresh server of `serveBin`. */
async function drive(serveBin, archive, dir) {
  const { runLoad } = await import('../dist/src/bench/load-generator.js');
  const { fetchModelMetadata, randomPayload } = await import('../dist/src/bench/payload.js');
  const server = await serveChild({ name: 'orientation', archive, dir, pinned: settings.pinned, serveBin });
  try {
    const metadata = await fetchModelMetadata(server.urls.inference, 'orientation');
    const payload = randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 1, seed: 1 });
    const result = await runLoad(server.urls.inference, payload, {
      level: { kind: 'concurrency', concurrency: settings.concurrency },
      warmupMs: settings.warmupMs,
      windowMs: settings.windowMs,
      minWindows: settings.windows,
      maxWindows: settings.windows,
      stabilityPct: 0,
      requestTimeoutMs: 60_000,
    });
    return { throughput: result.throughput, p50Ms: result.latency.p50, errors: result.errorCount };
  } finally {
    await server.stop();
  }
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
};

if (settings.pinned) pinSelfOffServerCpu();
const dir = await mkdtemp(join(tmpdir(), 'batchserve-tracing-off-'));
try {
  const builds = { reference: await buildReference(dir), current: join(ROOT, 'bin/batchserve.js') };
  execFileSync(process.execPath, [builds.current, ...demoPackArgs({ exportPath: dir })], { stdio: 'ignore' });
  const archive = join(dir, 'orientation.mar');
  const runs = [];
  for (let round = 1; round <= settings.rounds; round++) {
    for (const build of ['reference', 'current', 'current', 'reference']) {
      runs.push({ round, build, ...(await drive(builds[build], archive, dir)) });
      console.error(`round ${round}: ${build} ${runs.at(-1).throughput.toFixed(1)}/s`);
    }
  }
  const rounds = Array.from({ length: settings.rounds }, (_, index) => {
    const [first, current1, current2, last] = runs.slice(index * 4, index * 4 + 4).map((run) => run.throughput);
    return { ratio: (current1 + current2) / (first + last), control: first / last };
  });
  const ratio = median(rounds.map((round) => round.ratio));
  const control = median(rounds.map((round) => round.control));
  const judged = Math.abs(control - 1) <= 1 - AIM;
  const record = resultRecord('tracing-off', flags, {
    settings,
    reference,
    runs,
    rounds,
    ratio,
    control,
    verdict: { aim: `≥ ${AIM}`, judged, met: judged && ratio >= AIM },
  });
  console.log(tracingOff.render(record));
  await writeResult(flags.json, record);
  exitOnMissed(flags, [{ label: `tracing off ${record.verdict.aim}`, met: record.verdict.met }]);
} finally {
  await rm(dir, { recursive: true, force: true });
}
