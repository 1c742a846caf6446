import { mkdir, open, rm, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { listLogFiles, logFileName } from './log-files.js';
import type { LogRecord } from './log-records.js';

export type DropReason = 'buffer_full' | 'write_failed' | 'closed';

export interface LogWriterOptions {
  /** The model's log folder; created when missing. */
  readonly folder: string;
  /** A file past this many bytes is closed and the next one started. */
  readonly maxFileSize: number;
  /** Files kept; the oldest beyond it are deleted at rotation. */
  readonly maxFiles: number;
  /** Records waiting for the disk beyond which new ones are dropped. */
  readonly maxBuffered?: number;
  /** How long a record may wait for the next write when few arrive. */
  readonly flushIntervalMs?: number;
  /** Records lost, and why; the server counts them in `batchserve_prediction_log_dropped_total`. */
  readonly dropped: (records: number, reason: DropReason) => void;
  /** A write or rotation failed; called at most once per failing write. */
  readonly failed: (error: Error) => void;
}

const DEFAULT_MAX_BUFFERED = 10_000;
const DEFAULT_FLUSH_INTERVAL_MS = 200;
/** Records per write: large enough to amortise the system call, small enough not to stall the loop on stringify. */
const WRITE_BATCH = 512;

/**
 * Appends log records to a folder of rotating JSON Lines files without ever making a caller
 * wait: `append` only queues, a timer (or a full batch) starts a write, and one write is in
 * flight at a time. When the disk falls behind, the queue fills and further records are dropped
 * and counted; when a write fails (a full or read-only disk), its records are dropped and
 * counted and the next write tries again. Inference never waits for, or fails because of, the log.
 */
export class PredictionLogWriter {
  readonly folder: string;
  readonly #options: LogWriterOptions;
  readonly #maxBuffered: number;
  readonly #flushIntervalMs: number;
  #buffer: LogRecord[] = [];
  #file: FileHandle | undefined;
  /** Where writing goes on; found on the first write, so creating a writer never waits. */
  #position: { sequence: number; size: number } | undefined;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> | undefined;
  #closed = false;

  constructor(options: LogWriterOptions) {
    this.folder = options.folder;
    this.#options = options;
    this.#maxBuffered = options.maxBuffered ?? DEFAULT_MAX_BUFFERED;
    this.#flushIntervalMs = options.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS;
  }

  /** Queues one record; false when it was dropped (the queue is full, or the log is closed). */
  append(record: LogRecord): boolean {
    if (this.#closed) {
      this.#options.dropped(1, 'closed');
      return false;
    }
    if (this.#buffer.length >= this.#maxBuffered) {
      this.#options.dropped(1, 'buffer_full');
      return false;
    }
    this.#buffer.push(record);
    if (this.#writing === undefined) {
      if (this.#buffer.length >= WRITE_BATCH) this.#startWriting();
      else this.#timer ??= setTimeout(() => this.#startWriting(), this.#flushIntervalMs).unref();
    }
    return true;
  }

  /** Records queued and not yet written. */
  get pending(): number {
    return this.#buffer.length;
  }

  /** Resolves once everything queued before the call is written (or dropped). */
  async flush(): Promise<void> {
    while (this.#writing !== undefined || this.#buffer.length > 0) {
      if (this.#writing === undefined) this.#startWriting();
      await this.#writing;
    }
  }

  /** Writes what is queued, then closes the file; later records are dropped as `closed`. */
  async close(): Promise<void> {
    await this.flush();
    this.#closed = true;
    clearTimeout(this.#timer);
    await this.#file?.close();
    this.#file = undefined;
  }

  #startWriting(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#writing !== undefined || this.#buffer.length === 0) return;
    this.#writing = this.#writeQueued().finally(() => {
      this.#writing = undefined;
      // What arrived during the write, or stayed after a failed one, waits for the next timer:
      // a disk that keeps failing is tried once per interval, not in a loop.
      if (this.#buffer.length > 0 && !this.#closed) {
        this.#timer ??= setTimeout(() => this.#startWriting(), this.#flushIntervalMs).unref();
      }
    });
  }

  async #writeQueued(): Promise<void> {
    while (this.#buffer.length > 0) {
      const batch = this.#buffer.splice(0, WRITE_BATCH);
      let text = '';
      for (const record of batch) text += `${JSON.stringify(record)}\n`;
      try {
        const bytes = Buffer.byteLength(text);
        const position = (this.#position ??= await this.#findPosition());
        if (position.size > 0 && position.size + bytes > this.#options.maxFileSize) await this.#rotate(position);
        this.#file ??= await open(path.join(this.folder, logFileName(position.sequence)), 'a');
        await this.#file.write(text);
        position.size += bytes;
      } catch (error) {
        this.#options.dropped(batch.length, 'write_failed');
        this.#options.failed(error as Error);
        // A handle that failed may be broken for good (a removed folder): the next write reopens.
        await this.#file?.close().catch(() => undefined);
        this.#file = undefined;
        this.#position = undefined;
        return;
      }
    }
  }

  /**
   * Writing goes on in the folder's newest file while that has room (a restart continues where
   * the last run stopped), else in the next one.
   */
  async #findPosition(): Promise<{ sequence: number; size: number }> {
    await mkdir(this.folder, { recursive: true });
    const newest = (await listLogFiles(this.folder)).at(-1);
    if (newest === undefined) return { sequence: 1, size: 0 };
    const size = (await stat(newest.path)).size;
    return size < this.#options.maxFileSize
      ? { sequence: newest.sequence, size }
      : { sequence: newest.sequence + 1, size: 0 };
  }

  /** Starts the next file and deletes the oldest beyond `maxFiles`. */
  async #rotate(position: { sequence: number; size: number }): Promise<void> {
    await this.#file?.close();
    this.#file = undefined;
    position.sequence += 1;
    position.size = 0;
    const files = await listLogFiles(this.folder);
    // The new file is not created yet: it counts as one of the kept ones.
    const excess = files.length + 1 - this.#options.maxFiles;
    for (const file of files.slice(0, Math.max(0, excess))) await rm(file.path, { force: true });
  }
}
