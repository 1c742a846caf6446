import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packArchive } from '../../src/archive/pack.js';
import { delayParameter, formatDelay, parseDelay } from '../../src/bench/delay.js';
import { recommend } from '../../src/bench/fit.js';
import { renderHtml } from '../../src/bench/report-html.js';
import { describePoint, renderCsv, renderTable } from '../../src/bench/report-table.js';
import type { BenchReport, PointResult } from '../../src/bench/report-types.js';
import { costModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';
import { samplePoint, sampleReport } from './sample-report.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'bench', ...args], { maxBuffer: 1 << 24 }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The sample's best point, under adaptive batching. */
function adaptive(point: PointResult): PointResult {
  return { ...point, server: { maxBatchSize: 16, maxQueueDelayUs: 'auto', instances: 1 } };
}

test('--delays values: durations as µs, a bare number as µs, auto as itself', () => {
  assert.equal(parseDelay('0'), 0);
  assert.equal(parseDelay('2ms'), 2000);
  assert.equal(parseDelay('500'), 500);
  assert.equal(parseDelay('auto'), 'auto');
  assert.equal(parseDelay(' AUTO '), 'auto');
  assert.equal(parseDelay('soon'), undefined);
  assert.equal(parseDelay('-1ms'), undefined);
  assert.equal(formatDelay('auto'), 'auto');
  assert.equal(delayParameter('auto'), 'auto');
  assert.equal(delayParameter(2500), '2.5');
});

test('auto points are marked in the table, CSV and HTML, and an auto winner is recommended as auto', () => {
  const fixed = samplePoint(
    [16, 2000, 1],
    { kind: 'concurrency', concurrency: 8 },
    {
      throughput: 1100,
      p50: 6.5,
      p99: 9.5,
      averageBatch: 7,
    },
  );
  const auto = adaptive(
    samplePoint(
      [16, 0, 1],
      { kind: 'concurrency', concurrency: 8 },
      { throughput: 1180, p50: 6.1, p99: 8.9, averageBatch: 7.4 },
    ),
  );
  const recommendation = recommend([fixed, auto], 25);
  assert.equal(recommendation?.point, auto);
  assert.match(recommendation?.snippet ?? '', /^dynamic_batching:\n {2}max_queue_delay: auto$/m);
  const report: BenchReport = { ...sampleReport, points: [fixed, auto], ...(recommendation ? { recommendation } : {}) };
  assert.equal(describePoint(auto), 'B=16 d=auto i=1, c=8');
  assert.match(renderTable(report), /B=16 d=auto i=1/);
  assert.match(renderTable(report), /recommended for p99 ≤ 25 ms: B=16 d=auto i=1, c=8/);
  const [head, , row] = renderCsv(report)
    .split('\r\n')
    .map((line) => line.split(','));
  assert.equal(row?.[head?.indexOf('max_queue_delay_us') ?? -1], 'auto');
  const html = renderHtml(report);
  assert.ok(html.includes('>B=16 d=auto i=1 (adaptive)</text>'), 'the latency chart names the adaptive line');
  assert.ok(html.includes('max_queue_delay: auto'));
  // The JSON keeps the string where a fixed delay has its µs.
  const json = JSON.parse(JSON.stringify(report)) as BenchReport;
  assert.deepEqual(
    json.points.map((point) => point.server?.maxQueueDelayUs),
    [2000, 'auto'],
  );
});

let archive = '';
let archiveDir = '';
before(async () => {
  archiveDir = await mkdtemp(join(tmpdir(), 'batchserve-adaptive-sweep-'));
  const model = await writeModel(archiveDir, 'cost.onnx', costModel({ n: 640, width: 131_072 }));
  const configFile = join(archiveDir, 'cost.yaml');
  await writeFile(
    configFile,
    'max_batch_size: 8\nruntime:\n  graph_optimization_level: disabled\n  intra_op_threads: 1\n',
  );
  archive = (await packArchive({ modelName: 'cost', serializedFile: model, configFile, exportPath: archiveDir })).path;
});
after(() => rm(archiveDir, { recursive: true, force: true }));

test('a real sweep with --delays 0,auto serves both points and marks the auto one everywhere', async (t) => {
  const dir = await tempDir(t);
  const files = { json: join(dir, 'r.json'), csv: join(dir, 'r.csv'), html: join(dir, 'r.html') };
  const run = await bench([
    archive,
    ...['--delays', '0,auto', '--concurrency', '1,4'],
    ...['--window', '100ms', '--warmup', '100ms', '--requests', '60', '--duration', '60s', '--slo-p99', '10s'],
    ...['--json', files.json, '--csv', files.csv, '--html', files.html],
  ]);
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(await readFile(files.json, 'utf8')) as BenchReport;
  assert.equal(report.schemaVersion, 1);
  assert.deepEqual(
    report.points.map(
      (point) =>
        `${String(point.server?.maxQueueDelayUs)}/${point.load.kind === 'concurrency' ? point.load.concurrency : 0}`,
    ),
    ['0/1', '0/4', 'auto/1', 'auto/4'],
  );
  for (const point of report.points) {
    assert.equal(point.errorCount, 0);
    assert.ok(point.serverSide && point.serverSide.requests > 0);
    assert.ok(point.variation && point.variation.required === 3, 'each point says how its windows varied');
  }
  assert.match(run.stdout, /B=8 d=auto i=1/);
  assert.match(await readFile(files.csv, 'utf8'), /\r\n8,auto,1,concurrency,1,/);
  assert.ok((await readFile(files.html, 'utf8')).includes('B=8 d=auto i=1 (adaptive)'));
});

test('--delays refuses what is neither a duration nor auto', async () => {
  const run = await bench([archive, '--concurrency', '1', '--delays', '0,later']);
  assert.equal(run.code, 2);
  assert.match(run.stderr, /--delays: expected a duration such as 0, 500us, 2ms, or auto, got "later"/);
});
