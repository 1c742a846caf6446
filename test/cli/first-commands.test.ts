import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { cleanEnv, runChild, serveChild } from './container-child.js';

/** The commands under the start-up block's `try` heading, one a line. */
function tryLines(block: string): string[] {
  const after = block.slice(block.indexOf('\n  try\n') + '\n  try\n'.length);
  return after
    .split('\n')
    .filter((line) => line.startsWith('    '))
    .map((line) => line.trim());
}

/** Pasted into a shell somewhere else: the key files are found by their full paths. */
async function paste(dir: string, command: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const elsewhere = join(dir, 'elsewhere');
  await mkdir(elsewhere, { recursive: true });
  return runChild('bash', ['-c', command], { cwd: elsewhere, env: cleanEnv() });
}

test("serve's start-up block offers readiness, one inference and one bench, which run as printed", async (t) => {
  const dir = await tempDir(t);
  // 32 values a row: more than the block writes out, so node writes the request.
  const archive = await packAffine(dir, { width: 32 });
  const served = await serveChild(t, ['--models', `affine=${archive}`, '--startup-format', 'text'], { cwd: dir });
  const [ready, infer, bench, ...rest] = tryLines(served.stdout());
  assert.deepEqual(rest, []);
  assert.match(ready ?? '', /^curl -s http:\/\/127\.0\.0\.1:\d+\/v2\/health\/ready /);
  assert.match(infer ?? '', /^node -e .*\| curl -s /);
  assert.match(bench ?? '', /^node \S+bin\/batchserve\.js bench .*--token-file \S+batchserve\.key /);

  assert.equal((await paste(dir, ready ?? '')).stdout, '200\n');
  const answer = await paste(dir, infer ?? '');
  const outputs = (JSON.parse(answer.stdout) as { outputs: { shape: number[]; data: number[] }[] }).outputs;
  assert.deepEqual(outputs[0]?.shape, [1, 32]);
  assert.ok(
    outputs[0]?.data.every((value) => value === 1),
    'y = 2·0 + 1',
  );
  const swept = await paste(dir, bench ?? '');
  assert.equal(swept.code, 0, swept.stderr);
  assert.match(swept.stderr, /^bench: management token from \S+batchserve\.key$/m);
  assert.match(swept.stderr, /bench: put affine back as found/);
});

test("in TorchServe's key mode the inference command carries the inference key, read from the key file", async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  const served = await serveChild(
    t,
    ['--models', `affine=${archive}`, '--startup-format', 'text', '--auth-mode', 'torchserve'],
    { cwd: dir, env: cleanEnv({ BATCHSERVE_KEY_FILE: 'key_file.json' }) },
  );
  const [ready, infer, ...rest] = tryLines(served.stdout());
  assert.deepEqual(rest, [], 'bench sends no inference key, so none is offered');
  assert.equal((await paste(dir, ready ?? '')).stdout, '200\n');
  assert.match(
    infer ?? '',
    /^curl -s \S+\/v2\/models\/affine\/infer -H "Authorization: Bearer \$\(node -p .*key_file\.json.*\)" /,
  );
  const answer = JSON.parse((await paste(dir, infer ?? '')).stdout) as { outputs: { data: number[] }[] };
  assert.deepEqual(answer.outputs[0]?.data, [1, 1, 1, 1]);
});
