import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { readFile, readdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { DropReason } from '../../src/experiment/prediction-log-writer.js';
import { PredictionLogWriter } from '../../src/experiment/prediction-log-writer.js';
import type { FeedbackRecord } from '../../src/experiment/log-records.js';
import { findLoggedPrediction } from '../../src/experiment/prediction-index.js';
import { tempDir } from '../fixtures/temp.js';

const record = (n: number): FeedbackRecord => ({
  type: 'feedback',
  time: '2026-12-01T00:00:00.000Z',
  id: `request-${n}`,
  model: 'm',
  version: '1',
  value: n,
});

function writer(folder: string, options: Partial<ConstructorParameters<typeof PredictionLogWriter>[0]> = {}) {
  const drops: Record<string, number> = {};
  const failures: Error[] = [];
  const log = new PredictionLogWriter({
    folder,
    maxFileSize: 1 << 20,
    maxFiles: 10,
    dropped: (records: number, reason: DropReason) => {
      drops[reason] = (drops[reason] ?? 0) + records;
    },
    failed: (error) => failures.push(error),
    ...options,
  });
  return { log, drops, failures };
}

async function linesOf(folder: string): Promise<unknown[]> {
  const names = (await readdir(folder)).sort();
  const text = (await Promise.all(names.map((name) => readFile(join(folder, name), 'utf8')))).join('');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line));
}

test('records are written as JSON lines in order, once flushed', async (t) => {
  const folder = join(await tempDir(t), 'log');
  const { log, drops } = writer(folder);
  for (let n = 0; n < 1500; n++) assert.equal(log.append(record(n)), true);
  await log.close();
  const lines = (await linesOf(folder)) as FeedbackRecord[];
  assert.deepEqual(
    lines.map((line) => line.value),
    Array.from({ length: 1500 }, (_, n) => n),
  );
  assert.deepEqual(await readdir(folder), ['predictions-000001.jsonl']);
  assert.deepEqual(drops, {});
  assert.equal(log.append(record(1)), false, 'a closed log takes nothing');
  assert.deepEqual(drops, { closed: 1 });
});

test('files rotate by size, the oldest beyond max_files are deleted, and a restart goes on in the newest', async (t) => {
  const folder = join(await tempDir(t), 'log');
  const lineBytes = JSON.stringify(record(100)).length + 1;
  const first = writer(folder, { maxFileSize: lineBytes * 10, maxFiles: 3, flushIntervalMs: 1 });
  for (let n = 100; n < 150; n++) {
    first.log.append(record(n));
    // One record per write, so each rotation decision sees the file grow line by line.
    await first.log.flush();
  }
  await first.log.close();
  assert.deepEqual(await readdir(folder), [
    'predictions-000003.jsonl',
    'predictions-000004.jsonl',
    'predictions-000005.jsonl',
  ]);
  const kept = (await linesOf(folder)) as FeedbackRecord[];
  assert.deepEqual(
    kept.map((line) => line.value),
    Array.from({ length: 30 }, (_, n) => 120 + n),
    'the newest 30 records, in three files of 10',
  );

  // The newest file is full: a restart starts the next one. With room, it appends.
  const second = writer(folder, { maxFileSize: lineBytes * 10, maxFiles: 3 });
  second.log.append(record(150));
  await second.log.close();
  assert.equal((await readdir(folder)).at(-1), 'predictions-000006.jsonl');
  const third = writer(folder, { maxFileSize: lineBytes * 10, maxFiles: 3 });
  third.log.append(record(151));
  await third.log.close();
  assert.equal(
    await readFile(join(folder, 'predictions-000006.jsonl'), 'utf8'),
    `${JSON.stringify(record(150))}\n${JSON.stringify(record(151))}\n`,
  );
});

test('a disk that refuses writes (/dev/full) drops the records, counts them, and the writer keeps taking more', async (t) => {
  const folder = await tempDir(t);
  // The newest log file has room (a character device has size 0), so writing goes on in it.
  await symlink('/dev/full', join(folder, 'predictions-000001.jsonl'));
  const { log, drops, failures } = writer(folder);
  for (let n = 0; n < 20; n++) assert.equal(log.append(record(n)), true, 'appending never fails or waits');
  await log.flush();
  assert.deepEqual(drops, { write_failed: 20 });
  assert.match(failures[0]?.message ?? '', /ENOSPC/);
  log.append(record(20));
  await log.flush();
  assert.deepEqual(drops, { write_failed: 21 }, 'each failed write is counted, and the next is tried');
  await log.close();
});

test('a disk that does not answer (a FIFO nobody reads) fills the buffer; the rest is dropped and counted', async (t) => {
  const folder = await tempDir(t);
  const fifo = join(folder, 'predictions-000001.jsonl');
  execFileSync('mkfifo', [fifo]);
  const { log, drops } = writer(folder, { maxBuffered: 100, flushIntervalMs: 1 });
  for (let n = 0; n < 100; n++) log.append(record(n));
  // The first write is under way, stuck opening the FIFO; what it took left the buffer.
  await new Promise((done) => setTimeout(done, 20));
  for (let n = 100; n < 400; n++) log.append(record(n));
  assert.equal(log.pending, 100);
  assert.deepEqual(drops, { buffer_full: 200 });
  // A reader comes: the writes go through, and everything kept arrives.
  const chunks: Buffer[] = [];
  const reader = createReadStream(fifo).on('data', (chunk) => chunks.push(chunk as Buffer));
  const ended = new Promise<void>((done) => reader.on('end', () => done()));
  await log.close();
  await ended;
  const values = Buffer.concat(chunks)
    .toString('utf8')
    .trim()
    .split('\n')
    .map((line) => (JSON.parse(line) as FeedbackRecord).value);
  assert.equal(values.length, 200);
  assert.deepEqual(values.slice(0, 3), [0, 1, 2]);
});

test('findLoggedPrediction finds the newest served prediction of an id across files, not shadows or other models', async (t) => {
  const folder = await tempDir(t);
  const prediction = (id: string, version: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ type: 'prediction', id, model: 'm', version, routing: 'split', status: 200, ...extra });
  await writeFile(
    join(folder, 'predictions-000001.jsonl'),
    `${prediction('a', '1', { prediction: 'cat' })}\nnot json\n${prediction('b', '1')}\n`,
  );
  await writeFile(
    join(folder, 'predictions-000002.jsonl'),
    `${prediction('a', '2', { shadow: true, routing: 'shadow' })}\n${prediction('b', '2', { model: 'other' })}\n`,
  );
  assert.deepEqual(await findLoggedPrediction(folder, 'm', 'a'), { version: '1', prediction: 'cat' });
  assert.deepEqual(await findLoggedPrediction(folder, 'm', 'b'), { version: '1', prediction: undefined });
  assert.equal(await findLoggedPrediction(folder, 'm', 'c'), undefined);
  assert.equal(await findLoggedPrediction(join(folder, 'missing'), 'm', 'a'), undefined);
});
