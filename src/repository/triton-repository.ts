import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ARCHIVE_FORMAT_VERSION, PIPELINE_HANDLER, type ArchiveManifest } from '../archive/manifest.js';
import { validateModelConfig, type ModelConfig } from '../config/model-config.js';
import type { VersionPolicy } from '../config/model-policy.js';
import type { TextMessage } from '../config/text-format.js';
import {
  parseTritonConfig,
  translateTritonConfig,
  TRITON_CONFIG_FILE,
  TRITON_DEFAULT_MAX_BATCH_SIZE,
  type TritonTranslation,
} from '../config/triton-model-config.js';
import { pathInside } from '../core/entry-name.js';
import { BatchserveError, InputFileError, ModelLoadError } from '../core/errors.js';
import { checkModelName } from '../core/model-name.js';
import { readModelSignature } from '../runtime/session.js';
import { BATCHSERVE_VERSION } from '../version.js';

/**
 * Triton's model repository, served as it is: `<repository>/<model>/config.pbtxt` (or none:
 * auto-complete from the model) and numbered version folders `<model>/<n>/model.onnx`. A version
 * folder takes the place of an archive: its path is what the catalog offers and the loader opens.
 */

/** A numbered version folder; Triton ignores folders named otherwise (and so does this). */
const VERSION_FOLDER = /^[0-9]+$/;

/** What a Triton model's config says beyond model-config.yaml, kept with each loaded version. */
export interface TritonSource {
  /** The config.pbtxt as written ({} when the folder has none). */
  readonly config: TextMessage;
  readonly versionPolicy: VersionPolicy;
  readonly modelFilename: string;
}

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

async function readTritonSource(
  dir: string,
): Promise<{ text: string; config: TextMessage; translation: TritonTranslation }> {
  const configPath = join(dir, TRITON_CONFIG_FILE);
  const text = await readFile(configPath, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return '';
    throw new InputFileError(`cannot read ${configPath}: ${error.code ?? error.message}`, { cause: error });
  });
  const config = parseTritonConfig(text, configPath);
  return { text, config, translation: translateTritonConfig(config, basename(dir), configPath) };
}

/** The identity of a version folder, as readArchiveIdentity gives an archive's. */
export async function readTritonVersion(path: string): Promise<TritonVersion> {
  const folder = await readTritonModelFolder(dirname(path));
  if (folder.error) throw folder.error;
  const found = folder.versions.find((version) => version.path === path);
  if (!found) throw new ModelLoadError(`${path} is not a version folder of Triton model ${folder.name}`);
  return found;
}

/** A Triton version opened for loading: what an extracted archive gives the loader. */
export interface OpenedTritonVersion {
  /** The model folder: config.pbtxt, labels and version folders, served in place. */
  readonly modelDir: string;
  readonly manifest: ArchiveManifest;
  readonly config: ModelConfig;
  readonly configSource: string;
  readonly triton: TritonSource;
}

/**
 * A version folder as the loader opens an archive: the config.pbtxt mapped onto
 * model-config.yaml and validated, a manifest saying where the model file is, and with no
 * tensors in the config Triton's auto-complete (max_batch_size 4 when the model batches).
 */
export async function openTritonVersion(path: string): Promise<OpenedTritonVersion> {
  const modelDir = dirname(path);
  const name = basename(modelDir);
  const version = String(Number(basename(path)));
  const { config: triton, translation } = await readTritonSource(modelDir);
  const configSource = join(modelDir, TRITON_CONFIG_FILE);
  const pipeline = translation.config.pipeline !== undefined;
  const serializedFile = pipeline ? TRITON_CONFIG_FILE : `${basename(path)}/${translation.modelFilename}`;
  const raw = { ...translation.config };
  if (translation.autoComplete) {
    const modelPath = pathInside(modelDir, serializedFile, 'the model file');
    const signature = await readModelSignature(modelPath, `${modelDir}!${serializedFile}`);
    const batches = [...signature.inputs, ...signature.outputs].every((spec) => spec.shape[0] === -1);
    raw.max_batch_size = batches ? TRITON_DEFAULT_MAX_BATCH_SIZE : 0;
  }
  const config = validateModelConfig(raw, configSource);
  const manifest: ArchiveManifest = {
    createdOn: new Date((await stat(path)).mtimeMs).toISOString(),
    runtime: 'onnxruntime',
    model: {
      modelName: name,
      serializedFile,
      handler: pipeline ? PIPELINE_HANDLER : 'tensor',
      modelVersion: version,
      configFile: TRITON_CONFIG_FILE,
    },
    archiverVersion: BATCHSERVE_VERSION,
    formatVersion: ARCHIVE_FORMAT_VERSION,
    // The folder is served as it is: nothing was packed, so nothing is hashed against a list.
    files: [],
  };
  return {
    modelDir,
    manifest,
    config,
    configSource,
    triton: { config: triton, versionPolicy: translation.versionPolicy, modelFilename: translation.modelFilename },
  };
}
