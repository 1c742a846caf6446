import { configFileReferences } from '../config/file-references.js';
import { modelConfigFromText } from '../config/load.js';
import type { ModelConfig } from '../config/model-config.js';
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import {
  ArchiveCorruptError,
  ArchiveIntegrityError,
  ArchiveManifestError,
  ArchiveMissingFileError,
  ArchiveUnsafePathError,
} from '../core/errors.js';
import { quoted } from '../core/quote.js';
import { entryNameProblem } from '../core/entry-name.js';
import { describeEntry } from './limits.js';
import { MANIFEST_PATH, parseManifest, type ArchiveManifest } from './manifest.js';
import type { ArchiveSource } from './source.js';

// Every reader (inspect, verify, unpack, serve, register, bench, predict) opens an archive
// through readArchiveContents: one set of checks, in one order, before any model byte is read.

export interface ArchiveContents {
  readonly manifest: ArchiveManifest;
  readonly config: ModelConfig;
}

/** One file's standing against the manifest. */
export interface FileCheck {
  path: string;
  expectedSha256?: string;
  actualSha256?: string;
  expectedSize?: number;
  actualSize?: number;
  /**
   * `unlisted`: in the archive but not in the manifest, so someone added it after packing;
   * `corrupt`: the bytes match the manifest but not the zip's own CRC-32.
   */
  status: 'ok' | 'mismatch' | 'missing' | 'unlisted' | 'corrupt';
}

/**
 * The manifest, the archive's listing held against it, and the validated config with every
 * file it names checked. Throws at the first problem; reads no file but the manifest and the
 * config.
 */
export async function readArchiveContents(source: ArchiveSource): Promise<ArchiveContents> {
  const manifest = await readManifest(source);
  requireListed(source, listingChecks(source, manifest));
  return { manifest, config: await readArchiveConfig(source, manifest) };
}

/** The config the manifest names, validated as serve validates it, and the files it names. */
export async function readArchiveConfig(source: ArchiveSource, manifest: ArchiveManifest): Promise<ModelConfig> {
  const configPath = manifest.model.configFile;
  const where = `${source.location}!${configPath}`;
  const config = modelConfigFromText((await readListedFile(source, manifest, configPath)).toString('utf8'), where);
  for (const { key, path } of configFileReferences(config)) {
    const problem = entryNameProblem(path);
    if (problem !== undefined) throw new ArchiveUnsafePathError(`${where}: ${key} ${quoted(path)} ${problem}`);
    if (source.entry(path) === undefined) {
      throw new ArchiveMissingFileError(`${where}: ${key} names ${quoted(path)}, which the archive does not hold`);
    }
  }
  return config;
}

/**
 * The files the manifest lists that the archive lacks (`missing`) and the entries it holds
 * that the manifest does not list (`unlisted`); empty when the two agree.
 */
export function listingChecks(source: ArchiveSource, manifest: ArchiveManifest): FileCheck[] {
  const checks: FileCheck[] = [];
  const listed = new Set<string>([MANIFEST_PATH]);
  for (const file of manifest.files) {
    listed.add(file.path);
    if (source.entry(file.path) === undefined) {
      checks.push({ path: file.path, expectedSha256: file.sha256, expectedSize: file.size, status: 'missing' });
    }
  }
  for (const entry of source.entries) {
    if (!listed.has(entry.path)) checks.push({ path: entry.path, actualSize: entry.size, status: 'unlisted' });
  }
  return checks;
}

function requireListed(source: ArchiveSource, checks: readonly FileCheck[]): void {
  const [first] = checks;
  if (first === undefined) return;
  const what = describeEntry(source.location, first.path);
  if (first.status === 'missing') {
    throw new ArchiveMissingFileError(`${what} is listed in ${MANIFEST_PATH} but missing`);
  }
  throw new ArchiveIntegrityError(`${what} is not listed in ${MANIFEST_PATH}`);
}

/** Manifests are a few KiB; this bounds what a hostile one can make us buffer. */
const MAX_MANIFEST_BYTES = 16 * 1024 ** 2;

/** The parsed manifest of an opened archive; ArchiveManifestError when absent or invalid. */
export async function readManifest(source: ArchiveSource): Promise<ArchiveManifest> {
  const entry = source.entry(MANIFEST_PATH);
  if (entry === undefined) throw new ArchiveManifestError(`${source.location}: has no ${MANIFEST_PATH}`);
  if (entry.size > MAX_MANIFEST_BYTES) {
    throw new ArchiveManifestError(
      `${source.location}: ${MANIFEST_PATH} is ${entry.size} bytes, over ${MAX_MANIFEST_BYTES}`,
    );
  }
  return parseManifest((await source.readFile(MANIFEST_PATH)).toString('utf8'), source.location);
}

/**
 * A file the manifest lists, read whole and held to it (sha256 and size, then the zip CRC-32):
 * what a reader parses before the rest is hashed must be the bytes that were packed.
 */
export async function readListedFile(source: ArchiveSource, manifest: ArchiveManifest, path: string): Promise<Buffer> {
  const listed = manifest.files.find((file) => file.path === path);
  const entry = source.entry(path);
  if (listed === undefined || entry === undefined) return requireEntry(source, path);
  const chunks: Buffer[] = [];
  for await (const chunk of source.openStream(path, { checkCrc: false })) chunks.push(chunk as Buffer);
  const bytes = Buffer.concat(chunks);
  const what = describeEntry(source.location, path);
  if (bytes.length !== listed.size || createHash('sha256').update(bytes).digest('hex') !== listed.sha256) {
    throw new ArchiveIntegrityError(`${what} does not match ${MANIFEST_PATH}`);
  }
  if (entry.crc32 !== undefined && crc32(bytes) !== entry.crc32) {
    throw new ArchiveCorruptError(`${what} fails its CRC-32 check`);
  }
  return bytes;
}

export async function requireEntry(source: ArchiveSource, path: string): Promise<Buffer> {
  if (!source.entry(path)) throw new ArchiveMissingFileError(`${source.location}: ${path} is missing`);
  return source.readFile(path);
}
