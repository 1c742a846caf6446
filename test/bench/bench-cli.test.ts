import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packArchive } from '../../src/archive/pack.js';
import type { BenchReport } from '../../src/bench/report-types.js';
import { costModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'bench', ...args], { maxBuffer: 1 << 24 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The cost model (c ≈ a 640² matrix product, m ≈ two passes over 131 072 values a row), packed. */
async function costArchive(dir: string): Promise<string> {
  const model = await writeModel(dir, 'cost.onnx', costModel({ n: 640, width: 131_072 }));
  await writeFile(
    join(dir, 'cost.yaml'),
    'max_batch_size: 8\nruntime:\n  graph_optimization_level: disabled\n  intra_op_threads: 1\n',
  );
  return (
    await packArchive({ modelName: 'cost', serializedFile: model, configFile: join(dir, 'cost.yaml'), exportPath: dir })
  ).path;
}

const SHORT = ['--window', '250ms', '--warmup', '200ms', '--duration', '750ms'];

test('a sweep of 2 batch sizes × 2 delays × 2 concurrency levels writes the table, JSON, CSV, Markdown and HTML', async (t) => {
  const dir = await tempDir(t);
  const archive = await costArchive(dir);
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
    '--delays',
    '0,2ms',
    '--concurrency',
    '1,4',
    ...SHORT,
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
        `${p.server.maxBatchSize}/${p.server.maxQueueDelayUs}/${p.load.kind === 'concurrency' ? p.load.concurrency : 0}`,
    ),
    ['1/0/1', '1/0/4', '1/2000/1', '1/2000/4', '8/0/1', '8/0/4', '8/2000/1', '8/2000/4'],
  );
  for (const point of report.points) {
    assert.equal(point.errorCount, 0);
    assert.ok(point.requests > 0 && point.throughput > 0);
    assert.ok(point.serverSide && point.serverSide.requests > 0);
  }
  const batched = report.points.find(
    (p) => p.server.maxBatchSize === 8 && p.load.kind === 'concurrency' && p.load.concurrency === 4,
  );
  assert.ok((batched?.serverSide?.averageBatch ?? 0) > 1.5, 'the server formed batches at concurrency 4');
  assert.ok(report.recommendation?.snippet.includes('max_batch_size'));

  // The fit from the server's statistics agrees with the model's own in-process curve.
  const server = report.fit;
  const own = report.inProcess;
  assert.ok(server && own, 'both fits present');
  // Within a factor of two: server, client and other test files share two cores here.
  const within = (a: number, b: number): boolean => a / b > 0.5 && a / b < 2;
  assert.ok(within(server.c, own.c), `c: server ${server.c} ms vs in-process ${own.c} ms`);
  assert.ok(within(server.m, own.m), `m: server ${server.m} ms vs in-process ${own.m} ms`);
  assert.ok(own.ceiling > 3, `the cost model batches well (ceiling ${own.ceiling})`);

  const csv = (await readFile(files.csv, 'utf8')).trim().split('\n');
  assert.equal(csv.length, 9, 'header and one row per point');
  assert.match(await readFile(files.md, 'utf8'), /\|/);
  const html = await readFile(files.html, 'utf8');
  assert.equal((html.match(/<svg/g) ?? []).length >= 3, true, 'three charts');
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|url\(["']?https?:/, 'opens with no network');
});

test('the CI gate exits 1 on a breached threshold or a regression and 0 otherwise', async (t) => {
  const dir = await tempDir(t);
  const archive = await costArchive(dir);
  const baselineFile = join(dir, 'baseline.json');
  const pass = await bench([
    archive,
    '--concurrency',
    '2',
    ...SHORT,
    '--fail-on',
    'p99>60s,errors>0',
    '--json',
    baselineFile,
  ]);
  assert.equal(pass.code, 0, pass.stderr);

  const breach = await bench([archive, '--concurrency', '2', ...SHORT, '--fail-on', 'throughput<1000000']);
  assert.equal(breach.code, 1);
  assert.match(breach.stderr, /throughput/);
  assert.match(breach.stderr, /BS_ERR_BENCH_GATE/);

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

  const usage = await bench([archive]);
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /--concurrency/);
});
