import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { CSV_MAX_ELEMENT_COLUMNS, openCsvWriter } from '../../src/predict/csv-writer.js';
import { openJsonlWriter } from '../../src/predict/jsonl-writer.js';
import { OUTPUTS_METADATA_KEY, openParquetWriter } from '../../src/predict/parquet-writer.js';
import type { OutputTensor, RecordWriter, ScoredRecord } from '../../src/predict/records.js';

const dir = await mkdtemp(join(tmpdir(), 'batchserve-writers-'));
after(() => rm(dir, { recursive: true, force: true }));
let files = 0;
const path = (extension: string) => join(dir, `${++files}.${extension}`);

const STRINGS = ['plain', 'a,b', 'say "hi"', 'two\nlines\r\nand a CR\r', 'naïve 日本語 🎉', ''];
const BIG = 2n ** 53n + 1n;

/** Row i of a classifier-like model with one output of each kind the writers must spell. */
function record(i: number, extra: Record<string, OutputTensor> = {}): ScoredRecord {
  return {
    id: i % 7 === 3 ? `img ${i}, "x".png` : `row-${i}`,
    model: 'demo',
    version: '2',
    outputs: {
      scores: { datatype: 'FP32', shape: [1, 4], data: [Math.fround(i / 3), NaN, i % 2 ? -0 : Infinity, -Infinity] },
      total: { datatype: 'FP64', shape: [2], data: [i / 7, -1e308] },
      ids: { datatype: 'INT64', shape: [3], data: [BIG + BigInt(i), -(2n ** 63n), BigInt(i)] },
      big: { datatype: 'UINT64', shape: [1], data: [2n ** 64n - 1n - BigInt(i)] },
      count: { datatype: 'UINT32', shape: [1], data: [4294967295 - i] },
      flags: { datatype: 'BOOL', shape: [2], data: [i % 2 === 0, true] },
      labels: { datatype: 'BYTES', shape: [2], data: [STRINGS[i % STRINGS.length]!, `#${i}`] },
      ...extra,
    },
    answer: undefined,
  };
}

const answerRecord = (i: number): ScoredRecord => ({
  id: String(i),
  model: 'classifier',
  version: '1',
  outputs: undefined,
  answer: `{\n  "top": [{"label": "cat, \\"tabby\\"", "score": ${i / 10}}]\n}`,
});

async function writeAll(writer: RecordWriter, records: Iterable<ScoredRecord>): Promise<void> {
  for (const one of records) await writer.write(one);
  await writer.close();
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

// --- JSON Lines --------------------------------------------------------------------------------

test('JSON Lines: one object per record, in order, with the v2 JSON spelling of every value', async () => {
  const file = path('jsonl');
  const writer = await openJsonlWriter(file);
  // Not awaited one by one: the writes still land in order.
  await Promise.all(range(3000).map((i) => writer.write(record(i))));
  await writer.close();
  const lines = (await readFile(file, 'utf8')).split('\n');
  assert.equal(lines.pop(), '', 'the file ends with a newline');
  assert.equal(lines.length, 3000);
  lines.forEach((line, i) => {
    const odd = i % 2 === 1;
    assert.deepEqual(JSON.parse(line), {
      id: record(i).id,
      model: 'demo',
      version: '2',
      outputs: {
        scores: {
          datatype: 'FP32',
          shape: [1, 4],
          data: [Math.fround(i / 3), 'NaN', odd ? 0 : 'Infinity', '-Infinity'],
        },
        total: { datatype: 'FP64', shape: [2], data: [i / 7, -1e308] },
        ids: { datatype: 'INT64', shape: [3], data: [String(BIG + BigInt(i)), String(-(2n ** 63n)), i] },
        big: { datatype: 'UINT64', shape: [1], data: [String(2n ** 64n - 1n - BigInt(i))] },
        count: { datatype: 'UINT32', shape: [1], data: [4294967295 - i] },
        flags: { datatype: 'BOOL', shape: [2], data: [!odd, true] },
        labels: { datatype: 'BYTES', shape: [2], data: [STRINGS[i % STRINGS.length], `#${i}`] },
      },
    });
  });
});

test('JSON Lines: an answer is written as JSON on one line; an empty run is an empty file', async () => {
  const file = path('jsonl');
  await writeAll(await openJsonlWriter(file), [answerRecord(1), answerRecord(2)]);
  assert.equal(
    await readFile(file, 'utf8'),
    '{"id":"1","model":"classifier","version":"1","answer":{"top":[{"label":"cat, \\"tabby\\"","score":0.1}]}}\n' +
      '{"id":"2","model":"classifier","version":"1","answer":{"top":[{"label":"cat, \\"tabby\\"","score":0.2}]}}\n',
  );
  const empty = path('jsonl');
  await writeAll(await openJsonlWriter(empty), []);
  assert.equal(await readFile(empty, 'utf8'), '');
});

// --- CSV ---------------------------------------------------------------------------------------

/** RFC 4180: fields separated by commas, records by CRLF, quoted fields may hold anything. */
function parseCsv(text: string): string[][] {
  const field = /"((?:[^"]|"")*)"|([^",\r\n]*)/y;
  const rows: string[][] = [];
  let row: string[] = [];
  while (field.lastIndex < text.length) {
    const at = field.lastIndex;
    const [, quoted, bare] = field.exec(text)!;
    row.push(quoted === undefined ? bare! : quoted.replaceAll('""', '"'));
    const end = text.slice(field.lastIndex, field.lastIndex + 2);
    if (end.startsWith(',')) {
      field.lastIndex += 1;
    } else {
      assert.equal(end, '\r\n', `a field starting at ${at} is followed by a comma or CRLF`);
      field.lastIndex += 2;
      rows.push(row);
      row = [];
    }
  }
  return rows;
}

test('CSV: a column per element of small outputs, a JSON column for large ones, every value exact', async () => {
  const file = path('csv');
  const wide = CSV_MAX_ELEMENT_COLUMNS + 1;
  const embedding = (i: number): OutputTensor => ({
    datatype: 'FP32',
    shape: [wide],
    data: range(wide).map((k) => (k === 0 ? NaN : Math.fround(k / (i + 1)))),
  });
  await writeAll(
    await openCsvWriter(file),
    range(3000).map((i) => record(i, { embedding: embedding(i) })),
  );
  const [header, ...rows] = parseCsv(await readFile(file, 'utf8'));
  assert.deepEqual(header, [
    'id',
    'model',
    'version',
    ...['scores[0]', 'scores[1]', 'scores[2]', 'scores[3]', 'total[0]', 'total[1]'],
    ...['ids[0]', 'ids[1]', 'ids[2]', 'big[0]', 'count[0]', 'flags[0]', 'flags[1]', 'labels[0]', 'labels[1]'],
    'embedding',
  ]);
  assert.equal(rows.length, 3000);
  rows.forEach((row, i) => {
    const odd = i % 2 === 1;
    const { data } = embedding(i);
    assert.deepEqual(row, [
      record(i).id,
      'demo',
      '2',
      ...[String(Math.fround(i / 3)), 'NaN', odd ? '-0' : 'Infinity', '-Infinity', String(i / 7), '-1e+308'],
      ...[String(BIG + BigInt(i)), '-9223372036854775808', String(i), String(2n ** 64n - 1n - BigInt(i))],
      ...[String(4294967295 - i), String(!odd), 'true', STRINGS[i % STRINGS.length], `#${i}`],
      JSON.stringify(['NaN', ...data.slice(1)]),
    ]);
  });
});

test('CSV: an answer column; an empty run writes the header', async () => {
  const file = path('csv');
  await writeAll(await openCsvWriter(file), [answerRecord(1)]);
  assert.deepEqual(parseCsv(await readFile(file, 'utf8')), [
    ['id', 'model', 'version', 'answer'],
    ['1', 'classifier', '1', '{"top":[{"label":"cat, \\"tabby\\"","score":0.1}]}'],
  ]);
  const empty = path('csv');
  await writeAll(await openCsvWriter(empty), []);
  assert.equal(await readFile(empty, 'utf8'), 'id,model,version\r\n');
});

// --- Parquet -----------------------------------------------------------------------------------

const utf8 = { type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' } };
const integer = (bits: number, signed: boolean) => ({
  type: bits === 64 ? 'INT64' : 'INT32',
  converted_type: `${signed ? 'INT' : 'UINT'}_${bits}`,
});

/** The schema as flat elements, without the fields a writer may fill in or leave out. */
function schemaOf(file: ArrayBuffer) {
  return parquetMetadata(file).schema.map(
    ({ name, type, repetition_type, converted_type, logical_type, num_children }) =>
      Object.fromEntries(
        Object.entries({ name, type, repetition_type, converted_type, logical_type, num_children }).filter(
          ([, value]) => value !== undefined,
        ),
      ),
  );
}

function listColumn(name: string, element: object) {
  return [
    { name, repetition_type: 'REQUIRED', converted_type: 'LIST', logical_type: { type: 'LIST' }, num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    { name: 'element', repetition_type: 'REQUIRED', ...element },
  ];
}

const read = async (file: string) => {
  const bytes = await readFile(file);
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
};

test('Parquet, read back by hyparquet: the schema, the output shapes, row groups, every value', async () => {
  const file = path('parquet');
  const rows = 25_000;
  await writeAll(
    await openParquetWriter(file),
    range(rows).map((i) => record(i)),
  );
  const bytes = await read(file);
  assert.deepEqual(schemaOf(bytes), [
    { name: 'schema', num_children: 10 },
    { name: 'id', repetition_type: 'REQUIRED', ...utf8 },
    { name: 'model', repetition_type: 'REQUIRED', ...utf8 },
    { name: 'version', repetition_type: 'REQUIRED', ...utf8 },
    ...listColumn('scores', { type: 'FLOAT' }),
    ...listColumn('total', { type: 'DOUBLE' }),
    ...listColumn('ids', integer(64, true)),
    ...listColumn('big', integer(64, false)),
    ...listColumn('count', integer(32, false)),
    ...listColumn('flags', { type: 'BOOLEAN' }),
    ...listColumn('labels', utf8),
  ]);
  const metadata = parquetMetadata(bytes);
  assert.deepEqual(
    metadata.row_groups.map((group) => group.num_rows),
    [10_000n, 10_000n, 5_000n],
  );
  assert.ok(metadata.row_groups.every((group) => group.columns.every((c) => c.meta_data?.codec === 'SNAPPY')));
  const outputs = metadata.key_value_metadata?.find(({ key }) => key === OUTPUTS_METADATA_KEY)?.value;
  assert.deepEqual(JSON.parse(outputs ?? 'null'), {
    scores: { datatype: 'FP32', shape: [1, 4] },
    total: { datatype: 'FP64', shape: [2] },
    ids: { datatype: 'INT64', shape: [3] },
    big: { datatype: 'UINT64', shape: [1] },
    count: { datatype: 'UINT32', shape: [1] },
    flags: { datatype: 'BOOL', shape: [2] },
    labels: { datatype: 'BYTES', shape: [2] },
  });

  const values = await parquetReadObjects({ file: bytes });
  assert.equal(values.length, rows);
  values.forEach((row, i) => {
    const { id, model, version, outputs } = record(i);
    const expected: Record<string, unknown> = { id, model, version };
    for (const [name, { data }] of Object.entries(outputs!)) expected[name] = data;
    // deepStrictEqual tells -0 from 0 and takes NaN as equal to NaN.
    assert.deepEqual(row, expected, `row ${i}`);
  });
});

test('Parquet: a row group is cut by its byte budget; small outputs of other integer widths', async () => {
  const file = path('parquet');
  const narrow = (i: number): ScoredRecord => ({
    id: String(i).padStart(3, '0'),
    model: 'm',
    version: '1',
    outputs: {
      i8: { datatype: 'INT8', shape: [2], data: [-128, 127 - (i % 3)] },
      u16: { datatype: 'UINT16', shape: [1], data: [65535 - i] },
      f16: { datatype: 'FP16', shape: [1], data: [0.5] },
    },
    answer: undefined,
  });
  await writeAll(await openParquetWriter(file, { rowGroupBytes: 1000 }), range(100).map(narrow));
  const bytes = await read(file);
  assert.deepEqual(schemaOf(bytes).slice(4), [
    ...listColumn('i8', integer(8, true)),
    ...listColumn('u16', integer(16, false)),
    ...listColumn('f16', { type: 'FLOAT' }),
  ]);
  // Four numbers counted at 8 bytes each and 5 characters of strings: 37 bytes a row, so the
  // 28th row reaches the budget.
  assert.deepEqual(
    parquetMetadata(bytes).row_groups.map((group) => group.num_rows),
    [28n, 28n, 28n, 16n],
  );
  const values = await parquetReadObjects({ file: bytes });
  assert.deepEqual(
    values.map((row) => [row.i8, row.u16, row.f16]),
    range(100).map((i) => [[-128, 127 - (i % 3)], [65535 - i], [0.5]]),
  );
});

test('Parquet: an answer column; an empty run is a valid file with no rows', async () => {
  const file = path('parquet');
  await writeAll(await openParquetWriter(file), [answerRecord(1), answerRecord(2)]);
  const bytes = await read(file);
  assert.deepEqual(schemaOf(bytes), [
    { name: 'schema', num_children: 4 },
    ...['id', 'model', 'version', 'answer'].map((name) => ({ name, repetition_type: 'REQUIRED', ...utf8 })),
  ]);
  assert.deepEqual(await parquetReadObjects({ file: bytes }), [
    { id: '1', model: 'classifier', version: '1', answer: '{"top":[{"label":"cat, \\"tabby\\"","score":0.1}]}' },
    { id: '2', model: 'classifier', version: '1', answer: '{"top":[{"label":"cat, \\"tabby\\"","score":0.2}]}' },
  ]);

  const empty = path('parquet');
  await writeAll(await openParquetWriter(empty), []);
  const emptyBytes = await read(empty);
  assert.equal(parquetMetadata(emptyBytes).num_rows, 0n);
  assert.deepEqual(parquetMetadata(emptyBytes).key_value_metadata, [{ key: OUTPUTS_METADATA_KEY, value: '{}' }]);
  assert.deepEqual(
    schemaOf(emptyBytes).map(({ name }) => name),
    ['schema', 'id', 'model', 'version'],
  );
  assert.deepEqual(await parquetReadObjects({ file: emptyBytes }), []);
  // FileMetaData's num_rows = 0, then row_groups as an empty list of structs (see the writer).
  assert.ok(Buffer.from(emptyBytes).includes(Buffer.from([0x16, 0x00, 0x19, 0x0c])));
});

test('Parquet: a row group the encoder refuses leaves a writer that refuses everything after', async () => {
  const writer = await openParquetWriter(path('parquet'), { rowGroupRows: 1 });
  const negative: ScoredRecord = {
    ...record(0),
    outputs: { count: { datatype: 'UINT32', shape: [1], data: [-1] } },
  };
  const refused = { message: /a row group could not be encoded, so the file cannot be finished/ };
  await assert.rejects(writer.write(negative), refused);
  await assert.rejects(
    writer.write({ ...negative, outputs: { count: { ...negative.outputs!.count!, data: [1] } } }),
    refused,
  );
  await assert.rejects(writer.close(), refused);
});

// --- every format ------------------------------------------------------------------------------

const WRITERS = { jsonl: openJsonlWriter, csv: openCsvWriter, parquet: openParquetWriter };

test('every format refuses a record whose outputs differ from the first record', async () => {
  const first = record(0);
  const changed = (outputs: ScoredRecord['outputs']): ScoredRecord => ({ ...first, id: 'later', outputs });
  const { scores, ...rest } = first.outputs!;
  const cases: [ScoredRecord, RegExp][] = [
    [changed({ ...rest, scores: { ...scores!, shape: [2, 2] } }), /output "scores" is FP32 \[2,2\]; the first row's/],
    [changed({ ...rest, scores: { ...scores!, datatype: 'FP64' } }), /output "scores" is FP64 \[1,4\]/],
    [changed({ ...rest, scores: { ...scores!, data: [1] } }), /output "scores" has 1 values for shape \[1,4\]/],
    [changed(rest), /row "later" has outputs total, .*; the first row had scores, /],
    [{ ...answerRecord(1), id: 'later' }, /row "later" has an answer where the first row had outputs/],
  ];
  for (const [format, open] of Object.entries(WRITERS)) {
    const writer = await open(path(format));
    await writer.write(first);
    for (const [bad, message] of cases) {
      await assert.rejects(writer.write(bad), { code: 'BS_ERR_INFERENCE_FAILED', message }, format);
    }
    // A refused record leaves the writer as it was.
    await writer.write(record(1));
    await writer.close();
  }
  for (const [format, open] of Object.entries(WRITERS)) {
    const writer = await open(path(format));
    await writer.write(answerRecord(1));
    await assert.rejects(writer.write(first), { code: 'BS_ERR_INFERENCE_FAILED', message: /row "row-0" has outputs/ });
    await assert.rejects(writer.write({ ...answerRecord(2), answer: '{' }), {
      code: 'BS_ERR_INFERENCE_FAILED',
      message: /row "2": the handler's answer is not JSON/,
    });
    await writer.close();
  }
});
