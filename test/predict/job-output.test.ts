import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFile, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { readCheckpoint, type Checkpoint, type JobIdentity } from '../../src/predict/checkpoint.js';
import { openCsvWriter } from '../../src/predict/csv-writer.js';
import { completeFinish, JobOutput } from '../../src/predict/job-output.js';
import { jobPaths, type OutputFormat } from '../../src/predict/job-paths.js';
import { openJsonlWriter } from '../../src/predict/jsonl-writer.js';
import { openParquetWriter } from '../../src/predict/parquet-writer.js';
import type { RecordWriter, ScoredRecord } from '../../src/predict/records.js';
import { tempDir } from '../fixtures/temp.js';

const ROWS = 12;
const JOB: JobIdentity = {
  archive: { path: '/m.mar', size: 1, mtimeMs: 1 },
  input: { path: '/in.jsonl', kind: 'jsonl', size: 1, mtimeMs: 1 },
  format: 'csv',
  options: { glob: null, csvColumns: null, idColumn: null, device: null, shard: null },
};
const base = { job: JOB, rows: { start: 0, end: ROWS, total: ROWS } };
const MODEL = { name: 'm', version: '1' };

/** Row i: a record with an INT64 beyond 2^53 and a NaN (exact round trips), except every 5th fails. */
function outcome(i: number): { record: ScoredRecord } | { id: string; failure: { reason: string; code: string } } {
  if (i % 5 === 2) return { id: `r${i}`, failure: { reason: `bad, "${i}"`, code: 'BS_ERR_INFERENCE_INPUT' } };
  return {
    record: {
      id: `r,${i}`,
      model: 'm',
      version: '1',
      outputs: {
        y: { datatype: 'FP32', shape: [1, 2], data: [i / 4, i === 3 ? NaN : -i] },
        n: { datatype: 'INT64', shape: [1], data: [2n ** 60n + BigInt(i)] },
      },
      answer: undefined,
    },
  };
}

const WRITERS: Record<OutputFormat, (path: string) => Promise<RecordWriter>> = {
  jsonl: openJsonlWriter,
  csv: openCsvWriter,
  parquet: openParquetWriter,
};

/** What one writer given every record at once writes. */
async function direct(format: OutputFormat, path: string): Promise<Buffer> {
  const writer = await WRITERS[format](path);
  for (let i = 0; i < ROWS; i++) {
    const next = outcome(i);
    if ('record' in next) await writer.write(next.record);
  }
  await writer.close();
  return readFile(path);
}

for (const format of ['jsonl', 'csv', 'parquet'] as const) {
  test(`${format}: a crash loses only the open segment; resumed, the output is what one writer writes`, async (t) => {
    const dir = await tempDir(t);
    const paths = jobPaths(join(dir, `out.${format}`));
    const job = { ...base, job: { ...JOB, format } };
    const first = await JobOutput.begin({ paths, format, base: job });
    for (let i = 0; i < 4; i++) {
      await first.write(i, outcome(i));
      if (i % 2 === 1) await first.commit();
    }
    for (let i = 4; i < 7; i++) await first.write(i, outcome(i));
    assert.deepEqual(first.saved, { done: 4, records: 3, failed: 1 });
    assert.deepEqual(first.written, { done: 7, records: 6, failed: 1 });
    // The process dies: the open segment is never committed, and a commit was cut off halfway.
    await first.abandon();
    await appendFile(paths.committed, 'half a segment');
    await appendFile(paths.partialErrors, '{"row": 99');

    const checkpoint = (await readCheckpoint(paths.checkpoint)) as Checkpoint;
    assert.deepEqual([checkpoint.state, checkpoint.done, checkpoint.records, checkpoint.failed], ['running', 4, 3, 1]);
    const second = await JobOutput.begin({ paths, format, base: job, resume: checkpoint });
    for (let i = checkpoint.done; i < ROWS; i++) await second.write(i, outcome(i));
    const finished = await second.finish(MODEL);

    assert.deepEqual([finished.state, finished.done, finished.records, finished.failed], ['finished', ROWS, 10, 2]);
    assert.ok((await readFile(paths.output)).equals(await direct(format, join(dir, `direct.${format}`))));
    assert.equal(finished.outputBytes, (await readFile(paths.output)).length);
    const errors = (await readFile(paths.errors, 'utf8'))
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    assert.deepEqual(
      errors.map((error) => [error.row, error.id, error.code]),
      [2, 7, 12].filter((i) => i < ROWS).map((i) => [i, `r${i}`, 'BS_ERR_INFERENCE_INPUT']),
    );
    assert.deepEqual((await readdir(dir)).sort(), [
      `direct.${format}`,
      `out.${format}`,
      `out.${format}.checkpoint.json`,
      `out.${format}.errors.jsonl`,
    ]);
  });
}

test('a record unlike the first is a failed row, also after a resume (the checkpoint keeps the layout)', async (t) => {
  const dir = await tempDir(t);
  const paths = jobPaths(join(dir, 'out.jsonl'));
  const job = { ...base, job: { ...JOB, format: 'jsonl' as const } };
  const wide: ScoredRecord = {
    id: 'wide',
    model: 'm',
    version: '1',
    outputs: {
      y: { datatype: 'FP32', shape: [1, 3], data: [1, 2, 3] },
      n: { datatype: 'INT64', shape: [1], data: [1n] },
    },
    answer: undefined,
  };
  const first = await JobOutput.begin({ paths, format: 'jsonl', base: job });
  await first.write(0, outcome(0));
  await first.write(1, { record: wide });
  await first.commit();
  await first.abandon();
  const second = await JobOutput.begin({
    paths,
    format: 'jsonl',
    base: job,
    resume: await readCheckpoint(paths.checkpoint),
  });
  await second.write(2, { record: { ...wide, id: 'answer', outputs: undefined, answer: '{"label": "cat"}' } });
  await second.write(3, outcome(3));
  const finished = await second.finish(MODEL);
  assert.deepEqual([finished.records, finished.failed], [2, 2]);
  const errors = (await readFile(paths.errors, 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line));
  assert.deepEqual(
    errors.map((error) => [error.row, error.code]),
    [
      [1, 'BS_ERR_INFERENCE_FAILED'],
      [2, 'BS_ERR_INFERENCE_FAILED'],
    ],
  );
  assert.match(errors[0].reason, /FP32 \[1,3\]; the first row's was FP32 \[1,2\]/);
});

test('finishing is safe to repeat after a crash between its renames', async (t) => {
  const dir = await tempDir(t);
  const paths = jobPaths(join(dir, 'out.jsonl'));
  const output = await JobOutput.begin({ paths, format: 'jsonl', base: { ...base, job: { ...JOB, format: 'jsonl' } } });
  for (let i = 0; i < ROWS; i++) await output.write(i, outcome(i));
  const finished = await output.finish(MODEL);
  const finishing: Checkpoint = { ...finished, state: 'finishing' };
  const again = await completeFinish(paths, finishing);
  assert.equal(again.state, 'finished');
  assert.equal((await readFile(paths.output)).length, finished.outputBytes);
  await appendFile(paths.output, 'x');
  await assert.rejects(completeFinish(paths, finishing), { code: 'BS_ERR_CHECKPOINT' });
});
