import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { crc32 } from 'node:zlib';
import { ArchiveCorruptError, ArchiveIntegrityError, ArchiveMissingFileError } from '../core/errors.js';
import type { ArchiveLimits } from './limits.js';
import type { ArchiveManifest, ManifestFile } from './manifest.js';
import { listingChecks, readArchiveConfig, readManifest, type FileCheck } from './read.js';
import { openArchive, type ArchiveEntry, type ArchiveSource } from './source.js';

export type { FileCheck } from './read.js';

export interface VerifyReport {
  location: string;
  manifest: ArchiveManifest;
  files: FileCheck[];
  /** True only when every file is `ok`. */
  ok: boolean;
}

export interface FileDigest {
  sha256: string;
  size: number;
  crc32: number;
}

/** Hashes the bytes that flow through it, for pipelines that also write them somewhere. */
export class Sha256Tap extends Transform {
  readonly #hash = createHash('sha256');
  #size = 0;
  #crc = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hash.update(chunk);
    this.#crc = crc32(chunk, this.#crc);
    this.#size += chunk.length;
    callback(null, chunk);
  }

  /** Call once, after the pipeline finished. */
  digest(): FileDigest {
    return { sha256: this.#hash.digest('hex'), size: this.#size, crc32: this.#crc };
  }
}

/**
 * An entry's bytes against the manifest first (a tampered file is a `mismatch` whatever its
 * CRC says), then against the zip's own CRC-32 (bytes that match the manifest under a wrong
 * CRC are `corrupt`: another zip reader would refuse them).
 */
export function digestStatus(entry: ArchiveEntry, expected: ManifestFile, actual: FileDigest): FileCheck['status'] {
  if (actual.sha256 !== expected.sha256 || actual.size !== expected.size) return 'mismatch';
  if (entry.crc32 !== undefined && entry.crc32 !== actual.crc32) return 'corrupt';
  return 'ok';
}

/** sha256 and length of a stream, without holding more than one chunk of it. */
export async function sha256OfStream(stream: NodeJS.ReadableStream): Promise<FileDigest> {
  const hash = createHash('sha256');
  let size = 0;
  let crc = 0;
  for await (const chunk of stream) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    hash.update(bytes);
    crc = crc32(bytes, crc);
    size += bytes.length;
  }
  return { sha256: hash.digest('hex'), size, crc32: crc };
}

/** Every file the manifest lists, hashed against it; `missing` where the archive lacks one. */
export async function hashChecks(source: ArchiveSource, manifest: ArchiveManifest): Promise<FileCheck[]> {
  const files: FileCheck[] = [];
  for (const expected of manifest.files) {
    const check = { path: expected.path, expectedSha256: expected.sha256, expectedSize: expected.size };
    const entry = source.entry(expected.path);
    if (entry === undefined) {
      files.push({ ...check, status: 'missing' });
      continue;
    }
    const actual = await sha256OfStream(source.openStream(expected.path, { checkCrc: false }));
    files.push({
      ...check,
      actualSha256: actual.sha256,
      actualSize: actual.size,
      status: digestStatus(entry, expected, actual),
    });
  }
  return files;
}

/**
 * Recomputes every file's sha256, size and CRC-32 against the manifest and the listing; when
 * all match, validates the config as serve will. File problems are reported, not thrown; a
 * missing or invalid manifest or config and structural damage are thrown.
 */
export async function verifyArchive(
  location: string,
  options: { limits?: Partial<ArchiveLimits> } = {},
): Promise<VerifyReport> {
  const source = await openArchive(location, options.limits);
  try {
    const manifest = await readManifest(source);
    const unlisted = listingChecks(source, manifest).filter((check) => check.status === 'unlisted');
    const files = [...(await hashChecks(source, manifest)), ...unlisted];
    const ok = files.every((file) => file.status === 'ok');
    if (ok) await readArchiveConfig(source, manifest);
    return { location, manifest, files, ok };
  } finally {
    await source.close();
  }
}

/**
 * The refusal for files that failed their checks, undefined when none did. Its code is the
 * first failure's, as the reader that stops at it (unpack, serve) reports it: a file missing is
 * BS_ERR_ARCHIVE_MISSING_FILE and a wrong CRC-32 BS_ERR_ARCHIVE_CORRUPT from every command.
 */
export function failedChecksError(location: string, files: readonly FileCheck[]): Error | undefined {
  const bad = files.filter((file) => file.status !== 'ok');
  const [first] = bad;
  if (first === undefined) return undefined;
  const message = `${location}: ${bad.length} of ${files.length} files fail verification (${bad.map((file) => `${file.path}: ${file.status}`).join(', ')})`;
  if (first.status === 'missing') return new ArchiveMissingFileError(message);
  if (first.status === 'corrupt') return new ArchiveCorruptError(message);
  return new ArchiveIntegrityError(message);
}
