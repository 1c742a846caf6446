import { createHash } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { readTritonSource, VERSION_FOLDER } from '../archive/triton-folder.js';
import type { VersionPolicy } from '../config/model-policy.js';
import { BatchserveError, InputFileError, ModelLoadError } from '../core/errors.js';
import { checkModelName } from '../core/model-name.js';

/**
 * Triton's model repository, served as it is: `<repository>/<model>/config.pbtxt` (or none:
 * auto-complete from the model) and numbered version folders `<model>/<n>/model.onnx`. A version
 * folder takes the place of an archive: its path is what the catalog offers and the loader opens.
 */

/** One version of a Triton model, as the repository offers it. */
export interface TritonVersion {
  readonly path: string;
  readonly name: string;
  readonly version: string;
  /** Changes when the model's config or this version's model file does: poll reloads it then. */
  readonly fingerprint: string;
}

export interface TritonModelFolder {
  readonly name: string;
  readonly dir: string;
  readonly versions: readonly TritonVersion[];
  /** Set when the config cannot be read or asks what batchserve cannot do: no version loads. */
  readonly error?: BatchserveError;
  readonly versionPolicy: VersionPolicy;
}

/** Whether `path` is a version folder of a Triton model: a numbered folder without an archive's MAR-INF. */
export async function isTritonVersionFolder(path: string): Promise<boolean> {
  if (!VERSION_FOLDER.test(basename(path))) return false;
  const [folder, marInf] = await Promise.all([
    stat(path).catch(() => undefined),
    stat(join(path, 'MAR-INF')).catch(() => undefined),
  ]);
  return folder?.isDirectory() === true && marInf === undefined;
}

/** Every model folder of a repository, by name; hidden folders and plain files are skipped, as Triton does. */
export async function readTritonRepository(repository: string): Promise<TritonModelFolder[]> {
  const entries = await readdir(repository, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    throw new InputFileError(`model repository ${repository}: cannot open it (${error.code ?? error.message})`, {
      cause: error,
    });
  });
  const folders: TritonModelFolder[] = [];
  for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (entry.name.startsWith('.')) continue;
    const dir = join(repository, entry.name);
    if (!(await stat(dir).catch(() => undefined))?.isDirectory()) continue;
    folders.push(await readTritonModelFolder(dir));
  }
  return folders;
}

/** A model folder's versions and policy; a config that fails is kept as the folder's error. */
export async function readTritonModelFolder(dir: string): Promise<TritonModelFolder> {
  const name = basename(dir);
  const versions: TritonVersion[] = [];
  let source: Awaited<ReturnType<typeof readTritonSource>>;
  try {
    checkModelName(name, `model folder ${dir}`);
    source = await readTritonSource(dir);
  } catch (error) {
    if (!(error instanceof BatchserveError)) throw error;
    return { name, dir, versions, error, versionPolicy: {} };
  }
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    if (!entry.isDirectory() || !VERSION_FOLDER.test(entry.name)) continue;
    const path = join(dir, entry.name);
    const model = await stat(join(path, source.translation.modelFilename)).catch(() => undefined);
    const fingerprint = createHash('sha256')
      .update(source.text)
      .update(model ? `${model.size}:${model.mtimeMs}` : '-')
      .digest('hex');
    versions.push({ path, name, version: String(Number(entry.name)), fingerprint });
  }
  return { name, dir, versions, versionPolicy: source.translation.versionPolicy };
}

/** The identity of a version folder, as readArchiveIdentity gives an archive's. */
export async function readTritonVersion(path: string): Promise<TritonVersion> {
  const folder = await readTritonModelFolder(dirname(path));
  if (folder.error) throw folder.error;
  const found = folder.versions.find((version) => version.path === path);
  if (!found) throw new ModelLoadError(`${path} is not a version folder of Triton model ${folder.name}`);
  return found;
}
