import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { lstat, mkdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import {
  ArchiveCorruptError,
  ArchiveDuplicateEntryError,
  ArchiveIntegrityError,
  ArchiveUnsafePathError,
  OutputExistsError,
} from '../core/errors.js';
import { describeEntry, type ArchiveLimits } from './limits.js';
import { MANIFEST_PATH, type ManifestFile } from './manifest.js';
import { openArchive, type ArchiveEntry, type ArchiveSource } from './source.js';
import { readArchiveContents } from './read.js';
import { digestStatus, Sha256Tap } from './verify.js';

export interface UnpackOptions {
  /** Replace an existing `targetDir`, once the new extraction has fully succeeded. */
  force?: boolean;
  limits?: Partial<ArchiveLimits>;
}

export interface UnpackResult {
  targetDir: string;
  files: number;
  bytes: number;
}

/**
 * Extracts a .mar into `targetDir` so that either all of it arrives, checked, or nothing
 * does: entries go to a hidden sibling directory that is renamed into place at the end and
 * removed on any failure. The archive passes readArchiveContents' checks first (a manifest,
 * the listing against it, the config and the files it names); then every file is hashed on
 * its way to disk and must match the manifest and its CRC-32.
 */
export async function unpackArchive(
  location: string,
  targetDir: string,
  options: UnpackOptions = {},
): Promise<UnpackResult> {
  const target = resolve(targetDir);
  if (!options.force && (await exists(target))) {
    throw new OutputExistsError(`${target} already exists; unpacking never writes into an existing directory`);
  }
  const source = await openArchive(location, options.limits);
  try {
    // Every check that reads no file data, before anything is written: a broken archive fails fast.
    const { manifest } = await readArchiveContents(source);
    const expected = new Map(manifest.files.map((file) => [file.path, file]));
    await mkdir(dirname(target), { recursive: true });
    // Not mkdtemp: its 0o700 would become the target's mode on rename.
    const staging = join(dirname(target), `.${basename(target)}.partial-${randomBytes(6).toString('hex')}`);
    await mkdir(staging);
    try {
      let bytes = 0;
      for (const entry of source.entries) {
        await extractEntry(source, entry, staging, expected.get(entry.path));
        bytes += entry.size;
      }
      await moveIntoPlace(staging, target, options.force === true);
      return { targetDir: target, files: source.entries.length, bytes };
    } catch (error) {
      await rm(staging, { recursive: true, force: true });
      throw error;
    }
  } finally {
    await source.close();
  }
}

/** `expected` is undefined for the manifest itself, which the zip's CRC-32 alone guards. */
async function extractEntry(
  source: ArchiveSource,
  entry: ArchiveEntry,
  staging: string,
  expected: ManifestFile | undefined,
): Promise<void> {
  const { path } = entry;
  const destination = resolve(staging, ...path.split('/'));
  // The name guards already refuse anything that could escape; this holds even if they regress.
  const fromRoot = relative(staging, destination);
  if (fromRoot === '' || fromRoot === '..' || fromRoot.startsWith(`..${sep}`) || isAbsolute(fromRoot)) {
    throw new ArchiveUnsafePathError(`${describeEntry(source.location, path)} resolves outside the target directory`);
  }
  // The name guards bound a name's length; the target folder's own path adds to it, and the
  // sum can still pass what this file system takes (PATH_MAX): a refusal, not a crash.
  const tooLong = (error: NodeJS.ErrnoException): never => {
    if (error.code !== 'ENAMETOOLONG') throw error;
    throw new ArchiveUnsafePathError(
      `${describeEntry(source.location, path)} is too long a path for this file system under ${dirname(staging)}`,
      { cause: error },
    );
  };
  await mkdir(dirname(destination), { recursive: true }).catch(tooLong);
  const tap = new Sha256Tap();
  // 'wx': two names that reach one file (a case-insensitive disk the guards missed) fail here.
  const file = createWriteStream(destination, { flags: 'wx', mode: 0o644 });
  await pipeline(source.openStream(path, { checkCrc: expected === undefined }), tap, file).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') tooLong(error);
      throw new ArchiveDuplicateEntryError(
        `${describeEntry(source.location, path)} collides with another entry on this disk`,
        {
          cause: error,
        },
      );
    },
  );
  if (expected === undefined) return;
  const actual = tap.digest();
  const status = digestStatus(entry, expected, actual);
  if (status === 'mismatch') {
    throw new ArchiveIntegrityError(
      `${describeEntry(source.location, path)} does not match ${MANIFEST_PATH}: ` +
        `sha256 ${actual.sha256} (${actual.size} bytes), expected ${expected.sha256} (${expected.size} bytes)`,
    );
  }
  if (status === 'corrupt') {
    throw new ArchiveCorruptError(`${describeEntry(source.location, path)} fails its CRC-32 check`);
  }
}

/** With `force`, the old target is moved aside first and restored if the swap fails. */
async function moveIntoPlace(staging: string, target: string, force: boolean): Promise<void> {
  if (!force || !(await exists(target))) {
    await rename(staging, target);
    return;
  }
  const previous = `${staging}.previous`;
  await rename(target, previous);
  try {
    await rename(staging, target);
  } catch (error) {
    await rename(previous, target);
    throw error;
  }
  await rm(previous, { recursive: true, force: true });
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return false;
      throw error;
    },
  );
}
