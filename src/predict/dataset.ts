import type { HandlerRequest } from '../core/request.js';
import type { ModelSignature, PreparedRequest } from '../protocol/prepared-request.js';

export const INPUT_KINDS = ['jsonl', 'images', 'npy', 'csv'] as const;
export type InputKind = (typeof INPUT_KINDS)[number];

/** Why one row could not be scored, as the errors file says it. */
export interface RowFailure {
  readonly reason: string;
  readonly code: string;
}

/** One input row: a request ready for the batcher, or why there is none. */
export type DatasetRow = ReadyRow | FailedRow;

interface RowBase {
  /** 0-based position in the whole input: what --shard slices and the checkpoint counts. */
  readonly row: number;
  /** What the output record calls it: a line number, a file name, an id column. */
  readonly id: string;
}

export interface ReadyRow extends RowBase {
  readonly request: HandlerRequest;
  /** Rows the request adds to a batch and the key of the requests it may share one with. */
  readonly rows: number;
  readonly shapeKey: string;
  /** The outputs to keep, when the row asked for some (a v2 line's `outputs`). */
  readonly outputs?: readonly string[];
  /** Set when the request carries several consecutive input rows, `row` the first of them. */
  readonly chunk?: RowChunk;
}

/** A row decoded and checked by the protocol layer, ready for the batcher; its buffers are its own. */
export function preparedRow(row: number, id: string, prepared: PreparedRequest): ReadyRow {
  return {
    row,
    id,
    request: { kind: 'tensors', inputs: prepared.inputs, rows: prepared.rows, movable: true },
    rows: prepared.rows,
    shapeKey: prepared.shapeKey,
  };
}

/**
 * Consecutive rows sent as one request of `count` rows (a `.npy` read a batch at a time): one
 * buffer moved to the instance instead of a copy per row and a stacked copy per batch.
 */
export interface RowChunk {
  readonly count: number;
  readonly ids: readonly string[];
  /** The same rows as one request each (read again), for a chunk that failed. */
  split(): Promise<ReadyRow[]>;
}

export interface FailedRow extends RowBase {
  readonly failure: RowFailure;
}

/**
 * What identifies an input, so that a checkpoint is only resumed on the same data: a file's
 * size and mtime; a folder's matched files, their total size, newest mtime and a digest of
 * their names, sizes and mtimes.
 */
export interface InputIdentity {
  readonly path: string;
  readonly kind: InputKind;
  readonly size: number;
  readonly mtimeMs: number;
  readonly files?: number;
  readonly digest?: string;
}

/** An input read row by row in order, its rows counted once on opening. */
export interface Dataset {
  readonly rowCount: number;
  /**
   * Rows `[from, to)` in order, each exactly once. With `chunkRows` > 1 an input that can
   * (`.npy`) gives up to that many consecutive rows per request.
   */
  rows(from: number, to: number, options?: { readonly chunkRows?: number }): AsyncIterable<DatasetRow>;
  close?(): Promise<void>;
}

/** An input found and identified; opening it against a model checks what the model takes. */
export interface LocatedInput {
  readonly identity: InputIdentity;
  open(signature: ModelSignature): Promise<Dataset>;
}

export interface InputSpec {
  readonly path: string;
  /** Default: a folder is images, `.npy` and `.csv` by extension, anything else JSON Lines. */
  readonly kind?: InputKind;
  /** Image folders: which files, by their path relative to the folder. */
  readonly glob?: string;
  /** CSV: the columns that make the model's input, in order (default: all but the id column). */
  readonly csvColumns?: readonly string[];
  /** CSV: the column holding each row's id (default: the line number). */
  readonly idColumn?: string;
}

/** A thrown error as the errors file records it: its message and its stable code. */
export function rowFailure(error: unknown): RowFailure {
  const code =
    error instanceof Error && 'code' in error && typeof error.code === 'string' && error.code.startsWith('BS_ERR_')
      ? error.code
      : 'BS_ERR_INFERENCE_FAILED';
  return { reason: error instanceof Error ? error.message : String(error), code };
}
