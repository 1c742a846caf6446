import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { assertOneLineError, cli, npy, v2Line } from './fixtures.js';

const ROWS = 40;

async function affineJob(dir: string): Promise<{ archive: string; input: string }> {
  const archive = await packAffine(dir, { config: 'max_batch_size: 4\n' });
  const input = join(dir, 'rows.jsonl');
  const lines = Array.from({ length: ROWS }, (_, i) => (i === 7 ? '{"x": [[1, 2]]}' : v2Line([[i, -i, i / 2, 1]])));
  await writeFile(input, `${lines.join('\n')}\n`);
  return { archive, input };
}

test('exit codes: 0 when every row scored, 1 when some failed, 2 for usage; one line per error', async (t) => {
  const dir = await tempDir(t);
  const { archive, input } = await affineJob(dir);
  await writeFile(join(dir, 'good.jsonl'), `${v2Line([[1, 2, 3, 4]])}\n${v2Line([[5, 6, 7, 8]])}\n`);
  await writeFile(join(dir, 'fortran.npy'), npy('<f4', [2, 4], new Float32Array(8), { fortran: true }));
  const predict = (...args: string[]) => cli(['predict', archive, ...args]);
  const [good, some, usage, shard, both, missing, glob, fortran, folder] = await Promise.all([
    predict('--input', join(dir, 'good.jsonl'), '--output', join(dir, 'good.out.jsonl')),
    predict('--input', input, '--output', join(dir, 'out.jsonl'), '--progress-interval', '1ms'),
    predict('--output', join(dir, 'x.jsonl')),
    predict('--input', input, '--output', join(dir, 'x.jsonl'), '--shard', '4/4'),
    predict('--input', input, '--output', join(dir, 'x.jsonl'), '--resume', '--force'),
    predict('--input', join(dir, 'absent.jsonl'), '--output', join(dir, 'x.jsonl')),
    predict('--input', input, '--output', join(dir, 'x.jsonl'), '--glob', '*.png'),
    predict('--input', join(dir, 'fortran.npy'), '--output', join(dir, 'x.jsonl')),
    predict('--input', input, '--output', join(dir, 'absent', 'x.jsonl')),
  ]);
  assert.equal(good.code, 0, good.stderr);
  assert.match(good.stdout, /^scored 2 rows in [\d.]+ s \(\d+ rows\/s\): 2 records → .*good\.out\.jsonl\n$/);

  assert.equal(some.code, 1);
  assert.match(
    some.stdout,
    /scored 40 rows .*: 39 records → .*out\.jsonl\n1 rows failed → .*out\.jsonl\.errors\.jsonl\n$/,
  );
  const progress = some.stderr.trimEnd().split('\n');
  assert.match(progress.at(-1) ?? '', /\[BS_ERR_PREDICT_ROWS_FAILED\]$/);
  assert.ok(progress.length > 1, 'plain progress lines when stderr is not a terminal');
  for (const line of progress.slice(0, -1)) {
    assert.match(line, /^predict: \d+\/40 rows \([\d.]+%\), [\d.]+ rows\/s, ETA (\d+s|\?), \d failed, \d+ saved$/);
  }

  assertOneLineError(usage, 2, 'BS_ERR_USAGE');
  assertOneLineError(shard, 2, 'BS_ERR_USAGE');
  assert.match(shard.stderr, /0 ≤ I < N/);
  assertOneLineError(both, 2, 'BS_ERR_USAGE');
  assertOneLineError(missing, 1, 'BS_ERR_INPUT_FILE');
  assertOneLineError(glob, 2, 'BS_ERR_USAGE');
  assertOneLineError(fortran, 2, 'BS_ERR_DATASET');
  assert.match(fortran.stderr, /Fortran order/);
  assertOneLineError(folder, 2, 'BS_ERR_USAGE');

  // An existing output needs --force; --quiet prints nothing but the one error line.
  const exists = await predict('--input', join(dir, 'good.jsonl'), '--output', join(dir, 'good.out.jsonl'));
  assertOneLineError(exists, 1, 'BS_ERR_OUTPUT_EXISTS');
  const before = await readFile(join(dir, 'out.jsonl'));
  const forced = await predict('--input', input, '--output', join(dir, 'out.jsonl'), '--force', '--quiet');
  assertOneLineError(forced, 1, 'BS_ERR_PREDICT_ROWS_FAILED');
  assert.equal(forced.stdout, '');
  assert.ok((await readFile(join(dir, 'out.jsonl'))).equals(before), 'the same job writes the same bytes');
  const replaced = await predict('--input', join(dir, 'good.jsonl'), '--output', join(dir, 'out.jsonl'), '--force');
  assert.equal(replaced.code, 0, replaced.stderr);
  assert.ok(!(await readdir(dir)).includes('out.jsonl.errors.jsonl'), "an earlier run's errors file goes too");
});

test('--shard I/N: N processes, merged, equal one process; merge refuses missing, repeated, unfinished or changed shards', async (t) => {
  const dir = await tempDir(t);
  const { archive, input } = await affineJob(dir);
  const predict = (output: string, ...args: string[]) =>
    cli(['predict', archive, '--input', input, '--output', join(dir, output), '--quiet', ...args]);
  const runs = await Promise.all([
    predict('whole.jsonl'),
    ...[0, 1, 2].map((index) => predict('out.jsonl', '--shard', `${index}/3`)),
  ]);
  assert.deepEqual(
    runs.map((run) => run.code),
    [1, 1, 0, 0],
    'the failing row (line 8) is in shard 0',
  );
  const shard = (index: number) => join(dir, `out.shard-${index}-of-3.jsonl`);
  const lines = (await readFile(shard(1), 'utf8')).trim().split('\n');
  assert.deepEqual(
    [JSON.parse(lines[0] as string).id, lines.length],
    ['14', 13],
    'shard 1 of 3 holds rows 13–25, lines 14–26',
  );

  const merge = (output: string, ...shards: string[]) =>
    cli(['predict', 'merge', '--output', join(dir, output), ...shards]);
  // The shell's out.shard-*.jsonl also matches shard 0's errors file: merge passes over it.
  const merged = await merge('merged.jsonl', shard(2), shard(0), `${shard(0)}.errors.jsonl`, shard(1));
  assert.equal(merged.code, 1, merged.stderr);
  assert.match(merged.stdout, /^merged 3 shards: 40 rows, 39 records → .*merged\.jsonl\n/);
  for (const suffix of ['', '.errors.jsonl']) {
    assert.ok(
      (await readFile(join(dir, `merged.jsonl${suffix}`))).equals(await readFile(join(dir, `whole.jsonl${suffix}`))),
      `merged${suffix} equals the single run's`,
    );
  }

  const [missing, repeated, unsharded, exists] = await Promise.all([
    merge('m.jsonl', shard(0), shard(2)),
    merge('m.jsonl', shard(0), shard(1), shard(1), shard(2)),
    merge('m.jsonl', join(dir, 'whole.jsonl')),
    merge('merged.jsonl', shard(0), shard(1), shard(2)),
  ]);
  assertOneLineError(missing, 2, 'BS_ERR_SHARD_MERGE');
  assert.match(missing.stderr, /shard 1\/3 missing/);
  assertOneLineError(repeated, 2, 'BS_ERR_SHARD_MERGE');
  assert.match(repeated.stderr, /given twice/);
  assertOneLineError(unsharded, 2, 'BS_ERR_SHARD_MERGE');
  assertOneLineError(exists, 1, 'BS_ERR_OUTPUT_EXISTS');
  const checkpoint = `${shard(2)}.checkpoint.json`;
  const finished = await readFile(checkpoint, 'utf8');
  await writeFile(checkpoint, finished.replace('"finished"', '"running"'));
  const unfinished = await merge('m.jsonl', shard(0), shard(1), shard(2));
  assertOneLineError(unfinished, 2, 'BS_ERR_SHARD_MERGE');
  assert.match(unfinished.stderr, /not finished/);
  await writeFile(checkpoint, finished);
  await appendFile(shard(1), '{}\n');
  const changed = await merge('m.jsonl', shard(0), shard(1), shard(2));
  assertOneLineError(changed, 2, 'BS_ERR_SHARD_MERGE');
  assert.match(changed.stderr, /changed since/);
});
