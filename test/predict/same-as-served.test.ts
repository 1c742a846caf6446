import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { predictDataset } from '../../src/predict/predict-job.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { jobOptions, npy, packOrientation, textLine, v2Line, writeFiles } from './fixtures.js';

/** A JSON Lines output record or errors-file line, as the writers spell them. */
interface Line {
  id: string;
  model: string;
  version: string;
  outputs: Record<string, { datatype: string; shape: number[]; data: unknown[] }>;
  answer: unknown;
  row: number;
  code: string;
  reason: string;
}

const readJsonl = async (path: string): Promise<Line[]> =>
  (await readFile(path, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Line);

test('tensor handler: each row scored offline answers exactly as the server answers it (JSON Lines and .npy)', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, { config: 'max_batch_size: 4\n' });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const values = (i: number): number[] => [i / 3, -i, i * 1e-3, 7 - i];
  const lines = [
    v2Line([values(1)]),
    JSON.stringify({ x: [values(2)] }),
    v2Line([values(3)]),
    '{"x": [[1, 2, 3]]}', // wrong shape: a failed row, the job goes on
    JSON.stringify({ x: [values(6)] }),
    ...Array.from({ length: 12 }, (_, i) => v2Line([values(10 + i)])),
  ];
  await writeFile(join(dir, 'rows.jsonl'), `${lines.join('\n')}\n`);
  const summary = await predictDataset(jobOptions(archive, { path: join(dir, 'rows.jsonl') }, join(dir, 'out.jsonl')));
  assert.deepEqual([summary.rows, summary.records, summary.failed], [lines.length, lines.length - 1, 1]);
  const records = await readJsonl(join(dir, 'out.jsonl'));
  assert.deepEqual(
    records.map((record) => record.id),
    lines.map((_, index) => String(index + 1)).filter((id) => id !== '4'),
    'one record per good line, in input order, the line number as id',
  );
  for (const record of records) {
    const line = lines[Number(record.id) - 1] as string;
    assert.equal(record.model, 'affine');
    assert.equal(record.version, '1');
    if (line.includes('"inputs"')) {
      const served = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: line });
      assert.equal(served.status, 200);
      const [output] = served.body.outputs;
      assert.deepEqual(record.outputs, { y: { datatype: output.datatype, shape: output.shape, data: output.data } });
    } else {
      const served = await call(`${server.urls.inference}/predictions/affine`, { body: line });
      assert.equal(served.status, 200);
      assert.deepEqual(record.outputs.y?.data, served.body.y.flat());
      assert.deepEqual(record.outputs.y?.shape, [1, 4]);
    }
  }
  const [failure] = await readJsonl(join(dir, 'out.jsonl.errors.jsonl'));
  assert.deepEqual([failure?.row, failure?.id, failure?.code], [3, '4', 'BS_ERR_INFERENCE_INPUT']);
  assert.match(failure?.reason ?? '', /shape \[1, 3\]/);

  // The same rows from a .npy array: the row index is the id.
  const rows = Array.from({ length: 9 }, (_, i) => values(i));
  await writeFile(join(dir, 'rows.npy'), npy('<f4', [9, 4], Float32Array.from(rows.flat())));
  await predictDataset(jobOptions(archive, { path: join(dir, 'rows.npy') }, join(dir, 'npy.jsonl')));
  const fromNpy = await readJsonl(join(dir, 'npy.jsonl'));
  assert.deepEqual(
    fromNpy.map((record) => record.id),
    rows.map((_, i) => String(i)),
  );
  for (const [index, row] of rows.entries()) {
    const served = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: v2Line([row]) });
    assert.deepEqual(fromNpy[index]?.outputs.y?.data, served.body.outputs[0].data);
  }
});

test('image classifier: each image in the folder is answered as POST /predictions answers it', async (t) => {
  const dir = await tempDir(t);
  const archive = await packOrientation(dir);
  const server = await startTestServer(t, { models: [`orientation=${archive}`] });
  const images: Record<string, Buffer> = {
    'b/upright-1.png': textLine(1),
    'a/flipped-2.png': textLine(2, true),
    'a/deeper/upright-3.png': textLine(3),
    'c.png': textLine(4, true),
    'z-upright-5.PNG': textLine(5),
  };
  await writeFiles(join(dir, 'images'), {
    ...images,
    'a/broken.png': Buffer.from('not a png at all'),
    'notes.txt': 'not an image: left out by the default pattern',
  });
  const summary = await predictDataset(
    jobOptions(archive, { path: join(dir, 'images') }, join(dir, 'out.jsonl'), { batchSize: 4 }),
  );
  assert.deepEqual([summary.rows, summary.records, summary.failed], [6, 5, 1]);
  const records = await readJsonl(join(dir, 'out.jsonl'));
  assert.deepEqual(
    records.map((record) => record.id),
    ['a/deeper/upright-3.png', 'a/flipped-2.png', 'b/upright-1.png', 'c.png', 'z-upright-5.PNG'],
    'sorted by relative path; the broken image is left out of the output',
  );
  for (const record of records) {
    const served = await call(`${server.urls.inference}/predictions/orientation`, {
      body: images[record.id] as Buffer,
      headers: { 'content-type': 'image/png' },
    });
    assert.equal(served.status, 200);
    assert.deepEqual(record.answer, served.body, record.id);
    assert.equal(record.outputs, undefined);
  }
  const [failure] = await readJsonl(join(dir, 'out.jsonl.errors.jsonl'));
  assert.deepEqual([failure?.row, failure?.id, failure?.code], [0, 'a/broken.png', 'BS_ERR_INFERENCE_INPUT']);
});
