import { constants } from 'node:fs';
import { lstat, open, readdir, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createInflateRaw } from 'node:zlib';
import { Open } from 'unzipper';
import {
  ArchiveCorruptError,
  ArchiveMissingFileError,
  ArchiveSymlinkError,
  ArchiveUnsafePathError,
  InputFileError,
} from '../core/errors.js';
import { asCorrupt, DeclaredSizeStream, feedThrough, readRange } from './entry-stream.js';
import { ArchiveGuard, describeEntry, resolveLimits, type ArchiveLimits } from './limits.js';
import { checkRecord, dataOffset, declaredEntryCount, type ZipRecord } from './zip-format.js';

export interface ArchiveEntry {
  /** '/'-separated, relative to the archive root. */
  readonly path: string;
  /** Uncompressed bytes, as declared; reading yields exactly this many or fails. */
  readonly size: number;
  readonly compressedSize: number;
  /** The zip's CRC-32 of the data; absent for directories. */
  readonly crc32?: number;
}

export interface ReadOptions {
  /**
   * Check zip entries against their CRC-32 (default true). Callers that compare a sha256
   * from the manifest turn it off, so tampering is reported as a mismatch, not as damage.
   */
  checkCrc?: boolean;
}

/** A .mar opened for reading in place: a zip file, or a directory with the same layout. */
export interface ArchiveSource {
  readonly location: string;
  readonly format: 'zip' | 'dir';
  /** Regular files only, in archive order (sorted by name for directories). */
  readonly entries: readonly ArchiveEntry[];
  entry(path: string): ArchiveEntry | undefined;
  /** Fails with ArchiveTooLargeError past the declared size, ArchiveCorruptError on damaged data. */
  openStream(path: string, options?: ReadOptions): Readable;
  readFile(path: string): Promise<Buffer>;
  close(): Promise<void>;
}

/**
 * Opens an archive and runs every guard on its listing (names, links, duplicates, counts,
 * sizes) before any entry's data is read.
 */
export async function openArchive(location: string, limits?: Partial<ArchiveLimits>): Promise<ArchiveSource> {
  const resolved = resolveLimits(limits);
  const stats = await stat(location).catch((error: NodeJS.ErrnoException) => {
    throw new InputFileError(`${location}: cannot open archive (${error.code ?? error.message})`, { cause: error });
  });
  if (stats.isDirectory()) return openDirectory(location, resolved);
  if (stats.isFile()) return openZip(location, resolved);
  throw new InputFileError(`${location}: is neither a file nor a directory`);
}

abstract class ListedSource implements ArchiveSource {
  abstract readonly format: 'zip' | 'dir';
  readonly #byPath: ReadonlyMap<string, ArchiveEntry>;

  constructor(
    readonly location: string,
    readonly entries: readonly ArchiveEntry[],
  ) {
    this.#byPath = new Map(entries.map((entry) => [entry.path, entry]));
  }

  entry(path: string): ArchiveEntry | undefined {
    return this.#byPath.get(path);
  }

  abstract openStream(path: string, options?: ReadOptions): Readable;
  abstract close(): Promise<void>;

  async readFile(path: string): Promise<Buffer> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.openStream(path)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }

  protected requireEntry(path: string): ArchiveEntry {
    const entry = this.#byPath.get(path);
    if (entry === undefined) throw new ArchiveMissingFileError(`${describeEntry(this.location, path)} does not exist`);
    return entry;
  }
}

// --- zip files -----------------------------------------------------------------

async function openZip(location: string, limits: Readonly<ArchiveLimits>): Promise<ArchiveSource> {
  const handle = await open(location, 'r');
  try {
    const { size } = await handle.stat();
    const guard = new ArchiveGuard(location, limits, size);
    // unzipper lists every record it is told about; a forged count must stop here first.
    guard.checkDeclaredCount(await declaredEntryCount(handle, size, location));
    const directory = await Open.file(location).catch((error: Error) => {
      throw new ArchiveCorruptError(`${location}: not a readable zip archive (${error.message})`, { cause: error });
    });
    const records: ZipRecord[] = [];
    for (const file of directory.files) {
      const record = checkRecord(file, location, size);
      if (record.isDirectory) guard.admitDirectory(record.path);
      else {
        guard.admitFile(record.path, record.size, record.compressedSize);
        records.push(record);
      }
    }
    return new ZipSource(location, handle, records);
  } catch (error) {
    await handle.close();
    throw error;
  }
}

class ZipSource extends ListedSource {
  readonly format = 'zip';
  readonly #handle: FileHandle;
  readonly #records: ReadonlyMap<string, ZipRecord>;

  constructor(location: string, handle: FileHandle, records: readonly ZipRecord[]) {
    super(
      location,
      records.map(({ path, size, compressedSize, crc32 }) => ({ path, size, compressedSize, crc32 })),
    );
    this.#handle = handle;
    this.#records = new Map(records.map((record) => [record.path, record]));
  }

  openStream(path: string, options: ReadOptions = {}): Readable {
    const entry = this.requireEntry(path);
    const record = this.#records.get(entry.path) as ZipRecord;
    const crc = options.checkCrc === false ? undefined : record.crc32;
    const output = new DeclaredSizeStream(describeEntry(this.location, path), record.size, crc);
    this.#feed(record, output).catch((error: unknown) => output.destroy(asCorrupt(this.location, path, error)));
    return output;
  }

  // Reads the data ourselves rather than through unzipper, so that destroying the output
  // stops the read at once and the size and CRC checks see every byte.
  async #feed(record: ZipRecord, output: DeclaredSizeStream): Promise<void> {
    const start = await dataOffset(this.#handle, record, this.location);
    if (output.destroyed) return;
    const raw = Readable.from(readRange(this.#handle, start, start + record.compressedSize), { objectMode: false });
    // An empty deflated entry may have no deflate data at all, which zlib calls truncated.
    const inflate = record.method === 8 && record.compressedSize > 0;
    feedThrough(inflate ? [raw, createInflateRaw()] : [raw], output, (error) =>
      asCorrupt(this.location, record.path, error),
    );
  }

  close(): Promise<void> {
    return this.#handle.close();
  }
}

// --- directories ---------------------------------------------------------------

async function openDirectory(root: string, limits: Readonly<ArchiveLimits>): Promise<ArchiveSource> {
  const guard = new ArchiveGuard(root, limits);
  const entries: ArchiveEntry[] = [];
  const walk = async (dir: string, prefix: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const path = prefix + name;
      const stats = await lstat(join(dir, name));
      if (stats.isSymbolicLink()) throw new ArchiveSymlinkError(`${describeEntry(root, path)} is a symbolic link`);
      if (stats.isDirectory()) {
        guard.admitDirectory(path);
        await walk(join(dir, name), `${path}/`);
      } else if (stats.isFile()) {
        guard.admitFile(path, stats.size, stats.size);
        entries.push({ path, size: stats.size, compressedSize: stats.size });
      } else {
        throw new ArchiveUnsafePathError(`${describeEntry(root, path)} is neither a regular file nor a directory`);
      }
    }
  };
  await walk(root, '');
  return new DirectorySource(root, entries);
}

class DirectorySource extends ListedSource {
  readonly format = 'dir';

  openStream(path: string): Readable {
    const entry = this.requireEntry(path);
    const what = describeEntry(this.location, path);
    const output = new DeclaredSizeStream(what, entry.size);
    const wrap = (error: unknown): Error =>
      (error as NodeJS.ErrnoException).code === 'ELOOP'
        ? new ArchiveSymlinkError(`${what} became a symbolic link`, { cause: error })
        : asCorrupt(this.location, path, error);
    // O_NOFOLLOW: a file swapped for a link after the walk is still refused.
    open(join(this.location, ...path.split('/')), constants.O_RDONLY | constants.O_NOFOLLOW).then(
      (handle) => {
        if (output.destroyed) void handle.close();
        else feedThrough([handle.createReadStream()], output, wrap);
      },
      (error: unknown) => output.destroy(wrap(error)),
    );
    return output;
  }

  async close(): Promise<void> {}
}
