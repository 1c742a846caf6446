import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function batchserve(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/batchserve.js', ...args], { cwd: ROOT }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
  });
}

test('experiment plan prints the sample size per variant and in total for a rate', async () => {
  const { code, stdout } = await batchserve('experiment', 'plan', '--baseline', '0.10', '--mde', '0.02');
  assert.equal(code, 0);
  assert.match(stdout, /rate metric: 10% → 12% \(\+2 pp\)/);
  assert.match(stdout, /sample size: 3,841 per variant, 7,682 in total/);
});

test('experiment plan --relative --variants 3 --json: a lift on the baseline, alpha split by Bonferroni', async () => {
  const { code, stdout } = await batchserve(
    ...['experiment', 'plan', '--baseline', '0.10', '--mde', '0.2', '--relative', '--variants', '3', '--json'],
  );
  assert.equal(code, 0);
  const plan = JSON.parse(stdout);
  assert.equal(plan.metric, 'rate');
  assert.ok(Math.abs(plan.target - 0.12) < 1e-12);
  assert.equal(plan.alphaPerComparison, 0.025);
  assert.equal(plan.total, plan.perVariant * 3);
});

test('experiment plan --sd sizes a mean metric', async () => {
  const args = ['experiment', 'plan', '--baseline', '5', '--mde', '0.5', '--sd', '1', '--json'];
  const { code, stdout } = await batchserve(...args);
  assert.equal(code, 0);
  const { metric, perVariant, total } = JSON.parse(stdout);
  assert.deepEqual({ metric, perVariant, total }, { metric: 'mean', perVariant: 64, total: 128 });
});

test('bad flags end with one usage line and exit code 2', async () => {
  const cases = [
    ['--baseline', 'ten', '--mde', '0.02'],
    ['--baseline', '1.5', '--mde', '0.02'],
    ['--baseline', '0.95', '--mde', '0.1'],
    ['--baseline', '0.1', '--mde', '0.02', '--alpha', '1'],
    ['--baseline', '0.1', '--mde', '0.02', '--power', '0'],
    ['--baseline', '0.1', '--mde', '0.02', '--variants', '1'],
    ['--baseline', '5', '--mde', '1', '--sd', '-1'],
    ['--baseline', '0.1', '--mde', '0'],
    ['--mde', '0.02'],
  ];
  const results = await Promise.all(cases.map((flags) => batchserve('experiment', 'plan', ...flags)));
  for (const [index, { code, stdout, stderr }] of results.entries()) {
    const flags = cases[index] ?? [];
    assert.equal(code, 2, flags.join(' '));
    assert.equal(stdout, '', flags.join(' '));
    assert.equal(stderr.trimEnd().split('\n').length, 1, `${flags.join(' ')}: ${stderr}`);
  }
});
