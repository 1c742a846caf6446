import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
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
import { InputFileError } from '../core/errors.js';
import { readGraphSignature } from '../runtime/session.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { ARCHIVE_FORMAT_VERSION, PIPELINE_HANDLER, type ArchiveManifest } from './manifest.js';

/**
 * One version of a Triton model folder (`<model>/config.pbtxt`, `<model>/<n>/model.onnx`) read
 * as an archive is read: a manifest and a validated model-config. The server loads it in place
 * (repository/triton-repository.ts) and `model-archive import` packs it: one reading for both.
 */

/** A numbered version folder; Triton ignores folders named otherwise (and so does this). */
export const VERSION_FOLDER = /^[0-9]+$/;

/** What a Triton model's config says beyond model-config.yaml, kept with each loaded version. */
export interface TritonSource {
  /** The config.pbtxt as written ({} when the folder has none). */
  readonly config: TextMessage;
  readonly versionPolicy: VersionPolicy;
  readonly modelFilename: string;
}

export async function readTritonSource(
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

/**
 * Triton's auto-complete of max_batch_size for a config that gives no tensors: 4 when every
 * input and output of the model has a variable first dimension, else 0.
 */
export async function autoCompleteMaxBatchSize(modelPath: string, source: string): Promise<number> {
  const signature = await readGraphSignature(modelPath, source);
  const batches = [...signature.inputs, ...signature.outputs].every((spec) => spec.shape[0] === -1);
  return batches ? TRITON_DEFAULT_MAX_BATCH_SIZE : 0;
}

/** A Triton version opened for loading: what an extracted archive gives the loader. */
export interface OpenedTritonVersion {
  /** The model folder: config.pbtxt, labels and version folders, served in place. */
  readonly modelDir: string;
  readonly manifest: ArchiveManifest;
  readonly config: ModelConfig;
  readonly configSource: string;
  readonly triton: TritonSource;
  /** What is served otherwise than Triton would serve it, one sentence each. */
  readonly differences: readonly string[];
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
    raw.max_batch_size = await autoCompleteMaxBatchSize(modelPath, `${modelDir}!${serializedFile}`);
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
    differences: translation.differences,
  };
}
