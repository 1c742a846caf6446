import type { Datatype } from '../core/datatypes.js';

/** One output tensor of a scored row, as plain data (row-major, its own shape). */
export interface OutputTensor {
  readonly datatype: Datatype;
  readonly shape: readonly number[];
  /** Numbers for numeric datatypes (INT64/UINT64 as bigint), booleans for BOOL, strings for BYTES. */
  readonly data: readonly (number | bigint | boolean | string)[];
}

/** One input row's result: what every output format writes, in input order. */
export interface ScoredRecord {
  /** The row's id: its line number, file name or id column. */
  readonly id: string;
  readonly model: string;
  readonly version: string;
  /** The handler's tensors by output name; undefined when it answered something else. */
  readonly outputs: Readonly<Record<string, OutputTensor>> | undefined;
  /** The handler's answer when it is not tensors (e.g. the image classifier's top-k), as JSON text. */
  readonly answer: string | undefined;
}

/**
 * Writes records to one output file. The column layout is fixed by the first record's output
 * names, datatypes and shapes (every row of a model answers alike); a record that differs is
 * an error. `close` finishes the file; nothing is readable as complete before it resolves.
 */
export interface RecordWriter {
  write(record: ScoredRecord): Promise<void>;
  close(): Promise<void>;
}
