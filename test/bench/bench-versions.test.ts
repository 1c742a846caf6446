import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { BenchReport } from '../../src/bench/report-types.js';
import type { ModelStatsJson } from '../../src/metrics/model-statistics.js';
import type { BatchServer } from '../../src/server/server.js';
import { packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'bench', ...args], (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A pass over B rows takes about 4 + B ms, so the server's statistics trace a line with c > 0 and m > 0. */
const COSTED_HANDLER = `export async function inference(inputs, context) {
  await new Promise((resolve) => setTimeout(resolve, 4 + inputs.x.data.length / 4));
  return context.builtins.tensor.inference(inputs, context);
}
`;
const CONFIG = 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 2ms\n';

/** Versions 1 and 2 of the affine model; unversioned requests go to 2, the highest, unless a policy says otherwise. */
async function twoVersions(t: TestContext, config: Record<string, unknown> = {}): Promise<BatchServer> {
  const root = await tempDir(t);
  const versions = await Promise.all(
    ['1', '2'].map((version) =>
      packAffine(join(root, `v${version}`), {
        version,
        offset: Number(version),
        config: CONFIG,
        handlerSource: COSTED_HANDLER,
      }),
    ),
  );
  return startTestServer(t, { models: versions.map((archive) => `affine=${archive}`), ...config });
}

async function versionStats(server: BatchServer): Promise<ModelStatsJson[]> {
  const answer = await request(`${server.urls.inference}/v2/models/affine/stats`);
  return ((await answer.body.json()) as { model_stats: ModelStatsJson[] }).model_stats;
}

async function benchReport(t: TestContext, server: BatchServer, args: string[]): Promise<BenchReport> {
  const json = join(await tempDir(t), 'report.json');
  const run = await bench([
    ...['--url', server.urls.inference, '--model', 'affine', '--json', json],
    ...['--window', '100ms', '--warmup', '50ms', '--duration', '20s', '--stability', '0'],
    ...args,
  ]);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(await readFile(json, 'utf8')) as BenchReport;
}

test('bench --url reads the statistics of the version that served, not model_stats[0]', async (t) => {
  const server = await twoVersions(t, { model_policies: { affine: { default_version: '2' } } });
  const report = await benchReport(t, server, ['--concurrency', '1,8', '--requests', '480']);

  // Version 1 is first in /stats and saw no traffic at all: its counters were what bench read before.
  const [first, second] = await versionStats(server);
  assert.deepEqual([first?.version, first?.execution_count], ['1', 0]);
  assert.equal(second?.version, '2');

  for (const point of report.points) {
    assert.deepEqual(point.versions, { '2': 480 }, 'every answer named version 2');
    const side = point.serverSide;
    assert.equal(side?.version, '2');
    // The statistics are read on a connection of their own while the load runs, so up to one
    // answer per connection in flight (8 at c=8) can fall on either side of the first read.
    assert.ok(side && side.requests >= 480 - 8 && side.executions > 0, JSON.stringify(side));
    assert.ok(side.averageBatch >= 1 && side.computeMsPerRequest > 0, JSON.stringify(side));
  }
  // c=1 ran passes of one row and c=8 fuller ones: two batch sizes, so version 2's line was fitted.
  assert.ok((report.points[1]?.serverSide?.averageBatch ?? 0) > 2, JSON.stringify(report.points[1]?.serverSide));
  const fit = report.fit;
  assert.ok(fit, `a fit: ${JSON.stringify(report.warnings)}`);
  assert.ok(fit.samples.some((sample) => sample.batchSize === 1) && fit.samples.length >= 2, JSON.stringify(fit));
  assert.ok(!report.warnings.some((warning) => /fewer than two batch sizes|several model versions/.test(warning)));
});

test('a split: both versions answered, bench says so and reads the version that answered most', async (t) => {
  const server = await twoVersions(t, {
    model_policies: { affine: { traffic: { split: { '1': 50, '2': 50 } } } },
  });
  const report = await benchReport(t, server, ['--concurrency', '4', '--requests', '80']);
  const [point] = report.points;
  const versions = point?.versions ?? {};
  const [one = 0, two = 0] = [versions['1'], versions['2']];
  assert.ok(one > 0 && two > 0 && one + two === 80, JSON.stringify(versions));
  const most = one >= two ? '1' : '2';
  const side = point?.serverSide;
  assert.equal(side?.version, most);
  // That version's counters alone: its own answers (less the 4 that can be in flight as the
  // statistics are first read, as above), fewer than both versions' together.
  assert.ok(side && side.requests >= Math.max(one, two) - 4 && side.requests < 80, JSON.stringify({ side, versions }));
  assert.ok(
    report.warnings.some((warning) => warning.startsWith('several model versions answered 1 point(s)')),
    JSON.stringify(report.warnings),
  );
});
