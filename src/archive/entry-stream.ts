import type { FileHandle } from 'node:fs/promises';
import { Transform, type Duplex, type Readable, type TransformCallback } from 'node:stream';
import { crc32 } from 'node:zlib';
import { ArchiveCorruptError, ArchiveTooLargeError, BatchserveError } from '../core/errors.js';
import { describeEntry } from './limits.js';

// The plumbing between an entry's bytes on disk and whoever reads them.

/**
 * Passes an entry's bytes through while holding it to what the listing declared: more
 * bytes than declared is a lying header (ArchiveTooLargeError, raised as soon as the
 * excess arrives), fewer, or a wrong CRC-32 when one is given, is damage (ArchiveCorruptError).
 */
export class DeclaredSizeStream extends Transform {
  readonly #what: string;
  readonly #size: number;
  readonly #expectedCrc: number | undefined;
  #seen = 0;
  #crc = 0;

  constructor(what: string, size: number, expectedCrc?: number) {
    super();
    this.#what = what;
    this.#size = size;
    this.#expectedCrc = expectedCrc;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#seen += chunk.length;
    if (this.#seen > this.#size) {
      callback(new ArchiveTooLargeError(`${this.#what} holds more than the ${this.#size} bytes it declares`));
      return;
    }
    if (this.#expectedCrc !== undefined) this.#crc = crc32(chunk, this.#crc);
    callback(null, chunk);
  }

  override _flush(callback: TransformCallback): void {
    if (this.#seen < this.#size) {
      callback(new ArchiveCorruptError(`${this.#what} ends after ${this.#seen} of its ${this.#size} bytes`));
    } else if (this.#expectedCrc !== undefined && this.#crc !== this.#expectedCrc) {
      callback(new ArchiveCorruptError(`${this.#what} fails its CRC-32 check`));
    } else {
      callback();
    }
  }
}

/**
 * Pipes `stages` into `output`. An error anywhere ends `output` with `wrap(error)` instead,
 * so callers only ever see our error classes; closing `output` early stops every stage.
 */
export function feedThrough(
  stages: readonly [Readable, ...Duplex[]],
  output: Transform,
  wrap: (error: unknown) => Error,
): void {
  for (const stage of stages) stage.on('error', (error) => output.destroy(wrap(error)));
  output.once('close', () => {
    for (const stage of stages) stage.destroy();
  });
  const [source, ...transforms] = stages;
  let upstream: Readable = source;
  for (const transform of transforms) upstream = upstream.pipe(transform);
  upstream.pipe(output);
}

export function asCorrupt(location: string, path: string, error: unknown): Error {
  if (error instanceof BatchserveError) return error;
  const reason = error instanceof Error ? error.message : String(error);
  return new ArchiveCorruptError(`${describeEntry(location, path)} cannot be read (${reason})`, { cause: error });
}

const READ_CHUNK_BYTES = 64 * 1024;

/**
 * Bytes [start, end) of the archive. Positional reads on the one handle, because a
 * handle's own createReadStream closes the handle when destroyed, for every entry at once.
 */
export async function* readRange(handle: FileHandle, start: number, end: number): AsyncGenerator<Buffer> {
  for (let position = start; position < end;) {
    const length = Math.min(READ_CHUNK_BYTES, end - position);
    const { bytesRead, buffer } = await handle.read(Buffer.allocUnsafe(length), 0, length, position);
    if (bytesRead === 0) return;
    position += bytesRead;
    yield buffer.subarray(0, bytesRead);
  }
}
