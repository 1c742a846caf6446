import { open, type FileHandle } from 'node:fs/promises';
import { InferenceFailedError } from '../core/errors.js';
import type { Datatype } from '../core/datatypes.js';
import type { OutputTensor, RecordWriter, ScoredRecord } from './records.js';

/**
 * JSON Lines, the default output: one object per record,
 * `{"id","model","version","outputs":{name:{"datatype","shape","data"}}}` or, when the handler
 * answered something other than tensors, `{"id","model","version","answer":…}` with the answer
 * as JSON (re-serialized, so an answer spread over lines stays on one).
 * Data follows the v2 JSON rules (src/protocol/json-tensor.ts): INT64/UINT64 beyond
 * ±(2^53 - 1) are decimal strings, NaN and ±Infinity the strings "NaN", "Infinity",
 * "-Infinity"; -0 is written as 0.
 *
 * This module also holds what the CSV and Parquet writers share: the record layout that the
 * first record fixes, the JSON spelling of tensor data, and a buffered text file.
 */
export async function openJsonlWriter(path: string): Promise<RecordWriter> {
  const file = await TextFile.open(path);
  let layout: RecordLayout | undefined;
  return {
    async write(record) {
      layout = RecordLayout.check(layout, record);
      const line: Record<string, unknown> = { id: record.id, model: record.model, version: record.version };
      if (layout.outputs) {
        const outputs: Record<string, unknown> = {};
        for (const { name } of layout.outputs) {
          const { datatype, shape, data } = record.outputs?.[name] as OutputTensor;
          outputs[name] = { datatype, shape, data: jsonData(datatype, data) };
        }
        line.outputs = outputs;
      } else {
        line.answer = parseAnswer(record);
      }
      return file.write(`${JSON.stringify(line)}\n`);
    },
    close: () => file.close(),
  };
}

/** One output as the file's columns see it: fixed by the first record. */
export interface OutputColumn {
  readonly name: string;
  readonly datatype: Datatype;
  readonly shape: readonly number[];
  /** Elements per row: the product of the shape. */
  readonly count: number;
}

/**
 * What every record of one file must look like: the first record's outputs (names, datatypes,
 * shapes, in its order), or an answer. Every row of a model answers alike, and the CSV and
 * Parquet columns depend on it; JSON Lines checks the same so that the choice of format never
 * decides whether a run succeeds.
 */
export class RecordLayout {
  private constructor(
    /** Undefined when the records carry the handler's answer instead. */
    readonly outputs: readonly OutputColumn[] | undefined,
  ) {}

  /** The layout `record` fixes when it is the first, after checking `record` against it. */
  static check(layout: RecordLayout | undefined, record: ScoredRecord): RecordLayout {
    const fixed = layout ?? RecordLayout.of(record);
    fixed.verify(record);
    return fixed;
  }

  private static of(record: ScoredRecord): RecordLayout {
    if (!record.outputs) return new RecordLayout(undefined);
    return new RecordLayout(
      Object.entries(record.outputs).map(([name, { datatype, shape }]) => ({
        name,
        datatype,
        shape: [...shape],
        count: shape.reduce((product, size) => product * size, 1),
      })),
    );
  }

  private verify(record: ScoredRecord): void {
    const row = `row ${JSON.stringify(record.id)}`;
    if (!this.outputs) {
      if (record.outputs) throw layoutError(`${row} has outputs where the first row had an answer`);
      if (record.answer === undefined) throw layoutError(`${row} has neither outputs nor an answer`);
      return;
    }
    if (!record.outputs) throw layoutError(`${row} has an answer where the first row had outputs`);
    const names = Object.keys(record.outputs);
    if (
      names.length !== this.outputs.length ||
      this.outputs.some(({ name }) => !Object.hasOwn(record.outputs!, name))
    ) {
      throw layoutError(`${row} has outputs ${names.join(', ')}; the first row had ${this.columnNames()}`);
    }
    for (const column of this.outputs) {
      const { datatype, shape, data } = record.outputs[column.name] as OutputTensor;
      if (datatype !== column.datatype || !sameShape(shape, column.shape)) {
        throw layoutError(
          `${row}: output "${column.name}" is ${datatype} [${shape.join(',')}]; ` +
            `the first row's was ${column.datatype} [${column.shape.join(',')}]`,
        );
      }
      if (data.length !== column.count) {
        throw layoutError(`${row}: output "${column.name}" has ${data.length} values for shape [${shape.join(',')}]`);
      }
    }
  }

  private columnNames(): string {
    return this.outputs!.map(({ name }) => name).join(', ');
  }
}

function layoutError(message: string): InferenceFailedError {
  return new InferenceFailedError(`${message}: every row must answer with the same outputs, datatypes and shapes`);
}

function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((size, i) => size === b[i]);
}

/** The record's answer, parsed: it must be JSON. */
export function parseAnswer(record: ScoredRecord): unknown {
  try {
    return JSON.parse(record.answer as string);
  } catch (error) {
    throw new InferenceFailedError(`row ${JSON.stringify(record.id)}: the handler's answer is not JSON`, {
      cause: error,
    });
  }
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Tensor data ready for JSON.stringify, in the v2 JSON spelling. The array itself when nothing
 * needs respelling (the common case: finite floats), so most rows copy nothing.
 */
export function jsonData(datatype: Datatype, data: OutputTensor['data']): readonly unknown[] {
  switch (datatype) {
    case 'INT64':
    case 'UINT64':
      return data.map((value) =>
        typeof value === 'bigint' && (value > MAX_SAFE || value < -MAX_SAFE) ? String(value) : Number(value),
      );
    case 'FP16':
    case 'FP32':
    case 'FP64':
      return data.every((value) => Number.isFinite(value))
        ? data
        : data.map((value) => (Number.isFinite(value) ? value : String(value)));
    default:
      return data;
  }
}

/**
 * A text file written in chunks of about 64 KiB. Writes are chained, so callers that do not
 * await each record still get their lines in order; callers that await get backpressure.
 * An I/O error fails the write that met it and every later one.
 */
export class TextFile {
  private static readonly CHUNK = 64 * 1024;
  private pending: string[] = [];
  private pendingLength = 0;
  private written: Promise<void> = Promise.resolve();

  private constructor(private readonly handle: FileHandle) {}

  static async open(path: string): Promise<TextFile> {
    return new TextFile(await open(path, 'w'));
  }

  write(text: string): Promise<void> {
    this.pending.push(text);
    this.pendingLength += text.length;
    return this.pendingLength >= TextFile.CHUNK ? this.flush() : this.written;
  }

  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      await this.handle.close();
    }
  }

  private flush(): Promise<void> {
    const text = this.pending.join('');
    this.pending = [];
    this.pendingLength = 0;
    this.written = this.written.then(async () => {
      await this.handle.write(text);
    });
    return this.written;
  }
}
