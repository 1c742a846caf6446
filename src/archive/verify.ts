import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import type { ArchiveLimits } from './limits.js';
import { MANIFEST_PATH, type ArchiveManifest } from './manifest.js';
import { readManifest } from './read.js';
import { openArchive } from './source.js';

export interface FileCheck {
  path: string;
  expectedSha256?: string;
  actualSha256?: string;
  expectedSize?: number;
  actualSize?: number;
  /** `unlisted`: in the archive but not in the manifest, so someone added it after packing. */
  status: 'ok' | 'mismatch' | 'missing' | 'unlisted';
}

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
}

/** Hashes the bytes that flow through it, for pipelines that also write them somewhere. */
export class Sha256Tap extends Transform {
  readonly #hash = createHash('sha256');
  #size = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.#hash.update(chunk);
    this.#size += chunk.length;
    callback(null, chunk);
  }

  /** Call once, after the pipeline finished. */
  digest(): FileDigest {
    return { sha256: this.#hash.digest('hex'), size: this.#size };
  }
}

/** sha256 and length of a stream, without holding more than one chunk of it. */
export async function sha256OfStream(stream: NodeJS.ReadableStream): Promise<FileDigest> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    hash.update(bytes);
    size += bytes.length;
  }
  return { sha256: hash.digest('hex'), size };
}

/**
 * Recomputes every file's sha256 and size against the manifest. Mismatches are reported,
 * not thrown; a missing or invalid manifest and structural damage are thrown.
 */
export async function verifyArchive(
  location: string,
  options: { limits?: Partial<ArchiveLimits> } = {},
): Promise<VerifyReport> {
  const source = await openArchive(location, options.limits);
  try {
    const manifest = await readManifest(source);
    const files: FileCheck[] = [];
    const listed = new Set<string>([MANIFEST_PATH]);
    for (const expected of manifest.files) {
      listed.add(expected.path);
      const check = { path: expected.path, expectedSha256: expected.sha256, expectedSize: expected.size };
      if (source.entry(expected.path) === undefined) {
        files.push({ ...check, status: 'missing' });
        continue;
      }
      const actual = await sha256OfStream(source.openStream(expected.path, { checkCrc: false }));
      const matches = actual.sha256 === expected.sha256 && actual.size === expected.size;
      files.push({
        ...check,
        actualSha256: actual.sha256,
        actualSize: actual.size,
        status: matches ? 'ok' : 'mismatch',
      });
    }
    for (const entry of source.entries) {
      if (!listed.has(entry.path)) files.push({ path: entry.path, actualSize: entry.size, status: 'unlisted' });
    }
    return { location, manifest, files, ok: files.every((file) => file.status === 'ok') };
  } finally {
    await source.close();
  }
}
