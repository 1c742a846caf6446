import { mkdir, open, rename, rm, stat, truncate, type FileHandle } from 'node:fs/promises';
import { CheckpointError, UsageError } from '../core/errors.js';
import { writeCheckpoint, type Checkpoint, type OutputLayout } from './checkpoint.js';
import { openCsvWriter } from './csv-writer.js';
import { rowFailure, type RowFailure } from './dataset.js';
import { appendFrom, csvHeaderLength } from './file-append.js';
import type { JobPaths, OutputFormat } from './job-paths.js';
import { openJsonlWriter, RecordLayout } from './jsonl-writer.js';
import { openParquetWriter } from './parquet-writer.js';
import { openRecordSpool, readRecordSpool } from './record-spool.js';
import type { RecordWriter, ScoredRecord } from './records.js';

const WRITERS: Record<OutputFormat, (path: string) => Promise<RecordWriter>> = {
  jsonl: openJsonlWriter,
  csv: openCsvWriter,
  parquet: openParquetWriter,
};

export interface JobOutputOptions {
  readonly paths: JobPaths;
  readonly format: OutputFormat;
  /** What every checkpoint of this job repeats. */
  readonly base: Pick<Checkpoint, 'job' | 'rows'>;
  /** A running checkpoint to continue from; none starts afresh. */
  readonly resume?: Checkpoint;
}

/** Rows of the job handed to the output so far (a resumed job's earlier ones included), by outcome. */
export interface OutputCounts {
  readonly done: number;
  readonly records: number;
  readonly failed: number;
}

/**
 * The written side of a job, in row order. Rows go into a segment file through the format's
 * own writer; each commit closes the segment, appends it to the committed output (a CSV
 * segment without its header after the first), appends the segment's failures to the errors,
 * fsyncs both and rewrites the checkpoint. A crash loses at most the open segment. Parquet
 * cannot be appended to, so its segments are record spools (exact JSON lines), rewritten as
 * one Parquet file at the end. Every record is checked against the first one's layout (the
 * checkpoint keeps it across a resume); a row that answers differently is a failed row.
 * Operations run one at a time, in the order they were called.
 */
export class JobOutput {
  readonly #options: JobOutputOptions;
  readonly #committed: FileHandle;
  readonly #errors: FileHandle;
  #committedBytes: number;
  #errorsBytes: number;
  #layout: RecordLayout | undefined;
  #storedLayout: OutputLayout | null;
  #segment: RecordWriter | undefined;
  #pendingErrors: string[] = [];
  #written: OutputCounts;
  #saved: OutputCounts;
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(options: JobOutputOptions, committed: FileHandle, errors: FileHandle) {
    this.#options = options;
    this.#committed = committed;
    this.#errors = errors;
    const { resume } = options;
    this.#committedBytes = resume?.outputBytes ?? 0;
    this.#errorsBytes = resume?.errorsBytes ?? 0;
    this.#saved = { done: resume?.done ?? 0, records: resume?.records ?? 0, failed: resume?.failed ?? 0 };
    this.#written = this.#saved;
    this.#storedLayout = resume?.layout ?? null;
    this.#layout = this.#storedLayout ? RecordLayout.check(undefined, layoutSample(this.#storedLayout)) : undefined;
  }

  /** Prepares the work folder: empty files for a new job; for a resumed one, everything past the checkpoint cut off. */
  static async begin(options: JobOutputOptions): Promise<JobOutput> {
    const { paths, resume } = options;
    await mkdir(paths.partial).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'EEXIST') return;
      throw new UsageError(
        error.code === 'ENOENT'
          ? `the folder of --output ${paths.output} does not exist`
          : `cannot write beside --output ${paths.output}: ${error.code ?? error.message}`,
      );
    });
    await rm(paths.segment, { force: true });
    if (resume) {
      await cutTo(paths.committed, resume.outputBytes, paths.checkpoint);
      await cutTo(paths.partialErrors, resume.errorsBytes, paths.checkpoint);
    }
    const committed = await open(paths.committed, resume ? 'r+' : 'w');
    const errors = await open(paths.partialErrors, resume ? 'r+' : 'w').catch(async (error: unknown) => {
      await committed.close();
      throw error;
    });
    const output = new JobOutput(options, committed, errors);
    if (!resume) await output.#run(() => output.#commitNow(true));
    return output;
  }

  /** Rows handed over so far, committed or not. */
  get written(): OutputCounts {
    return this.#written;
  }

  /** Rows the checkpoint holds. */
  get saved(): OutputCounts {
    return this.#saved;
  }

  /** The next row in order: its record, or why it failed. */
  write(row: number, outcome: { record: ScoredRecord } | { id: string; failure: RowFailure }): Promise<void> {
    return this.#run(async () => {
      if ('record' in outcome) {
        try {
          this.#layout = RecordLayout.check(this.#layout, outcome.record);
        } catch (error) {
          this.#fail(row, outcome.record.id, rowFailure(error));
          return;
        }
        this.#storedLayout ??= layoutOf(outcome.record);
        this.#segment ??= await this.#openSegment();
        await this.#segment.write(outcome.record);
        this.#count(1, 0);
      } else {
        this.#fail(row, outcome.id, outcome.failure);
      }
    });
  }

  /** Makes every row written so far survive a crash; does nothing when nothing is new. */
  commit(): Promise<void> {
    return this.#run(() => this.#commitNow());
  }

  /**
   * Commits the last rows and puts the output and errors in place: the finished output (the
   * committed file, or a Parquet file rewritten from it, or an empty run's file from the
   * format's writer) is renamed over `output`, so no reader ever sees part of it.
   */
  finish(model: { name: string; version: string }): Promise<Checkpoint> {
    return this.#run(async () => {
      await this.#commitNow();
      await this.#close();
      const { paths, format } = this.#options;
      if (this.#saved.records === 0) {
        await (await WRITERS[format](paths.assembled)).close();
      } else if (format === 'parquet') {
        const writer = await openParquetWriter(paths.assembled);
        for await (const record of readRecordSpool(paths.committed)) await writer.write(record);
        await writer.close();
      } else {
        await rename(paths.committed, paths.assembled);
      }
      const finishing: Checkpoint = {
        ...this.#checkpoint(),
        state: 'finishing',
        outputBytes: (await stat(paths.assembled)).size,
        model,
      };
      await writeCheckpoint(paths.checkpoint, finishing);
      return completeFinish(paths, finishing);
    });
  }

  /** Stops writing, keeping the checkpointed state for a later --resume. */
  abandon(): Promise<void> {
    return this.#run(() => this.#close());
  }

  #run<T>(operation: () => Promise<T>): Promise<T> {
    const result = this.#queue.then(operation);
    this.#queue = result.catch(() => undefined);
    return result;
  }

  #fail(row: number, id: string, failure: RowFailure): void {
    this.#pendingErrors.push(`${JSON.stringify({ row, id, reason: failure.reason, code: failure.code })}\n`);
    this.#count(0, 1);
  }

  #count(records: number, failed: number): void {
    const { done, records: allRecords, failed: allFailed } = this.#written;
    this.#written = { done: done + 1, records: allRecords + records, failed: allFailed + failed };
  }

  async #openSegment(): Promise<RecordWriter> {
    const { paths, format } = this.#options;
    return format === 'parquet' ? openRecordSpool(paths.segment) : WRITERS[format](paths.segment);
  }

  async #commitNow(always = false): Promise<void> {
    if (this.#written === this.#saved && !always) return;
    const { paths, format } = this.#options;
    if (this.#segment) {
      await this.#segment.close();
      this.#segment = undefined;
      // Every CSV segment starts with the header; the committed file keeps only the first.
      const skip = format === 'csv' && this.#committedBytes > 0 ? await csvHeaderLength(paths.segment) : 0;
      this.#committedBytes += await appendFrom(this.#committed, this.#committedBytes, paths.segment, skip);
      await rm(paths.segment);
      await this.#committed.sync();
    }
    if (this.#pendingErrors.length > 0) {
      const text = Buffer.from(this.#pendingErrors.join(''));
      this.#pendingErrors = [];
      await this.#errors.write(text, 0, text.length, this.#errorsBytes);
      this.#errorsBytes += text.length;
      await this.#errors.sync();
    }
    // `saved` moves only once the checkpoint that holds it is in place.
    const written = this.#written;
    await writeCheckpoint(paths.checkpoint, this.#checkpoint(written));
    this.#saved = written;
  }

  #checkpoint(counts: OutputCounts = this.#saved): Checkpoint {
    return {
      version: 1,
      state: 'running',
      ...this.#options.base,
      ...counts,
      outputBytes: this.#committedBytes,
      errorsBytes: this.#errorsBytes,
      layout: this.#storedLayout,
      updatedAt: new Date().toISOString(),
    };
  }

  async #close(): Promise<void> {
    await this.#segment?.close();
    this.#segment = undefined;
    await this.#committed.close();
    await this.#errors.close();
  }
}

/**
 * The last steps of a finishing job, safe to repeat after a crash: rename the assembled output
 * and the errors into place (over an earlier run's, with --force; an errors file only when
 * rows failed), mark the checkpoint finished and remove the work folder.
 */
export async function completeFinish(paths: JobPaths, checkpoint: Checkpoint): Promise<Checkpoint> {
  if (await exists(paths.assembled)) await rename(paths.assembled, paths.output);
  if (checkpoint.failed > 0 && (await exists(paths.partialErrors))) await rename(paths.partialErrors, paths.errors);
  // No rows failed: no errors file, not even one left by an earlier run of this output.
  if (checkpoint.failed === 0) await rm(paths.errors, { force: true });
  const size = await stat(paths.output).then(
    (found) => found.size,
    () => -1,
  );
  if (size !== checkpoint.outputBytes) {
    throw new CheckpointError(
      `${paths.output} should hold ${checkpoint.outputBytes} bytes but ${size < 0 ? 'is missing' : `holds ${size}`}; pass --force to run the job again`,
    );
  }
  const finished: Checkpoint = { ...checkpoint, state: 'finished', updatedAt: new Date().toISOString() };
  await writeCheckpoint(paths.checkpoint, finished);
  await rm(paths.partial, { recursive: true, force: true });
  return finished;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/** Cuts a work file back to its checkpointed size; a file shorter than that was damaged. */
async function cutTo(path: string, size: number, checkpoint: string): Promise<void> {
  const found = await stat(path).catch(() => undefined);
  if (!found || found.size < size) {
    throw new CheckpointError(
      `${path} holds ${found ? found.size : 'no'} bytes where ${checkpoint} recorded ${size}; pass --force to start again`,
    );
  }
  if (found.size > size) await truncate(path, size);
}

/** The first record's outputs (datatype and shape by name) or "answer": what every later record must match. */
function layoutOf(record: ScoredRecord): OutputLayout {
  if (!record.outputs) return 'answer';
  return Object.fromEntries(
    Object.entries(record.outputs).map(([name, { datatype, shape }]) => [name, { datatype, shape: [...shape] }]),
  );
}

function layoutSample(layout: OutputLayout): ScoredRecord {
  const base = { id: '', model: '', version: '' };
  if (layout === 'answer') return { ...base, outputs: undefined, answer: 'null' };
  const outputs = Object.fromEntries(
    Object.entries(layout).map(([name, { datatype, shape }]) => [
      name,
      { datatype, shape, data: new Array<number>(shape.reduce((a, b) => a * b, 1)).fill(0) },
    ]),
  );
  return { ...base, outputs, answer: undefined };
}
