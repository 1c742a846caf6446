import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GpuWatch, isLocalUrl, summarize } from '../../src/bench/gpu-use.js';
import { renderHtml } from '../../src/bench/report-html.js';
import { renderCsv, renderTable } from '../../src/bench/report-table.js';
import type { PointResult } from '../../src/bench/report-types.js';
import { buildReport } from '../../src/bench/report.js';
import { runSweep, type SweepOptions } from '../../src/bench/sweep.js';
import { RemoteTarget } from '../../src/bench/targets.js';
import { parseGpuQuery, type GpuSample } from '../../src/runtime/nvidia-smi.js';
import { FAKE_NVIDIA_SMI, fakeNvidiaSmiPrints, recorded } from '../fixtures/nvidia-smi.js';
import { packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

test('only a target on this machine is watched', async () => {
  for (const url of ['http://127.0.0.1:8080', 'http://localhost:1', 'grpc://127.0.0.1:8001', 'http://[::1]:80']) {
    assert.equal(isLocalUrl(url), true, url);
  }
  for (const url of ['http://10.0.0.5:8080', 'grpc://gpu-box:8001', 'not a url'])
    assert.equal(isLocalUrl(url), false, url);
  assert.equal(await GpuWatch.open('http://10.0.0.5:8080', { command: FAKE_NVIDIA_SMI }), undefined);
  assert.equal(await GpuWatch.open('http://127.0.0.1:8080', { command: '/nonexistent/nvidia-smi' }), undefined);
});

test('a point summarises each GPU: mean utilisation, peak memory, skipping figures the driver lacks', () => {
  const gpus = (name: 'four-gpus.txt' | 'not-available.txt') =>
    (parseGpuQuery(recorded(name)) as { gpus: readonly GpuSample[] }).gpus;
  const busy = gpus('four-gpus.txt');
  const idle = busy.map((gpu) => ({ ...gpu, utilization: 0, memoryUsedBytes: 0 }));
  const [first, , third] = summarize([busy, idle]);
  assert.deepEqual(first, {
    gpu: 0,
    name: 'NVIDIA A100-SXM4-80GB',
    utilization: 0.5,
    memoryUsedBytes: 61234 * 2 ** 20,
    samples: 2,
  });
  assert.equal(third?.utilization, 0.175);
  const [mig] = summarize([gpus('not-available.txt')]);
  assert.deepEqual(mig, {
    gpu: 0,
    name: 'NVIDIA H100 80GB HBM3 MIG 1g.10gb',
    memoryUsedBytes: 12 * 2 ** 20,
    samples: 1,
  });
});

async function sweepLocal(t: TestContext, gpu: SweepOptions['gpu']): Promise<PointResult[]> {
  const archive = await packAffine(await tempDir(t));
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const target = new RemoteTarget(server.urls.inference, 'affine');
  t.after(() => target.close());
  const { points } = await runSweep(target, {
    levels: [{ kind: 'concurrency', concurrency: 2 }],
    protocol: 'v2-binary',
    clientBatch: 1,
    gpu,
    load: {
      warmupMs: 0,
      windowMs: 100,
      minWindows: 3,
      maxWindows: 100,
      stabilityPct: 0,
      maxRequests: 100,
      requestTimeoutMs: 10_000,
    },
  });
  return points;
}

test('a local sweep records the GPU utilisation of each point, and the reports show it beside throughput', async (t) => {
  fakeNvidiaSmiPrints(t, 'one-gpu.txt');
  const points = await sweepLocal(t, { command: FAKE_NVIDIA_SMI, intervalMs: 10 });
  const gpus = points[0]?.gpus;
  assert.equal(gpus?.length, 1);
  assert.equal(gpus?.[0]?.utilization, 0.87);
  assert.equal(gpus?.[0]?.memoryUsedBytes, 40321 * 2 ** 20);
  assert.ok((gpus?.[0]?.samples ?? 0) >= 1);
  const report = buildReport({ target: { model: 'affine', protocol: 'v2-binary' }, points, serverSamples: [] });
  const header =
    renderTable(report)
      .split('\n')
      .find((line) => line.includes('req/s')) ?? '';
  assert.ok(
    header.indexOf('items/s') < header.indexOf('GPU util') && header.indexOf('GPU util') < header.indexOf('p50'),
    header,
  );
  assert.match(renderTable(report), /87%/);
  assert.match(renderHtml(report), /<th[^>]*>GPU util<\/th>/);
  assert.match(renderCsv(report).split('\r\n')[1] ?? '', new RegExp(`,0\\.87,${40321 * 2 ** 20}$`));
});

test('without nvidia-smi the points carry no GPU figures and the table has no GPU column', async (t) => {
  const points = await sweepLocal(t, { command: '/nonexistent/nvidia-smi' });
  assert.equal(points[0]?.gpus, undefined);
  const report = buildReport({ target: { model: 'affine', protocol: 'v2-binary' }, points, serverSamples: [] });
  assert.doesNotMatch(renderTable(report), /GPU/);
});

test('bench of an archive on a machine whose nvidia-smi shows a GPU: the JSON and the table carry its use', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  // An `nvidia-smi` first on PATH that runs the fake, as a machine with one H200 would answer.
  const bin = join(dir, 'bin');
  await mkdir(bin);
  await writeFile(join(bin, 'nvidia-smi'), `#!/bin/sh\nexec '${FAKE_NVIDIA_SMI}' "$@"\n`, { mode: 0o755 });
  const json = join(dir, 'report.json');
  const env = {
    ...process.env,
    PATH: `${bin}${delimiter}${process.env.PATH ?? ''}`,
    FAKE_NVIDIA_SMI_OUTPUT: 'one-gpu.txt',
  };
  const args = [
    BIN,
    'bench',
    archive,
    '--concurrency',
    '2',
    '--requests',
    '40',
    '--warmup',
    '0ms',
    '--window',
    '100ms',
    '--json',
    json,
  ];
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(process.execPath, args, { env }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    ),
  );
  assert.equal(run.code, 0, run.stderr);
  const report = JSON.parse(await readFile(json, 'utf8')) as { points: PointResult[] };
  assert.equal(report.points[0]?.gpus?.[0]?.name, 'NVIDIA H200');
  assert.equal(report.points[0]?.gpus?.[0]?.utilization, 0.87);
  assert.match(run.stdout, /GPU util/);
});
