import {
  ArchiveDuplicateEntryError,
  ArchiveTooLargeError,
  ArchiveTooManyEntriesError,
  ArchiveUnsafePathError,
} from '../core/errors.js';
import { entryNameProblem } from '../core/entry-name.js';
import { quoted } from '../core/quote.js';

/** What an archive may declare before batchserve refuses to read it. */
export interface ArchiveLimits {
  /** Entries of every kind, directories included. */
  maxEntries: number;
  /** Sum of the declared uncompressed sizes: the fixed ceiling. */
  maxTotalBytes: number;
  /**
   * Sum of the declared uncompressed sizes / the zip file's own bytes, once that sum passes
   * ratioFloorBytes. The per-entry ratio alone lets a bomb through as many entries each under
   * the floor (8.4 MB expanding to 7.97 GiB); the file's size, unlike a header, cannot lie.
   */
  maxExpansion: number;
  /** Declared uncompressed size of any one entry. */
  maxEntryBytes: number;
  /** Uncompressed / compressed size of one entry; zip bombs live far above it. */
  maxRatio: number;
  /**
   * Entries at or below this size skip the ratio check. Real models with constant or zeroed
   * weights compress several hundred to one, so the ratio only flags entries that are also
   * large; the size limits and the streaming check against declared sizes cover the rest.
   */
  ratioFloorBytes: number;
}

const GiB = 1024 ** 3;

export const defaultArchiveLimits: Readonly<ArchiveLimits> = Object.freeze({
  maxEntries: 10_000,
  maxTotalBytes: 8 * GiB,
  maxEntryBytes: 4 * GiB,
  maxRatio: 200,
  maxExpansion: 200,
  ratioFloorBytes: 32 * 1024 ** 2,
});

export function resolveLimits(overrides: Partial<ArchiveLimits> = {}): Readonly<ArchiveLimits> {
  const limits = { ...defaultArchiveLimits };
  for (const key of Object.keys(limits) as (keyof ArchiveLimits)[]) {
    const value = overrides[key];
    if (value !== undefined) limits[key] = value;
  }
  return Object.freeze(limits);
}

/** How an entry is named in errors: quoted, so NUL bytes and trailing spaces show. */
export function describeEntry(location: string, name: string): string {
  return `${location}: entry ${quoted(name)}`;
}

/**
 * Rejects names that could land outside the extraction root, or that mean different
 * files on different systems. `name` is a file path; directory entries arrive without
 * their trailing '/'.
 */
export function checkEntryName(location: string, name: string): void {
  const problem = entryNameProblem(name);
  if (problem !== undefined) throw new ArchiveUnsafePathError(`${describeEntry(location, name)} ${problem}`);
}

/**
 * Admits entries one at a time, as the central directory or the directory walk lists
 * them, and throws at the first one that breaks a limit, so nothing is read past it.
 */
export class ArchiveGuard {
  readonly #location: string;
  readonly #limits: Readonly<ArchiveLimits>;
  #count = 0;
  #totalBytes = 0;
  /** Case- and normalisation-folded names of listed entries: what collides on macOS and Windows. */
  readonly #listed = new Map<string, 'file' | 'directory'>();
  /** Folded names of every directory some file sits in. */
  readonly #parents = new Set<string>();

  readonly #archiveBytes: number | undefined;

  /** `archiveBytes`: the zip file's size; a directory, whose sizes are its files', has none. */
  constructor(location: string, limits: Readonly<ArchiveLimits>, archiveBytes?: number) {
    this.#location = location;
    this.#limits = limits;
    this.#archiveBytes = archiveBytes;
  }

  /** For formats that declare their entry count up front: refuse before listing any. */
  checkDeclaredCount(count: number): void {
    if (count > this.#limits.maxEntries) {
      throw new ArchiveTooManyEntriesError(
        `${this.#location}: declares ${count} entries, more than the limit of ${this.#limits.maxEntries}`,
      );
    }
  }

  admitDirectory(name: string): void {
    this.#admit(name, 'directory');
  }

  admitFile(name: string, size: number, compressedSize: number): void {
    const limits = this.#limits;
    const tooLarge = (why: string): never => {
      throw new ArchiveTooLargeError(`${describeEntry(this.#location, name)} ${why}`);
    };
    if (size > limits.maxEntryBytes) tooLarge(`declares ${size} bytes, more than the limit of ${limits.maxEntryBytes}`);
    if (size > limits.ratioFloorBytes && size > compressedSize * limits.maxRatio) {
      tooLarge(`expands ${compressedSize} bytes to ${size}, a ratio over ${limits.maxRatio} (a zip bomb?)`);
    }
    this.#totalBytes += size;
    if (this.#totalBytes > limits.maxTotalBytes) {
      tooLarge(`brings the archive over its limit of ${limits.maxTotalBytes} bytes`);
    }
    const archiveBytes = this.#archiveBytes;
    if (
      archiveBytes !== undefined &&
      this.#totalBytes > limits.ratioFloorBytes &&
      this.#totalBytes > archiveBytes * limits.maxExpansion
    ) {
      tooLarge(
        `brings the archive's expanded size to ${this.#totalBytes} bytes, over ${limits.maxExpansion} times its ${archiveBytes} bytes (a zip bomb?)`,
      );
    }
    this.#admit(name, 'file');
  }

  #admit(name: string, kind: 'file' | 'directory'): void {
    this.#count += 1;
    this.checkDeclaredCount(this.#count);
    checkEntryName(this.#location, name);
    const key = name.normalize('NFC').toLowerCase();
    const collision = (why: string): never => {
      throw new ArchiveDuplicateEntryError(`${describeEntry(this.#location, name)} ${why}`);
    };
    if (this.#listed.has(key)) collision('appears twice (names are compared ignoring case)');
    if (kind === 'file' && this.#parents.has(key)) collision('is a file and also a directory of other entries');
    for (let slash = key.indexOf('/'); slash !== -1; slash = key.indexOf('/', slash + 1)) {
      const parent = key.slice(0, slash);
      if (this.#listed.get(parent) === 'file') collision(`sits under ${JSON.stringify(parent)}, which is a file`);
      this.#parents.add(parent);
    }
    this.#listed.set(key, kind);
  }
}
