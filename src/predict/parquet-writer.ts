import { open } from 'node:fs/promises';
import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import type { Datatype } from '../core/datatypes.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { parseAnswer, RecordLayout, type OutputColumn } from './jsonl-writer.js';
import type { OutputTensor, RecordWriter, ScoredRecord } from './records.js';

type SchemaElement = ConstructorParameters<typeof ParquetWriter>[0]['schema'][number];
type ElementType = Pick<SchemaElement, 'type' | 'converted_type' | 'logical_type'>;
type ColumnSource = Parameters<ParquetWriter['write']>[0]['columnData'][number];

export interface ParquetWriterOptions {
  /** Rows per row group, at most (default 10,000). */
  readonly rowGroupRows?: number;
  /** A row group is also cut when its values reach about this many bytes (default 16 MiB). */
  readonly rowGroupBytes?: number;
}

/** The key-value metadata key whose value describes the outputs: `{name: {datatype, shape}}`. */
export const OUTPUTS_METADATA_KEY = 'batchserve.outputs';

/**
 * Parquet (hyparquet-writer, snappy). Columns: id, model, version (UTF8), then per output a
 * LIST of its element type holding the row's flattened data (FLOAT for FP32 and FP16, DOUBLE
 * for FP64, INT32/INT64 with the integer width and signedness for the integer types, BOOLEAN,
 * UTF8 for BYTES), every level REQUIRED; or an `answer` UTF8 column with the answer as one-line
 * JSON. Each output's datatype and shape are in the key-value metadata under
 * OUTPUTS_METADATA_KEY. Rows are buffered as one row group and written when it is full, so
 * memory is bounded by the row group, not the file. An empty run writes a file with the id,
 * model and version columns, no rows and `{}` as the outputs metadata.
 */
export async function openParquetWriter(path: string, options: ParquetWriterOptions = {}): Promise<RecordWriter> {
  const rowGroupRows = options.rowGroupRows ?? 10_000;
  const rowGroupBytes = options.rowGroupBytes ?? 16 * 2 ** 20;
  const handle = await open(path, 'w');
  const bytes = new ByteWriter(2 ** 20);
  let writer: ParquetWriter | undefined;
  let layout: RecordLayout | undefined;
  let group = new RowGroup(undefined);
  let written: Promise<void> = Promise.resolve();
  /** Set when encoding a row group failed halfway: the file cannot be finished after that. */
  let broken: Error | undefined;

  /** Hands what the encoder produced to the file, chained after the previous write. */
  const drain = (): Promise<void> => {
    const chunk = bytes.getBytes().slice();
    bytes.index = 0;
    written = written.then(async () => {
      await handle.write(chunk);
    });
    return written;
  };
  const start = (fixed: RecordLayout | undefined): ParquetWriter => {
    const outputs = (fixed?.outputs ?? []).map(({ name, datatype, shape }) => [name, { datatype, shape }]);
    return new ParquetWriter({
      writer: bytes,
      schema: schemaOf(fixed),
      codec: 'SNAPPY',
      kvMetadata: [{ key: OUTPUTS_METADATA_KEY, value: JSON.stringify(Object.fromEntries(outputs)) }],
      createdBy: `batchserve version ${BATCHSERVE_VERSION}`,
    });
  };
  const flushGroup = (): Promise<void> => {
    if (group.rows === 0) return written;
    // Encoding is synchronous: the ByteWriter has no flush, so write() returns nothing to wait for.
    try {
      void writer!.write({ columnData: group.columns(), rowGroupSize: group.rows });
    } catch (error) {
      broken = new Error(`${path}: a row group could not be encoded, so the file cannot be finished`, { cause: error });
      throw broken;
    }
    group = new RowGroup(layout);
    return drain();
  };

  return {
    async write(record) {
      if (broken) throw broken;
      layout = RecordLayout.check(layout, record);
      if (!writer) {
        writer = start(layout);
        group = new RowGroup(layout);
      }
      group.add(record);
      return group.rows >= rowGroupRows || group.bytes >= rowGroupBytes ? flushGroup() : written;
    },
    async close() {
      try {
        if (broken) throw broken;
        writer ??= start(layout);
        await flushGroup();
        void writer.finish();
        if (writer.row_groups.length === 0) declareEmptyRowGroups(bytes.getBytes());
        await drain();
      } finally {
        await handle.close();
      }
    },
  };
}

/**
 * hyparquet-writer 0.17 writes an empty Thrift list with element type 0, which arrow-rs refuses
 * ("Expected list element type of Struct"); other readers skip it. A file of no rows has one
 * such list, FileMetaData.row_groups: its bytes, num_rows = 0 (field 3, i64) then row_groups
 * (field 4, a list of size 0 and type 0), occur once in the footer, and become an empty list
 * of structs (type 12). A library that writes the type already leaves nothing to change.
 */
function declareEmptyRowGroups(file: Uint8Array): void {
  const buggy = Buffer.from([0x16, 0x00, 0x19, 0x00]);
  const footer = Buffer.from(file.buffer, file.byteOffset, file.byteLength);
  const at = footer.indexOf(buggy);
  if (at >= 0 && footer.indexOf(buggy, at + 1) < 0) footer[at + 3] = 0x0c;
}

/** One row group's values, column by column, and about how many bytes they hold. */
class RowGroup {
  rows = 0;
  bytes = 0;
  private readonly id: string[] = [];
  private readonly model: string[] = [];
  private readonly version: string[] = [];
  private readonly outputs: OutputTensor['data'][][];
  private readonly answers: string[] = [];

  constructor(private readonly layout: RecordLayout | undefined) {
    this.outputs = layout?.outputs?.map(() => []) ?? [];
  }

  add(record: ScoredRecord): void {
    const outputs = this.layout?.outputs;
    const answer = outputs ? '' : JSON.stringify(parseAnswer(record));
    this.rows++;
    this.id.push(record.id);
    this.model.push(record.model);
    this.version.push(record.version);
    this.bytes += record.id.length + record.model.length + record.version.length;
    if (!outputs) {
      this.answers.push(answer);
      this.bytes += answer.length;
      return;
    }
    outputs.forEach((column, i) => {
      const { data } = record.outputs?.[column.name] as OutputTensor;
      this.outputs[i]!.push(elementsOf(column, data));
      this.bytes += column.datatype === 'BYTES' ? stringLengths(data as string[]) : column.count * 8;
    });
  }

  columns(): ColumnSource[] {
    const columns: ColumnSource[] = [
      { name: 'id', data: this.id },
      { name: 'model', data: this.model },
      { name: 'version', data: this.version },
    ];
    if (this.layout?.outputs) {
      this.layout.outputs.forEach(({ name }, i) => columns.push({ name, data: this.outputs[i]! }));
    } else if (this.layout) {
      columns.push({ name: 'answer', data: this.answers });
    }
    return columns;
  }
}

function stringLengths(strings: readonly string[]): number {
  return strings.reduce((sum, text) => sum + text.length, 0);
}

/** INT64 and UINT64 are written from bigints; the record may hold numbers for small ones. */
function elementsOf(column: OutputColumn, data: OutputTensor['data']): OutputTensor['data'] {
  if (column.datatype !== 'INT64' && column.datatype !== 'UINT64') return data;
  return data.every((value) => typeof value === 'bigint') ? data : data.map((value) => BigInt(value));
}

function schemaOf(layout: RecordLayout | undefined): SchemaElement[] {
  const columns: SchemaElement[][] = [utf8('id'), utf8('model'), utf8('version')];
  if (layout?.outputs) columns.push(...layout.outputs.map(listOf));
  else if (layout) columns.push(utf8('answer'));
  return [{ name: 'schema', num_children: columns.length }, ...columns.flat()];
}

function utf8(name: string): SchemaElement[] {
  return [{ name, ...ELEMENT_TYPES.BYTES, repetition_type: 'REQUIRED' }];
}

/** The three-level LIST the Parquet spec prescribes, which pyarrow, pandas and Spark read as a list. */
function listOf({ name, datatype }: OutputColumn): SchemaElement[] {
  return [
    { name, repetition_type: 'REQUIRED', converted_type: 'LIST', logical_type: { type: 'LIST' }, num_children: 1 },
    { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    { name: 'element', ...ELEMENT_TYPES[datatype], repetition_type: 'REQUIRED' },
  ];
}

/**
 * Integers carry the converted type only, from which readers derive the INTEGER logical type:
 * hyparquet-writer 0.17 writes that logical type's bitWidth as a Thrift i32 instead of an i8,
 * and arrow-rs (and Thrift's generated readers generally) then refuse the file.
 */
const integer = (bits: 8 | 16 | 32 | 64, signed: boolean): ElementType => ({
  type: bits === 64 ? 'INT64' : 'INT32',
  converted_type: `${signed ? 'INT' : 'UINT'}_${bits}`,
});

/** FP16 is widened to FLOAT: Spark and older pyarrow have no FLOAT16; the metadata keeps FP16. */
const ELEMENT_TYPES: Record<Datatype, ElementType> = {
  BOOL: { type: 'BOOLEAN' },
  UINT8: integer(8, false),
  UINT16: integer(16, false),
  UINT32: integer(32, false),
  UINT64: integer(64, false),
  INT8: integer(8, true),
  INT16: integer(16, true),
  INT32: integer(32, true),
  INT64: integer(64, true),
  FP16: { type: 'FLOAT' },
  FP32: { type: 'FLOAT' },
  FP64: { type: 'DOUBLE' },
  BYTES: { type: 'BYTE_ARRAY', converted_type: 'UTF8', logical_type: { type: 'STRING' } },
};
