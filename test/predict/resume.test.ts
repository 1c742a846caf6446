import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { cli, finished, start, v2Line } from './fixtures.js';

const ROWS = 300;
const STALL_AT = 200;

/**
 * With BATCHSERVE_TEST_STALL_AT set, a batch holding a row whose values reach it never
 * finishes: the child scores and commits the rows before it, then hangs mid-run, still
 * holding rows in flight, until it is killed.
 */
const STALLING_HANDLER = `export async function inference(inputs, context) {
  const stallAt = Number(process.env.BATCHSERVE_TEST_STALL_AT);
  if (stallAt && inputs.x.data.some((value) => value >= stallAt)) await new Promise(() => {});
  return context.builtins.tensor.inference(inputs, context);
}
`;

async function dataset(dir: string): Promise<string> {
  const lines = Array.from({ length: ROWS }, (_, i) => (i % 37 === 5 ? '{"x": "no"}' : v2Line([[i, i, i, i]])));
  const input = join(dir, 'rows.jsonl');
  await writeFile(input, `${lines.join('\n')}\n`);
  return input;
}

test(
  "after kill -9 mid-run, --resume finishes with exactly an uninterrupted run's output",
  { concurrency: true },
  async (t) => {
    // The formats run side by side: each child spends most of its time starting up.
    await Promise.all(
      (['jsonl', 'csv', 'parquet'] as const).map((format) => t.test(format, () => killAndResume(t, format))),
    );
  },
);

async function killAndResume(t: TestContext, format: 'jsonl' | 'csv' | 'parquet'): Promise<void> {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, { handlerSource: STALLING_HANDLER, config: 'max_batch_size: 8\n' });
  const input = await dataset(dir);
  const args = (output: string, ...extra: string[]): string[] => [
    'predict',
    archive,
    '--input',
    input,
    '--output',
    join(dir, output),
    '--progress-interval',
    '20ms',
    '--checkpoint-interval',
    '20ms',
    ...extra,
  ];

  const child = start(args(`out.${format}`), { BATCHSERVE_TEST_STALL_AT: String(STALL_AT) });
  const outcome = finished(child);
  // Progress lines say how many rows the checkpoint holds; kill once it holds most of those before the stall.
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      seen += chunk.toString();
      const saved = [...seen.matchAll(/(\d+) saved/g)].map((match) => Number(match[1]));
      if (saved.some((count) => count >= STALL_AT - 16)) resolve();
    });
    void outcome.then((run) => reject(new Error(`the run ended before it was killed: ${run.stderr}`)));
  });
  child.kill('SIGKILL');
  assert.equal((await outcome).code, null, 'killed, not exited');
  const checkpoint = JSON.parse(await readFile(join(dir, `out.${format}.checkpoint.json`), 'utf8'));
  assert.equal(checkpoint.state, 'running');
  assert.ok(checkpoint.done >= STALL_AT - 16 && checkpoint.done < ROWS, `checkpointed ${checkpoint.done} rows`);
  assert.ok(!(await readdir(dir)).includes(`out.${format}`), 'no output before the job finishes');

  if (format === 'jsonl') {
    const again = await cli(args(`out.${format}`));
    assert.equal(again.code, 2);
    assert.match(again.stderr, /pass --resume to finish it or --force to start again \[BS_ERR_CHECKPOINT\]/);
  }

  // Both runs finish with the malformed rows failed: exit 1.
  const [resumed, whole] = await Promise.all([
    cli(args(`out.${format}`, '--resume', '--quiet')),
    cli(args(`whole.${format}`, '--quiet')),
  ]);
  assert.equal(resumed.code, 1, resumed.stderr);
  assert.match(resumed.stderr, /BS_ERR_PREDICT_ROWS_FAILED/);
  assert.equal(whole.code, 1, whole.stderr);
  assert.ok(
    (await readFile(join(dir, `out.${format}`))).equals(await readFile(join(dir, `whole.${format}`))),
    'the resumed output is byte for byte the uninterrupted one: same rows, same order, no duplicates, no gaps',
  );
  assert.equal(
    await readFile(join(dir, `out.${format}.errors.jsonl`), 'utf8'),
    await readFile(join(dir, `whole.${format}.errors.jsonl`), 'utf8'),
  );
  const done = JSON.parse(await readFile(join(dir, `out.${format}.checkpoint.json`), 'utf8'));
  const malformed = Array.from({ length: ROWS }, (_, i) => i).filter((i) => i % 37 === 5).length;
  assert.deepEqual([done.state, done.done, done.failed], ['finished', ROWS, malformed]);
  assert.ok(!(await readdir(dir)).includes(`out.${format}.partial`), 'the work folder is gone');
  if (format === 'jsonl') {
    const ids = (await readFile(join(dir, 'out.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => Number(JSON.parse(line).id));
    assert.deepEqual(
      ids,
      Array.from({ length: ROWS }, (_, i) => i + 1).filter((line) => (line - 1) % 37 !== 5),
    );
  }
}
