import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PredictionLogReadError } from '../../src/core/errors.js';
import { joinPredictionLog } from '../../src/experiment/join.js';
import { findLogFiles, parseLogLine } from '../../src/experiment/log-reader.js';
import { tempDir } from '../fixtures/temp.js';
import { MODEL, feedback, prediction, writeLogFile } from './log-fixture.js';

test('a rotated log joins late feedback, skips broken lines and leaves out shadows and other models', async (t) => {
  const folder = join(await tempDir(t), MODEL);
  await writeLogFile(folder, 1, [
    prediction('a', '1', 0, { prediction: 'cat' }),
    prediction('a', '2', 0, { shadow: true, routing: 'shadow' }),
    prediction('b', '2', 1, { prediction: ['cat', 'dog'], rows: 2 }),
    prediction('x', '1', 2, { model: 'other' }),
    'not json',
    '[1, 2]',
    '{"type": "metrics", "id": "a", "model": "ranker", "time": "2026-01-01T00:00:00Z"}',
    // Feedback for a prediction that lands in a later file.
    feedback('c', 3, { value: 1 }),
  ]);
  await writeLogFile(folder, 2, [
    feedback('a', 100, { value: 1, label: 'cat' }),
    // The earlier correction of b comes later in the file order; time decides, not order.
    feedback('b', 200, { reward: 0.5 }),
    feedback('x', 100, { value: 1, model: 'other' }),
    feedback('gone', 100, { value: 1 }),
  ]);
  await writeLogFile(
    folder,
    3,
    [prediction('c', '2', 2), feedback('b', 150, { reward: 0.1 })],
    '{"type":"prediction","time":"2026-01-01T00:00:04Z","id":"d","mo',
  );

  const log = await joinPredictionLog(folder, MODEL);
  assert.equal(log.files, 3);
  assert.deepEqual(
    log.predictions.map((p) => [p.id, p.version]),
    [
      ['a', '1'],
      ['b', '2'],
      ['c', '2'],
    ],
  );
  assert.equal(log.shadowRecords, 1);
  assert.equal(log.feedbackRecords, 5, "the other model's feedback is not counted");
  assert.equal(log.unjoinedFeedback, 1, 'gone has no prediction');
  assert.equal(log.skippedLines, 4, 'three broken lines and the cut-off last one');
  const [a, b, c] = log.predictions;
  assert.equal(a?.prediction, 'cat');
  assert.equal(a?.feedback?.label, 'cat');
  assert.equal(b?.prediction, undefined, 'a many-row request has no single label');
  assert.equal(b?.feedback?.reward, 0.5, 'the last feedback in time wins');
  assert.equal(c?.feedback?.value, 1, 'feedback written before its prediction still joins');
});

test('--log names a file, a log folder, or the folder of per-model log folders', async (t) => {
  const root = await tempDir(t);
  const mine = await writeLogFile(join(root, MODEL), 1, [prediction('a', '1', 0)]);
  await writeLogFile(join(root, MODEL), 2, [prediction('b', '2', 1)]);
  await writeLogFile(join(root, 'other'), 1, [prediction('c', '1', 0, { model: 'other' })]);
  assert.deepEqual(await findLogFiles(mine), [mine]);
  assert.equal((await findLogFiles(join(root, MODEL))).length, 2);
  assert.equal((await findLogFiles(root)).length, 3);
  assert.equal((await joinPredictionLog(root, MODEL)).predictions.length, 2);
});

test('a missing path, a folder without log files and a log without the model are read errors', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'empty'));
  await writeLogFile(join(root, 'other'), 1, [prediction('c', '1', 0, { model: 'other' })]);
  await assert.rejects(findLogFiles(join(root, 'missing')), PredictionLogReadError);
  await assert.rejects(findLogFiles(join(root, 'empty')), PredictionLogReadError);
  await assert.rejects(joinPredictionLog(join(root, 'other'), MODEL), PredictionLogReadError);
});

test('a line is a record only when it is an object of a known type with its key fields', () => {
  const good = prediction('a', '1', 0);
  assert.deepEqual(parseLogLine(JSON.stringify(good)), good);
  assert.deepEqual(parseLogLine(JSON.stringify(feedback('a', 0, { value: 1 })))?.type, 'feedback');
  for (const line of [
    '',
    'null',
    '"text"',
    JSON.stringify({ ...good, type: 'other' }),
    JSON.stringify({ ...good, version: 2 }),
    JSON.stringify({ ...good, time: 'yesterday' }),
    JSON.stringify({ ...good, latency_ms: '20' }),
  ]) {
    assert.equal(parseLogLine(line), undefined, line);
  }
});
