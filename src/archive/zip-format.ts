import type { FileHandle } from 'node:fs/promises';
import type { File as CentralDirectoryRecord } from 'unzipper';
import { ArchiveCorruptError, ArchiveSymlinkError } from '../core/errors.js';
import { describeEntry } from './limits.js';

// The zip structures unzipper leaves unchecked, checked here (PKWARE APPNOTE 6.3).

const END_OF_CENTRAL_DIRECTORY = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_END_OF_CENTRAL_DIRECTORY = 0x06064b50;
const CENTRAL_DIRECTORY_RECORD = 0x02014b50;
const LOCAL_FILE_HEADER = 0x04034b50;
const LOCAL_HEADER_BYTES = 30;
const MIN_CENTRAL_RECORD_BYTES = 46;
/** unzipper looks for the end record only this far from the end; so do we, to agree on which one. */
const END_SEARCH_BYTES = 80;
const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;
const STORED = 0;
const DEFLATED = 8;
const ENCRYPTED_FLAG = 0x1;

/** A central directory record that passed `checkRecord`. */
export interface ZipRecord {
  /** Without the trailing '/' that marks a directory. */
  readonly path: string;
  readonly isDirectory: boolean;
  readonly size: number;
  readonly compressedSize: number;
  readonly crc32: number;
  readonly method: typeof STORED | typeof DEFLATED;
  readonly localHeaderOffset: number;
}

function corrupt(location: string, why: string): ArchiveCorruptError {
  return new ArchiveCorruptError(`${location}: ${why}`);
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  const { bytesRead } = await handle.read(buffer, 0, length, position);
  return buffer.subarray(0, bytesRead);
}

/**
 * The entry count the end record declares. unzipper allocates and walks that many records
 * before we see any of them, so a forged count (zip64 allows 2^64) must be refused first.
 */
export async function declaredEntryCount(handle: FileHandle, size: number, location: string): Promise<number> {
  const tailStart = Math.max(0, size - END_SEARCH_BYTES);
  const tail = await readAt(handle, tailStart, size - tailStart);
  const signature = Buffer.alloc(4);
  signature.writeUInt32LE(END_OF_CENTRAL_DIRECTORY);
  const at = tail.indexOf(signature);
  if (at === -1 || tail.length - at < 22) {
    throw corrupt(location, 'has no end of central directory record: not a zip archive, or truncated');
  }
  const count = tail.readUInt16LE(at + 10);
  const isZip64 = tail.readUInt16LE(at + 4) === 0xffff || count === 0xffff || tail.readUInt32LE(at + 16) === 0xffffffff;
  const declared = isZip64 ? await zip64EntryCount(handle, size, tailStart + at, location) : BigInt(count);
  if (declared * BigInt(MIN_CENTRAL_RECORD_BYTES) > BigInt(size)) {
    throw corrupt(location, `declares ${declared} entries, more than its ${size} bytes can hold`);
  }
  return Number(declared);
}

async function zip64EntryCount(
  handle: FileHandle,
  size: number,
  endRecordAt: number,
  location: string,
): Promise<bigint> {
  const locatorAt = endRecordAt - 20;
  const locator = locatorAt >= 0 ? await readAt(handle, locatorAt, 20) : Buffer.alloc(0);
  if (locator.length < 20 || locator.readUInt32LE(0) !== ZIP64_LOCATOR) {
    throw corrupt(location, 'has a zip64 end record without its locator');
  }
  const recordAt = locator.readBigUInt64LE(8);
  const record = recordAt <= BigInt(size) ? await readAt(handle, Number(recordAt), 56) : Buffer.alloc(0);
  if (record.length < 56 || record.readUInt32LE(0) !== ZIP64_END_OF_CENTRAL_DIRECTORY) {
    throw corrupt(location, 'has a damaged zip64 end of central directory record');
  }
  return record.readBigUInt64LE(32);
}

/** Checks what the guards in limits.ts do not: structure, links, encryption, compression. */
export function checkRecord(file: CentralDirectoryRecord, location: string, archiveSize: number): ZipRecord {
  const what = describeEntry(location, file.path);
  if (file.signature !== CENTRAL_DIRECTORY_RECORD) {
    throw corrupt(location, 'has a damaged central directory (a record without its signature)');
  }
  // The high 16 bits hold the Unix mode for archives made on Unix; zero elsewhere.
  if (((file.externalFileAttributes >>> 16) & S_IFMT) === S_IFLNK) {
    throw new ArchiveSymlinkError(`${what} is a symbolic link`);
  }
  const numbers = [file.uncompressedSize, file.compressedSize, file.offsetToLocalFileHeader];
  if (!numbers.every((value) => Number.isSafeInteger(value) && value >= 0)) {
    throw new ArchiveCorruptError(`${what} has unreadable sizes or offset`);
  }
  const isDirectory = file.path.endsWith('/');
  if (!isDirectory) {
    if ((file.flags & ENCRYPTED_FLAG) !== 0) throw new ArchiveCorruptError(`${what} is encrypted`);
    if (file.compressionMethod !== STORED && file.compressionMethod !== DEFLATED) {
      throw new ArchiveCorruptError(
        `${what} uses compression method ${file.compressionMethod}; only stored and deflated are read`,
      );
    }
    if (file.offsetToLocalFileHeader + LOCAL_HEADER_BYTES + file.compressedSize > archiveSize) {
      throw new ArchiveCorruptError(`${what} extends past the end of the archive (truncated?)`);
    }
  }
  return {
    path: isDirectory ? file.path.slice(0, -1) : file.path,
    isDirectory,
    size: file.uncompressedSize,
    compressedSize: file.compressedSize,
    crc32: file.crc32,
    method: file.compressionMethod === DEFLATED ? DEFLATED : STORED,
    localHeaderOffset: file.offsetToLocalFileHeader,
  };
}

/** Where `record`'s data starts: its local header repeats the name and has its own extra field. */
export async function dataOffset(handle: FileHandle, record: ZipRecord, location: string): Promise<number> {
  const header = await readAt(handle, record.localHeaderOffset, LOCAL_HEADER_BYTES);
  if (header.length < LOCAL_HEADER_BYTES || header.readUInt32LE(0) !== LOCAL_FILE_HEADER) {
    throw new ArchiveCorruptError(
      `${describeEntry(location, record.path)} has no local file header where the directory says`,
    );
  }
  return record.localHeaderOffset + LOCAL_HEADER_BYTES + header.readUInt16LE(26) + header.readUInt16LE(28);
}
