import type { DatasetRow, ReadyRow, RowFailure } from './dataset.js';
import type { ScoredRecord } from './records.js';

/** One row's result, handed on in row order. */
export type RowOutcome =
  | { readonly row: number; readonly record: ScoredRecord }
  | { readonly row: number; readonly id: string; readonly failure: RowFailure };

export interface RowStreamOptions {
  /** Rows `[from, to)`, in order. */
  readonly rows: AsyncIterable<DatasetRow>;
  readonly from: number;
  readonly to: number;
  /**
   * Most batch rows submitted and not yet answered: enough to keep every instance's next batch
   * full, and no more than the queue takes. A request larger than this goes alone.
   */
  readonly maxInFlight: number;
  /** Most rows between the oldest not yet handed on and the newest read: the reorder window. */
  readonly window: number;
  /** Scores one request: an outcome for each input row it carries; never rejects (a failure is an outcome). */
  score(row: ReadyRow): Promise<readonly RowOutcome[]>;
  /** Takes each outcome in row order; awaited, so a slow writer slows the reading. */
  deliver(outcome: RowOutcome): Promise<void>;
}

/**
 * Reading, scoring and writing overlap, each bounded: the reader stops while `maxInFlight`
 * rows are being scored or the window is full, and rows that finish early wait in the window
 * until the rows before them are handed on. Memory holds at most `window` rows, however long
 * the input. The first error of the reader or the deliverer stops both and is thrown.
 */
export async function streamRows(options: RowStreamOptions): Promise<void> {
  const { from, to } = options;
  const window = new ReorderWindow<RowOutcome>(options.window, from);
  let inFlight = 0;
  let failure: { error: unknown } | undefined;
  let wakeReader: (() => void) | undefined;
  let wakeWriter: (() => void) | undefined;
  const signal = (which: 'reader' | 'writer'): void => {
    const wake = which === 'reader' ? wakeReader : wakeWriter;
    if (which === 'reader') wakeReader = undefined;
    else wakeWriter = undefined;
    wake?.();
  };
  const stop = (error: unknown): void => {
    failure ??= { error };
    signal('reader');
    signal('writer');
  };
  const settle = (outcome: RowOutcome): void => {
    window.put(outcome.row, outcome);
    signal('writer');
  };

  const read = async (): Promise<void> => {
    let expected = from;
    for await (const item of options.rows) {
      if (item.row !== expected) throw new Error(`the input gave row ${item.row} where row ${expected} was due`);
      const span = 'failure' in item ? 1 : (item.chunk?.count ?? 1);
      expected += span;
      if (span > options.window) throw new Error(`a request of ${span} rows cannot fit a window of ${options.window}`);
      const rows = 'failure' in item ? 0 : item.rows;
      const full = (): boolean => inFlight > 0 && inFlight + rows > options.maxInFlight;
      while (!failure && (full() || !window.hasRoomFor(item.row + span - 1))) {
        await new Promise<void>((resolve) => (wakeReader = resolve));
      }
      if (failure) return;
      if ('failure' in item) {
        settle({ row: item.row, id: item.id, failure: item.failure });
        continue;
      }
      inFlight += rows;
      void options.score(item).then(
        (outcomes) => {
          inFlight -= rows;
          for (const outcome of outcomes) settle(outcome);
          signal('reader');
        },
        (error: unknown) => {
          inFlight -= rows;
          stop(error);
        },
      );
    }
    if (expected !== to) throw new Error(`the input ended at row ${expected}; rows up to ${to} were due`);
  };

  const write = async (): Promise<void> => {
    for (let row = from; row < to; row++) {
      let outcome = window.take();
      while (outcome === undefined) {
        if (failure) return;
        await new Promise<void>((resolve) => (wakeWriter = resolve));
        outcome = window.take();
      }
      signal('reader');
      await options.deliver(outcome);
    }
  };

  await Promise.all([read().catch(stop), write().catch(stop)]);
  if (failure) throw failure.error;
}

/** A fixed ring of slots for rows `[next, next + capacity)`, taken out strictly in order. */
export class ReorderWindow<T> {
  readonly #slots: (T | undefined)[];
  #next: number;

  constructor(capacity: number, first: number) {
    this.#slots = new Array<T | undefined>(Math.max(1, capacity));
    this.#next = first;
  }

  /** The row to be taken next. */
  get next(): number {
    return this.#next;
  }

  hasRoomFor(row: number): boolean {
    return row - this.#next < this.#slots.length;
  }

  put(row: number, value: T): void {
    if (row < this.#next || !this.hasRoomFor(row)) throw new RangeError(`row ${row} is outside the window`);
    this.#slots[row % this.#slots.length] = value;
  }

  /** The next row's value once it is there; the window then moves on by one. */
  take(): T | undefined {
    const slot = this.#next % this.#slots.length;
    const value = this.#slots[slot];
    if (value === undefined) return undefined;
    this.#slots[slot] = undefined;
    this.#next++;
    return value;
  }
}
