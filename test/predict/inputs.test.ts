import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmod, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BatchserveError } from '../../src/core/errors.js';
import type { Tensor, TensorSpec } from '../../src/core/tensors.js';
import type { ModelSignature } from '../../src/protocol/prepared-request.js';
import type { DatasetRow, InputSpec } from '../../src/predict/dataset.js';
import { globToRegExp } from '../../src/predict/glob.js';
import { locateInput } from '../../src/predict/locate-input.js';
import { parseNpyHeader } from '../../src/predict/npy.js';
import { tempDir } from '../fixtures/temp.js';
import { npy, v2Line, writeFiles } from './fixtures.js';

const signature = (...inputs: TensorSpec[]): ModelSignature => ({
  inputs,
  outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
  batching: true,
});
const AFFINE = signature({ name: 'x', datatype: 'FP32', shape: [-1, 4] });

async function rowsOf(spec: InputSpec, model: ModelSignature, from = 0, to = Infinity): Promise<DatasetRow[]> {
  const dataset = await (await locateInput(spec)).open(model);
  const rows: DatasetRow[] = [];
  try {
    for await (const row of dataset.rows(from, Math.min(to, dataset.rowCount))) rows.push(row);
  } finally {
    await dataset.close?.();
  }
  return rows;
}

const tensorOf = (row: DatasetRow | undefined, name = 'x'): Tensor => {
  assert.ok(row && 'request' in row, `row ${row?.id} failed`);
  assert.equal(row.request.kind, 'tensors');
  return (row.request.kind === 'tensors' ? row.request.inputs[name] : undefined) as Tensor;
};
const codeOf = async (promise: Promise<unknown>): Promise<string> =>
  promise.then(
    () => 'resolved',
    (error: BatchserveError) => error.code,
  );

test('.npy: v1 and v2 headers, every dtype read, one row per first index, each in a buffer of its own', async (t) => {
  const dir = await tempDir(t);
  const cases = [
    { descr: '<f4', datatype: 'FP32', data: Float32Array.from([1.5, -2, 3, 4, 5, 6]) },
    { descr: '<f8', datatype: 'FP64', data: Float64Array.from([0.1, 2, 3, 4, 5, 6]) },
    { descr: '<i4', datatype: 'INT32', data: Int32Array.from([-7, 2, 3, 4, 5, 2 ** 31 - 1]) },
    { descr: '<i8', datatype: 'INT64', data: BigInt64Array.from([-(2n ** 63n), 2n, 3n, 4n, 5n, 2n ** 62n]) },
    { descr: '|u1', datatype: 'UINT8', data: Uint8Array.from([255, 2, 3, 4, 5, 6]) },
    { descr: '|b1', datatype: 'BOOL', data: Uint8Array.from([1, 0, 0, 1, 1, 1]) },
  ] as const;
  for (const [index, { descr, datatype, data }] of cases.entries()) {
    const path = join(dir, `${descr.slice(1)}.npy`);
    await writeFile(path, npy(descr, [3, 2], data, { version: index % 2 === 0 ? 1 : 2 }));
    const rows = await rowsOf({ path }, signature({ name: 'x', datatype, shape: [-1, 2] }));
    assert.deepEqual(
      rows.map((row) => row.id),
      ['0', '1', '2'],
    );
    rows.forEach((row, r) => {
      const tensor = tensorOf(row);
      assert.deepEqual(tensor.dims, [1, 2], descr);
      assert.deepEqual(
        Array.from(tensor.data as Iterable<unknown>),
        Array.from(data.subarray(r * 2, r * 2 + 2) as Iterable<unknown>),
        descr,
      );
      assert.equal((tensor.data as Uint8Array).byteOffset, 0);
      assert.equal((tensor.data as Uint8Array).buffer.byteLength, 2 * data.BYTES_PER_ELEMENT, 'no shared buffer');
    });
  }
  const slice = await rowsOf(
    { path: join(dir, 'f4.npy') },
    signature({ name: 'x', datatype: 'FP32', shape: [-1, 2] }),
    1,
    2,
  );
  assert.deepEqual(
    slice.map((row) => [row.row, Array.from(tensorOf(row).data as Float32Array)]),
    [[1, [3, 4]]],
  );
});

test('.npy: refused with one clear error before any row runs', async (t) => {
  const dir = await tempDir(t);
  const write = async (name: string, bytes: Buffer): Promise<InputSpec> => {
    await writeFile(join(dir, name), bytes);
    return { path: join(dir, name) };
  };
  const data = new Float32Array(8);
  const refusals: [InputSpec, ModelSignature, RegExp][] = [
    [
      await write('fortran.npy', npy('<f4', [2, 4], data, { fortran: true })),
      AFFINE,
      /Fortran order.*ascontiguousarray/,
    ],
    [await write('big-endian.npy', npy('>f4', [2, 4], data)), AFFINE, /dtype >f4 is not read/],
    [await write('f8.npy', npy('<f8', [1, 4], new Float64Array(4))), AFFINE, /holds <f8 \(FP64\); .* takes FP32/],
    [
      await write('wide.npy', npy('<f4', [1, 5], new Float32Array(5))),
      AFFINE,
      /rows of shape \(5\) do not fit .* \[-1, 4\]/,
    ],
    [await write('short.npy', npy('<f4', [3, 4], data)), AFFINE, /truncated: shape \(3, 4\) needs/],
    [await write('text.npy', Buffer.from('x,y\n1,2\n')), AFFINE, /not a \.npy file/],
    [
      await write('two-inputs.npy', npy('<f4', [2, 4], data)),
      signature({ name: 'a', datatype: 'FP32', shape: [-1, 4] }, { name: 'b', datatype: 'FP32', shape: [-1, 4] }),
      /one input/,
    ],
  ];
  for (const [spec, model, message] of refusals) {
    await assert.rejects(rowsOf(spec, model), (error: BatchserveError) => {
      assert.equal(error.code, 'BS_ERR_DATASET', spec.path);
      assert.match(error.message, message);
      return true;
    });
  }
  assert.throws(
    () => parseNpyHeader(Buffer.from('\x93NUMPY\x04\x00\x00\x00\x00\x00', 'latin1'), 'v4.npy'),
    /version 4/,
  );
});

test('JSON Lines: v2 requests and {name: nested arrays}, blank lines skipped, bad lines become failed rows', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'rows.jsonl');
  await writeFile(
    path,
    [
      v2Line([[1, 2, 3, 4]]),
      '',
      JSON.stringify({ x: [5, 6, 7, 8] }), // one row without its batch dimension
      '  \r',
      JSON.stringify({ x: [[9, 10, 11, 12]] }),
      '[[13, 14, 15, 16]]', // a bare array for a model with one input
      JSON.stringify({
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: [0, 0, 0, 0] }],
        outputs: [{ name: 'y' }],
      }),
      '{"x": [[1, 2, 3]]}',
      '{"nope": [[1, 2, 3, 4]]}',
      'not json',
      JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP64', shape: [1, 4], data: [1, 2, 3, 4] }] }),
    ].join('\r\n'),
  );
  const rows = await rowsOf({ path }, AFFINE);
  assert.deepEqual(
    rows.map((row) => [row.row, row.id]),
    [0, 1, 2, 3, 4, 5, 6, 7, 8].map((row, index) => [row, String([1, 3, 5, 6, 7, 8, 9, 10, 11][index])]),
    'blank lines are not rows; ids are line numbers',
  );
  for (const [index, values] of [
    [1, 2, 3, 4],
    [5, 6, 7, 8],
    [9, 10, 11, 12],
    [13, 14, 15, 16],
  ].entries()) {
    const tensor = tensorOf(rows[index]);
    assert.deepEqual([tensor.dims, Array.from(tensor.data as Float32Array)], [[1, 4], values]);
  }
  assert.deepEqual((rows[4] as { outputs?: string[] }).outputs, ['y']);
  const failures = rows.slice(5).map((row) => ('failure' in row ? row.failure : undefined));
  assert.deepEqual(
    failures.map((failure) => failure?.code),
    ['BS_ERR_INFERENCE_INPUT', 'BS_ERR_INFERENCE_INPUT', 'BS_ERR_INFERENCE_INPUT', 'BS_ERR_INFERENCE_INPUT'],
  );
  assert.match(failures[0]?.reason ?? '', /shape \[1, 3\]/);
  assert.match(failures[1]?.reason ?? '', /unknown input "nope"/);
  assert.match(failures[2]?.reason ?? '', /not JSON/);
  assert.match(failures[3]?.reason ?? '', /datatype FP64/);
});

test('CSV: quoted fields, CRLF, an id column and chosen columns; short rows and non-numbers fail alone', async (t) => {
  const dir = await tempDir(t);
  const path = join(dir, 'table.csv');
  await writeFile(
    path,
    'name,a,b,"c, quoted",d,unused\r\n' +
      '"alice ""a""",1,2,3,4,x\r\n' +
      '\r\n' +
      '"multi\nline",5,6,7,8,y\r\n' +
      'carol,1,2,three,4,z\n' +
      'dave,1,2\n' +
      'erin,-1.5,1e3,NaN,9007199254740993,w',
  );
  const columns = ['a', 'b', 'c, quoted', 'd'];
  const rows = await rowsOf({ path, kind: 'csv', csvColumns: columns, idColumn: 'name' }, AFFINE);
  assert.deepEqual(
    rows.map((row) => row.id),
    ['alice "a"', 'multi\nline', 'carol', 'dave', 'erin'],
  );
  assert.deepEqual(Array.from(tensorOf(rows[0]).data as Float32Array), [1, 2, 3, 4]);
  assert.deepEqual(Array.from(tensorOf(rows[1]).data as Float32Array), [5, 6, 7, 8]);
  assert.deepEqual(Array.from(tensorOf(rows[4]).data as Float32Array), [-1.5, 1000, NaN, 9007199254740992]);
  assert.match('failure' in rows[2]! ? rows[2].failure.reason : '', /"three" is not a number/);
  assert.match('failure' in rows[3]! ? rows[3].failure.reason : '', /3 fields, the header 6/);

  const byLine = await rowsOf({ path: join(dir, 'table.csv'), csvColumns: columns }, AFFINE);
  assert.deepEqual(
    byLine.map((row) => row.id),
    ['2', '4', '6', '7', '8'],
    'without --id-column the id is the line a record starts on',
  );
  assert.equal(
    await codeOf(rowsOf({ path, csvColumns: ['a', 'nope'] }, AFFINE)),
    'BS_ERR_DATASET',
    'an unknown column stops the job at once',
  );
  assert.equal(
    await codeOf(rowsOf({ path, csvColumns: ['a', 'b'] }, AFFINE)),
    'BS_ERR_DATASET',
    '2 columns for [-1, 4]',
  );
  assert.equal(await codeOf(rowsOf({ path, idColumn: 'name' }, AFFINE)), 'BS_ERR_DATASET', '5 columns for [-1, 4]');
});

test('image folders: recursive, sorted by relative path, filtered by --glob; unreadable files fail alone', async (t) => {
  const dir = await tempDir(t);
  await writeFiles(dir, {
    'b.png': 'b',
    'a/z.jpg': 'z',
    'a/b/c.JPEG': 'c',
    'a/skip.txt': 'text',
    'empty.png': '',
    'locked.png': 'secret',
  });
  await symlink(join(dir, 'gone.png'), join(dir, 'dangling.png'));
  if (process.getuid?.() !== 0) await chmod(join(dir, 'locked.png'), 0);
  const image = signature({ name: 'input', datatype: 'FP32', shape: [-1, 3, 8, 8] });
  const rows = await rowsOf({ path: dir }, image);
  assert.deepEqual(
    rows.map((row) => row.id),
    ['a/b/c.JPEG', 'a/z.jpg', 'b.png', 'dangling.png', 'empty.png', 'locked.png'],
  );
  const first = rows[0] as { request: { body: Buffer; contentType: string }; shapeKey: string };
  assert.deepEqual(
    [first.request.body.toString(), first.request.contentType, first.shapeKey],
    ['c', 'image/jpeg', 'body:image/jpeg'],
  );
  assert.equal('failure' in rows[3]! && rows[3].failure.code, 'BS_ERR_INPUT_FILE');
  assert.equal('failure' in rows[4]! && rows[4].failure.code, 'BS_ERR_INFERENCE_INPUT');
  const pngs = await rowsOf({ path: dir, glob: '**/*.{png,jpg}' }, image);
  assert.deepEqual(
    pngs.map((row) => row.id),
    ['a/z.jpg', 'b.png', 'dangling.png', 'empty.png', 'locked.png'],
  );
  const folder = await locateInput({ path: dir, glob: 'nothing/*' });
  assert.equal(await codeOf(folder.open(image)), 'BS_ERR_DATASET');
});

test('globs: * and ? stay in a folder, ** spans folders, {a,b} and [..] as in shells', () => {
  const matches = (glob: string, path: string): boolean => globToRegExp(glob).test(path);
  assert.ok(matches('*.png', 'a.png'));
  assert.ok(!matches('*.png', 'dir/a.png'));
  assert.ok(matches('**/*.png', 'a.png'));
  assert.ok(matches('**/*.png', 'x/y/a.png'));
  assert.ok(matches('x/**', 'x/y/z'));
  assert.ok(matches('img-?.{png,jpg}', 'img-1.jpg'));
  assert.ok(!matches('img-?.{png,jpg}', 'img-10.jpg'));
  assert.ok(matches('[ab]*.png', 'b1.png'));
  assert.ok(!matches('[!ab]*.png', 'b1.png'));
  assert.ok(!matches('a.png', 'aXpng'), 'a dot is a dot');
  assert.throws(() => globToRegExp('{a,b'), { code: 'BS_ERR_USAGE' });
});
