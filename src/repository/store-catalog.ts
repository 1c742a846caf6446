import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { readManifest } from '../archive/read.js';
import { openArchive } from '../archive/source.js';
import { BatchserveError, ModelLoadError } from '../core/errors.js';
import { compareVersions } from './version-policy.js';

/** An archive known by its manifest, without loading it. */
export interface ArchiveIdentity {
  readonly path: string;
  readonly name: string;
  readonly version: string;
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

/** Every archive in a model store (`.mar` files and archive folders) by its manifest. */
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

async function listStoreArchives(store: string): Promise<string[]> {
  const entries = await readdir(store, { withFileTypes: true });
  const archives: string[] = [];
  for (const entry of entries) {
    if (entry.isFile() && entry.name.endsWith('.mar')) archives.push(join(store, entry.name));
    if (entry.isDirectory() && (await stat(join(store, entry.name, 'MAR-INF')).catch(() => undefined))) {
      archives.push(join(store, entry.name));
    }
  }
  return archives.sort();
}
