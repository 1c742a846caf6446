import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchReport } from '../../src/bench/report-types.js';
import { packSimArchive } from '../fixtures/sim-archive.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'bench', ...args], { maxBuffer: 1 << 24 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * The simulated accelerator, T(B) = 3 + 0.3·B ms of wall time and no CPU (ceiling 11×), packed
 * once for both tests: exact costs whatever else the machine runs.
 */
let archive = '';
let archiveDir = '';
before(async () => {
  archiveDir = await mkdtemp(join(tmpdir(), 'batchserve-bench-cli-'));
  archive = await packSimArchive(archiveDir, { name: 'cost', fixedCost: '3ms', rowCost: '300us', maxBatchSize: 8 });
});
after(() => rm(archiveDir, { recursive: true, force: true }));

const SHORT = ['--window', '100ms', '--warmup', '100ms', '--duration', '300ms'];
/**
 * Each point runs until 120 requests are measured, however busy the machine: enough passes for
 * the server's statistics to time each batch size it formed (sweep.ts wants 10 of a size).
 */
const COUNTED = ['--window', '100ms', '--warmup', '100ms', '--requests', '120', '--duration', '60s'];

test('a sweep of 2 batch sizes × 2 delays × 2 concurrency levels writes the table, JSON, CSV, Markdown and HTML', async (t) => {
  const dir = await tempDir(t);
  const files = {
    json: join(dir, 'r.json'),
    csv: join(dir, 'r.csv'),
    md: join(dir, 'r.md'),
    html: join(dir, 'r.html'),
  };
  const run = await bench([
    archive,
    '--in-process',
    '--batch-sizes',
    '1,8',
    // 20 ms: long enough for eight clients' next requests to meet in one pass even on a busy
    // machine under coverage, so B=8 forms one size often enough (10 passes in a point) for the
    // server's fit; at 2 ms (and once at 5 ms) CI's passes scattered over sizes 5–8.
    '--delays',
    '0,20ms',
    '--concurrency',
    '1,8',
    ...COUNTED,
    '--stability',
    '0',
    '--slo-p99',
    '10s',
    '--json',
    files.json,
    '--csv',
    files.csv,
    '--md',
    files.md,
    '--html',
    files.html,
  ]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /ceiling/);
  const report = JSON.parse(await readFile(files.json, 'utf8')) as BenchReport;
  assert.equal(report.schemaVersion, 1);
  assert.equal(report.points.length, 8);
  assert.deepEqual(
    report.points.map(
      (p) =>
        `${p.server?.maxBatchSize}/${p.server?.maxQueueDelayUs}/${p.load.kind === 'concurrency' ? p.load.concurrency : 0}`,
    ),
    ['1/0/1', '1/0/8', '1/20000/1', '1/20000/8', '8/0/1', '8/0/8', '8/20000/1', '8/20000/8'],
  );
  // --stability 0: no early stop once windows agree; each point runs to its 120 requests.
  for (const point of report.points) {
    assert.equal(point.errorCount, 0);
    assert.ok(point.requests === 120 && point.throughput > 0, `${point.requests} requests`);
    assert.ok(point.serverSide && point.serverSide.requests > 0);
  }
  // Each point ran the server settings it names: B=1 never batches, and at B=8 eight clients
  // kept a 3–5 ms pass busy enough for requests to queue and share a pass.
  const averageBatch = (size: number): number[] =>
    report.points.filter((p) => p.server?.maxBatchSize === size).map((p) => p.serverSide?.averageBatch ?? 0);
  assert.deepEqual(averageBatch(1), [1, 1, 1, 1]);
  assert.ok(Math.max(...averageBatch(8)) > 1.5, `average batches at B=8: ${averageBatch(8).join(', ')}`);
  assert.ok(report.recommendation?.snippet.includes('max_batch_size'));

  // The server's statistics time the same forward pass as the in-process run, in the same unit.
  // Compared per pass at B=1, the size every point ran most: a fitted c and m are too noisy to
  // compare on two shared cores (the fit itself: fit.test.ts). A factor of 3 allows for the
  // contention; a unit slip (ns, µs) or a time per request instead of per pass is far outside.
  const server = report.fit;
  const own = report.inProcess;
  assert.ok(
    server && own,
    `both fits present: server ${JSON.stringify(server?.samples)}, in-process ${JSON.stringify(own?.samples)}, ` +
      `warnings ${JSON.stringify(report.warnings)}`,
  );
  const single = (fit: typeof own): number => fit.samples.find((sample) => sample.batchSize === 1)?.ms ?? NaN;
  const ratio = single(server) / single(own);
  assert.ok(ratio > 1 / 3 && ratio < 3, `T(1): server ${single(server)} ms vs in-process ${single(own)} ms`);
  assert.deepEqual(
    own.samples.map((sample) => sample.batchSize),
    [1, 2, 4, 8],
  );
  assert.ok((own.ceiling ?? 0) > 3, `the cost model batches well (ceiling ${own.ceiling})`);

  const csv = (await readFile(files.csv, 'utf8')).trim().split('\n');
  assert.equal(csv.length, 9, 'header and one row per point');
  assert.match(await readFile(files.md, 'utf8'), /\|/);
  const html = await readFile(files.html, 'utf8');
  assert.equal((html.match(/<svg/g) ?? []).length >= 3, true, 'three charts');
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|url\(["']?https?:/, 'opens with no network');
});

test('the CI gate exits 1 on a breached threshold or a regression and 0 otherwise', async (t) => {
  const dir = await tempDir(t);
  const baselineFile = join(dir, 'baseline.json');
  // Independent runs side by side: none of their verdicts depends on how fast the machine is.
  const [pass, breach, usage] = await Promise.all([
    bench([archive, '--concurrency', '2', ...SHORT, '--fail-on', 'p99>60s,errors>0', '--json', baselineFile]),
    bench([archive, '--concurrency', '2', ...SHORT, '--fail-on', 'throughput<1000000']),
    bench([archive]),
  ]);
  assert.equal(pass.code, 0, pass.stderr);
  assert.equal(breach.code, 1);
  assert.match(breach.stderr, /throughput/);
  assert.match(breach.stderr, /BS_ERR_BENCH_GATE/);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /--concurrency/);

  const baseline = JSON.parse(await readFile(baselineFile, 'utf8')) as BenchReport & {
    points: { throughput: number }[];
  };
  const inflated = {
    ...baseline,
    points: baseline.points.map((point) => ({ ...point, throughput: point.throughput * 10 })),
  };
  await writeFile(baselineFile, JSON.stringify(inflated));
  const regressed = await bench([
    archive,
    '--concurrency',
    '2',
    ...SHORT,
    '--baseline',
    baselineFile,
    '--max-regression',
    '10%',
  ]);
  assert.equal(regressed.code, 1);
  assert.match(regressed.stderr, /throughput/);
});
