import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pendingRowsAt, planCapacity, sustains } from '../../src/bench/plan.js';
import { highestSustained, searchSustainedRate, type RateProbe } from '../../src/bench/rate-search.js';
import { renderHtml } from '../../src/bench/report-html.js';
import { renderMarkdown, renderTable } from '../../src/bench/report-table.js';
import type { BenchReport, PointResult, RateSearchResult } from '../../src/bench/report-types.js';
import { packSimArchive } from '../fixtures/sim-archive.js';
import { tempDir } from '../fixtures/temp.js';
import { samplePoint, sampleReport } from './sample-report.js';

const rate = (value: number): PointResult['load'] => ({ kind: 'rate', rate: value, arrival: 'poisson' });

test('a point is sustained when it has no errors, p99 inside the budget and at least 90 % of its rate served', () => {
  const at = (throughput: number, p99: number, errors = {}): PointResult =>
    samplePoint([8, 0, 1], rate(400), { throughput, p50: p99 / 2, p99, averageBatch: 3, errors });
  assert.equal(sustains(at(398, 20), 25), true);
  assert.equal(sustains(at(398, 20), 19.9), false, 'p99 over the budget');
  assert.equal(sustains(at(350, 20), 25), false, 'the server fell behind: 350 of 400 req/s');
  assert.equal(sustains(at(360, 20), 25), true, 'exactly 90 % served');
  // A short run at a low rate: 18 requests expected in 0.45 s, and Poisson arrivals stray by
  // about 4, so 13 served is chance, not a server falling behind; 4 is not.
  const short = (throughput: number): PointResult => ({ ...at(throughput, 20), load: rate(40), durationSeconds: 0.45 });
  assert.equal(sustains(short(30), 25), true, '13.5 of 18');
  assert.equal(sustains(short(10), 25), false, '4.5 of 18');
  assert.equal(sustains(at(398, 20, { '503': 1 }), 25), false, 'one error');
  const closed = samplePoint(
    [8, 0, 1],
    { kind: 'concurrency', concurrency: 4 },
    { throughput: 398, p50: 5, p99: 9, averageBatch: 3 },
  );
  assert.equal(sustains(closed, 25), false, 'a closed loop offers no rate');
});

test("pending rows are Little's law on the server's own figures: rows per second × (queue + compute) time", () => {
  const point = samplePoint([8, 0, 1], rate(400), {
    throughput: 400,
    p50: 10,
    p99: 20,
    averageBatch: 4,
    clientBatch: 2,
  });
  const side = point.serverSide;
  assert.ok(side);
  const expected = (800 * (side.queueMsPerRequest + side.computeMsPerRequest)) / 1000;
  assert.ok(Math.abs(pendingRowsAt(point) - expected) < 1e-9);
  // Without statistics the client's mean latency stands in.
  const bare: PointResult = { ...point, serverSide: undefined };
  assert.ok(Math.abs(pendingRowsAt(bare) - (800 * point.latency.mean) / 1000) < 1e-9);
});

test('the plan takes the highest sustained rate over every configuration and sizes replicas and the autoscaler from it', () => {
  const points = [
    samplePoint([8, 0, 1], rate(300), { throughput: 299, p50: 6, p99: 12, averageBatch: 2 }),
    samplePoint([8, 0, 1], rate(600), { throughput: 420, p50: 90, p99: 300, averageBatch: 8 }),
    samplePoint([8, 2000, 1], rate(450), { throughput: 449, p50: 9, p99: 21, averageBatch: 5 }),
    samplePoint([8, 2000, 1], rate(500), { throughput: 498, p50: 11, p99: 26, averageBatch: 6 }),
    samplePoint(
      [8, 2000, 1],
      { kind: 'concurrency', concurrency: 32 },
      { throughput: 900, p50: 9, p99: 20, averageBatch: 8 },
    ),
  ];
  const searches: RateSearchResult[] = [];
  const plan = planCapacity(points, searches, { targetRate: 2000, sloP99Ms: 25 });
  assert.ok(plan);
  assert.equal(plan.point, points[2], '500/s broke the budget, the closed loop offers no rate');
  assert.equal(plan.replicaRate, 450);
  assert.equal(plan.replicas, 5, 'ceil(2000 / 450)');
  assert.equal(plan.pendingRows, pendingRowsAt(points[2] as PointResult));
  assert.equal(plan.targetQueueDepth, Math.floor(plan.pendingRows), 'rounded down, never past the measured depth');
  assert.equal(plan.searches, searches);

  assert.equal(planCapacity(points, [], { targetRate: 450, sloP99Ms: 25 })?.replicas, 1);
  assert.equal(planCapacity(points, [], { targetRate: 451, sloP99Ms: 25 })?.replicas, 2);
  assert.equal(planCapacity(points, [], { targetRate: 100, sloP99Ms: 1 }), undefined, 'nothing inside 1 ms');
  const idle = samplePoint([8, 0, 1], rate(2), { throughput: 2, p50: 2, p99: 3, averageBatch: 1 });
  assert.equal(planCapacity([idle], [], { targetRate: 10, sloP99Ms: 25 })?.targetQueueDepth, 1, 'at least 1');
});

/**
 * A batching server on a simulated clock: constant arrivals at `rate`, one instance, delay 0
 * (each pass takes what is queued, up to 8 rows), T(B) = 5 ms + 0.5 ms·B. Capacity 8 / 9 ms ≈
 * 889/s; requests still queued when the horizon ends are not served, as in the load generator.
 */
function simulatedServer(rate: number, sloP99Ms: number): RateProbe {
  const c = 5;
  const m = 0.5;
  const horizonMs = 2000;
  const arrivals = Array.from({ length: Math.floor((rate * horizonMs) / 1000) }, (_, i) => (i * 1000) / rate);
  const latencies: number[] = [];
  let free = 0;
  let next = 0;
  while (next < arrivals.length) {
    const start = Math.max(free, arrivals[next] as number);
    let rows = 0;
    while (next + rows < arrivals.length && rows < 8 && (arrivals[next + rows] as number) <= start) rows++;
    const end = start + c + m * rows;
    if (end > horizonMs) break;
    for (let i = next; i < next + rows; i++) latencies.push(end - (arrivals[i] as number));
    next += rows;
    free = end;
  }
  latencies.sort((a, b) => a - b);
  const p99 = latencies[Math.ceil(0.99 * latencies.length) - 1] ?? Infinity;
  const throughput = latencies.length / (horizonMs / 1000);
  return { rate, throughput, sustained: p99 <= sloP99Ms && throughput >= 0.9 * rate };
}

test('the rate search lands within its 10 % resolution below the highest rate the simulated server sustains', async () => {
  const slo = 30;
  let truth = 0;
  for (let r = 10; r <= 2000; r += 1) if (simulatedServer(r, slo).sustained) truth = r;
  // Near capacity: a 2 s run from an idle server absorbs a rate a little over it.
  assert.ok(truth > 800 && truth < 950, `the knee sits near capacity: ${truth}`);
  for (const startRate of [20, 850, 5000, 100_000]) {
    const probes = await searchSustainedRate(async (r) => simulatedServer(r, slo), {
      startRate,
      maxProbes: 8,
      resolution: 0.1,
      servedShare: 0.9,
    });
    const found = highestSustained(probes)?.rate ?? 0;
    const tried = probes.map((p) => `${p.rate}${p.sustained ? '✓' : '✗'}`).join(' ');
    assert.ok(found <= truth && found >= truth / 1.1, `from ${startRate}: found ${found}, truth ${truth} (${tried})`);
    assert.ok(probes.length <= 8);
  }
});

test('the rate search starts from what the sweep already measured, bounded by what an overloaded probe served', async () => {
  const probed: number[] = [];
  const probe = async (r: number): Promise<RateProbe> => {
    probed.push(r);
    return { rate: r, throughput: Math.min(r, 500), sustained: r <= 480 };
  };
  const known: RateProbe[] = [
    { rate: 400, throughput: 400, sustained: true },
    { rate: 800, throughput: 500, sustained: false },
  ];
  const probes = await searchSustainedRate(probe, {
    startRate: 10,
    known,
    maxProbes: 8,
    resolution: 0.1,
    servedShare: 0.9,
  });
  // 800/s served only 500, so nothing above 500 ÷ 0.9 = 556 can hold: the middle of 400 and 556.
  assert.equal(probed[0], 471);
  assert.deepEqual(probed, [471, 512], 'then 512 fails, within 10 % of 471');
  assert.ok((highestSustained(probes)?.rate ?? 0) >= 480 / 1.1);
  // Already narrow: nothing to measure.
  const narrow = await searchSustainedRate(probe, {
    startRate: 10,
    known: [known[0] as RateProbe, { rate: 420, throughput: 400, sustained: false }],
    maxProbes: 8,
    resolution: 0.1,
    servedShare: 0.9,
  });
  assert.deepEqual(narrow, []);
  // A server that fails everything: halving stops at 1 req/s or at the probe limit.
  const never = await searchSustainedRate(async (r) => ({ rate: r, throughput: 0, sustained: false }), {
    startRate: 100,
    maxProbes: 20,
    resolution: 0.1,
    servedShare: 0.9,
  });
  assert.ok(never.length <= 8 && never.every((p) => p.rate >= 1), never.map((p) => p.rate).join(' '));
});

test('the plan reads the same in the table, Markdown and HTML', () => {
  const point = samplePoint([16, 2000, 1], rate(1000), { throughput: 998.7, p50: 5.9, p99: 11.2, averageBatch: 5.1 });
  const plan = planCapacity(
    [point],
    [
      {
        server: point.server ?? { maxBatchSize: 16, maxQueueDelayUs: 2000, instances: 1 },
        sustainedRate: 1000,
        probes: [
          { rate: 2000, sustained: false },
          { rate: 1000, sustained: true },
        ],
      },
    ],
    { targetRate: 4500, sloP99Ms: 25 },
  );
  assert.ok(plan);
  const report: BenchReport = { ...sampleReport, plan };
  const depth = plan.targetQueueDepth;
  for (const text of [renderTable(report), renderMarkdown(report), renderHtml(report)]) {
    assert.ok(text.includes('capacity plan for 4500 req/s at p99 ≤ 25 ms'), text);
    assert.ok(text.includes('one replica sustains 1000 req/s at B=16 d=2ms i=1'));
    assert.ok(text.includes('replicas: ceil(4500 / 1000) = 5'));
    assert.ok(text.includes(`--target-queue-depth ${depth}`));
    assert.ok(text.includes('2000✗ 1000✓'));
  }
  assert.ok(renderHtml(report).includes('<h2>Capacity plan</h2>'));
});

// --- end to end: a real server serving the simulated accelerator ---------------------------------------

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));
let archive = '';
let archiveDir = '';
before(async () => {
  archiveDir = await mkdtemp(join(tmpdir(), 'batchserve-plan-'));
  // The simulated accelerator: a pass costs 3 + 0.3·B ms of wall time and no CPU.
  archive = await packSimArchive(archiveDir, { name: 'cost', fixedCost: '3ms', rowCost: '300us', maxBatchSize: 8 });
});
after(() => rm(archiveDir, { recursive: true, force: true }));

test('bench --plan on a real server: a measured per-replica rate, and replicas and queue depth that follow from it', async (t) => {
  const dir = await tempDir(t);
  const json = join(dir, 'plan.json');
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [
        BIN,
        'bench',
        archive,
        ...['--delays', '0', '--rate', '40', '--plan', '--target-rate', '3000', '--slo-p99', '2s'],
        ...['--window', '150ms', '--warmup', '100ms', '--duration', '450ms', '--json', json],
      ],
      { maxBuffer: 1 << 24 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(await readFile(json, 'utf8')) as BenchReport;
  const plan = report.plan;
  if (plan === undefined) {
    // On a machine too busy to serve even the lowest probe in full there is no plan to check,
    // and the report must say why rather than print a wrong one.
    assert.ok(
      report.warnings.some((warning) => warning.startsWith('no capacity plan: no open-loop rate was served in full')),
      JSON.stringify(report.warnings),
    );
    return;
  }
  const [search] = plan.searches;
  assert.ok(search && search.probes.length >= 1 && search.probes.length <= 8, JSON.stringify(plan.searches));
  assert.equal(search.sustainedRate, plan.replicaRate);
  // How fast the replica is depends on the machine's load, so only the plan's consistency with
  // its own measurement is asserted below.
  assert.ok(plan.replicaRate > 0 && plan.replicaRate <= 3000, `per-replica rate ${plan.replicaRate}`);
  assert.ok(sustains(plan.point, 2000));
  assert.equal(plan.replicas, Math.ceil(3000 / plan.replicaRate));
  assert.deepEqual(report.recommendation?.point, plan.point, 'one recommendation: the configuration the plan sized');
  assert.equal(plan.targetQueueDepth, Math.max(1, Math.floor(pendingRowsAt(plan.point))));
  // Every probe is a measured point of the report, at the rate it names.
  const rates = report.points.map((point) => (point.load.kind === 'rate' ? point.load.rate : 0));
  assert.deepEqual(rates, [40, ...search.probes.map((probe) => probe.rate)]);
  assert.match(run.stdout, /capacity plan for 3000 req\/s at p99 ≤ 2000 ms:/);
  assert.match(run.stdout, /--target-queue-depth \d+/);
});

test('--plan needs --target-rate and --slo-p99, and --target-rate needs --plan', async () => {
  const usage = (args: string[]): Promise<{ code: number; stderr: string }> =>
    new Promise((resolve) => {
      execFile(process.execPath, [BIN, 'bench', archive, ...args], (error, _stdout, stderr) =>
        resolve({ code: error ? Number(error.code ?? 1) : 0, stderr }),
      );
    });
  const [noRate, noSlo, noPlan, badRate] = await Promise.all([
    usage(['--plan', '--slo-p99', '50ms']),
    usage(['--plan', '--target-rate', '100']),
    usage(['--concurrency', '1', '--target-rate', '100']),
    usage(['--plan', '--target-rate', 'lots', '--slo-p99', '50ms']),
  ]);
  for (const run of [noRate, noSlo, noPlan, badRate]) assert.equal(run.code, 2, run.stderr);
  assert.match(noRate.stderr, /--plan needs --target-rate/);
  assert.match(noSlo.stderr, /--slo-p99/);
  assert.match(noPlan.stderr, /--target-rate needs --plan/);
  assert.match(badRate.stderr, /--target-rate: expected requests per second, got "lots"/);
});
