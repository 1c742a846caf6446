import { constants } from 'node:fs';
import { access, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { readManifest } from '../archive/read.js';
import { openArchive } from '../archive/source.js';
import { BatchserveError, InputFileError, ModelLoadError, ModelStoreReadOnlyError } from '../core/errors.js';
import { compareVersions } from './version-policy.js';
import { isTritonVersionFolder, readTritonVersion } from './triton-repository.js';

/** An archive known by its manifest (or a Triton version folder by its place), without loading it. */
export interface ArchiveIdentity {
  readonly path: string;
  readonly name: string;
  readonly version: string;
  /** A Triton version's: changes with its config or model file. */
  readonly fingerprint?: string;
}

export interface StoreCatalog {
  /** By name, then version. */
  readonly archives: readonly ArchiveIdentity[];
  /** Archives whose manifest cannot be read; they are not offered. */
  readonly unreadable: readonly { readonly path: string; readonly error: BatchserveError }[];
}

/**
 * Reads only the listing and the manifest: a few KiB, whatever the model's size. Fails with a
 * BatchserveError only, as loading the archive would.
 */
export async function readArchiveIdentity(path: string): Promise<ArchiveIdentity> {
  if (await isTritonVersionFolder(path)) return readTritonVersion(path);
  try {
    const source = await openArchive(path);
    const manifest = await readManifest(source).finally(() => source.close());
    return { path, name: manifest.model.modelName, version: manifest.model.modelVersion };
  } catch (error) {
    if (error instanceof BatchserveError) throw error;
    const message = error instanceof Error ? error.message : String(error);
    throw new ModelLoadError(`cannot read ${path}: ${message}`, { cause: error });
  }
}

/**
 * Every archive in a model store by its manifest. The store is a folder of archives (`.mar`
 * files and archive folders), or one archive: KServe's storage initializer leaves a
 * storageUri that names one file as that file, and unzips one served as a zip into a folder.
 */
export async function readStoreCatalog(store: string): Promise<StoreCatalog> {
  const archives: ArchiveIdentity[] = [];
  const unreadable: { path: string; error: BatchserveError }[] = [];
  for (const path of await listStoreArchives(store)) {
    try {
      archives.push(await readArchiveIdentity(path));
    } catch (error) {
      unreadable.push({ path, error: error as BatchserveError });
    }
  }
  archives.sort((a, b) => a.name.localeCompare(b.name) || compareVersions(a.version, b.version));
  return { archives, unreadable };
}

/** Whether the store is one archive (a `.mar` file or an archive folder) rather than a folder of them. */
export async function isSingleArchiveStore(store: string): Promise<boolean> {
  const stats = await stat(store).catch(() => undefined);
  return stats !== undefined && (stats.isFile() || (stats.isDirectory() && (await isArchiveFolder(store))));
}

/**
 * Refuses before anything is written into the store: only a writable folder of archives may
 * take a download. A store mounted read-only (KServe mounts /mnt/models so) fails `access`
 * with EROFS even for root.
 */
export async function assertStoreWritable(store: string): Promise<void> {
  if (await isSingleArchiveStore(store)) {
    throw new ModelStoreReadOnlyError(
      `the model store ${store} is one archive, not a folder: nothing is written into it`,
    );
  }
  await access(store, constants.W_OK).catch((error: NodeJS.ErrnoException) => {
    throw new ModelStoreReadOnlyError(
      `the model store ${store} is read-only (${error.code ?? error.message}): nothing is written into it; register archives that are in it by name`,
      { cause: error },
    );
  });
}

async function isArchiveFolder(path: string): Promise<boolean> {
  return (await stat(join(path, 'MAR-INF')).catch(() => undefined))?.isDirectory() ?? false;
}

async function listStoreArchives(store: string): Promise<string[]> {
  const stats = await stat(store).catch((error: NodeJS.ErrnoException) => {
    throw new InputFileError(`model store ${store}: cannot open it (${error.code ?? error.message})`, { cause: error });
  });
  if (stats.isFile() || (await isArchiveFolder(store))) return [store];
  const archives: string[] = [];
  for (const entry of await readdir(store, { withFileTypes: true })) {
    const path = join(store, entry.name);
    // Followed: mounted stores (Kubernetes volumes among them) link their files.
    const target = entry.isSymbolicLink() ? await stat(path).catch(() => undefined) : entry;
    if (target?.isFile() && entry.name.endsWith('.mar')) archives.push(path);
    if (target?.isDirectory() && (await isArchiveFolder(path))) archives.push(path);
  }
  return archives.sort();
}
