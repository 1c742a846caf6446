import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { packArchive } from '../../src/archive/pack.js';
import type { ExperimentReport } from '../../src/experiment/report-types.js';
import { DEMO_MODEL_PATH } from '../../src/runtime/demo-model.js';
import { startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const EXAMPLES = join(ROOT, 'examples');

function run(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, args, { cwd: ROOT }, (error, stdout, stderr) =>
      done({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

test("README's experiment walkthrough, small: a 50/50 split of the demo model, synthetic feedback, the report finds the known winner", async (t) => {
  const root = await tempDir(t);
  const archives = [];
  for (const version of ['1', '2']) {
    const packed = await packArchive({
      modelName: 'orientation',
      version,
      serializedFile: DEMO_MODEL_PATH,
      handler: 'image-classifier',
      configFile: join(EXAMPLES, 'orientation/model-config.yaml'),
      extraFiles: [join(EXAMPLES, 'orientation/labels.txt')],
      exportPath: join(root, `v${version}`),
    });
    archives.push(`orientation=${packed.path}`);
  }
  const example = parse(await readFile(join(EXAMPLES, 'experiment/server.yaml'), 'utf8')) as Record<string, unknown>;
  const logs = join(root, 'logs');
  const server = await startTestServer(t, { ...example, models: archives, prediction_log: logs });

  // Conversions at 20 % on version 1 and 90 % on version 2: a difference no sample of 80 misses.
  const client = await run(
    ...[join(EXAMPLES, 'experiment/simulate-feedback.js'), server.urls.inference],
    ...['--requests', '80', '--rates', '1=0.2,2=0.9'],
  );
  assert.equal(client.code, 0, client.stderr);
  const counts = [...client.stdout.matchAll(/^version (\d): (\d+) requests/gm)].map((match) => Number(match[2]));
  assert.equal(counts.length, 2, client.stdout);
  assert.ok(
    counts.every((count) => count > 20),
    `the sticky split spread the users: ${client.stdout}`,
  );
  await server.close();

  const report = await run(
    ...['bin/batchserve.js', 'experiment', 'report', '--log', logs, '--model', 'orientation'],
    ...['--planned-n', '20', '--json'],
  );
  assert.equal(report.code, 0, report.stderr);
  const parsed = JSON.parse(report.stdout) as ExperimentReport;
  assert.equal(parsed.log.served_predictions, 80);
  assert.equal(parsed.log.feedback_records, 80);
  assert.equal(parsed.kind, 'rate', 'binary rewards are compared as a rate');
  assert.deepEqual(
    parsed.variants.map((variant) => variant.n),
    counts,
  );
  assert.equal(parsed.verdict.winner, '2', parsed.verdict.text);
});
