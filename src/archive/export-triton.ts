import { mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import type { CompleteModelConfig } from '../config/model-config.js';
import { tritonConfigOf } from '../config/triton-config-view.js';
import { TRITON_CONFIG_FILE, TRITON_DEFAULT_MODEL_FILE, writeTritonConfig } from '../config/triton-model-config.js';
import { isModelStep } from '../config/pipeline-config.js';
import { OutputExistsError, UsageError } from '../core/errors.js';
import { readArchiveContents, readListedFile } from './read.js';
import { openArchive } from './source.js';

export interface TritonExportOptions {
  /** A batchserve archive (.mar or archive folder). */
  readonly archive: string;
  /** The repository the model folder is written into. */
  readonly exportPath: string;
  readonly force?: boolean;
}

export interface TritonExportResult {
  /** `<exportPath>/<model>`. */
  readonly modelDir: string;
  readonly version: string;
  /** What Triton will serve otherwise than batchserve did, one sentence each. */
  readonly differences: readonly string[];
}

/**
 * Writes an archive as a Triton model folder, the way back from `import`: `config.pbtxt`
 * (tritonConfigOf, the same view /v2/models/{m}/config answers), the served model file as
 * `<version>/model.onnx`, and the labels file. A pipeline with function steps has no Triton
 * equivalent (its code would be a Python model) and is refused.
 */
export async function exportTritonModel(options: TritonExportOptions): Promise<TritonExportResult> {
  const source = await openArchive(options.archive);
  try {
    const { manifest, config: stored } = await readArchiveContents(source);
    const config = stored as CompleteModelConfig;
    const name = manifest.model.modelName;
    const differences: string[] = [];
    const functions = config.pipeline?.steps.filter((step) => !isModelStep(step)) ?? [];
    if (functions.length > 0) {
      throw new UsageError(
        `${options.archive}: pipeline step ${functions.map((step) => `"${step.name}"`).join(', ')} runs a function, which a Triton ensemble cannot (it would be a Python model); only pipelines of model steps export`,
      );
    }
    let version = manifest.model.modelVersion;
    if (!/^[0-9]+$/.test(version)) {
      differences.push(
        `version "${version}" is not a number, which Triton's version folders are: written as version 1`,
      );
      version = '1';
    }
    if (!config.pipeline && manifest.model.handler !== 'tensor') {
      differences.push(
        `the ${manifest.model.handler} handler is not carried: Triton serves the model's tensors as they are`,
      );
    }
    if (config.dynamic_batching.max_queue_delay === 'auto') {
      differences.push('max_queue_delay auto has no Triton equivalent: written as max_queue_delay_microseconds 0');
    }
    const view = tritonConfigOf(config, { name, modelFilename: TRITON_DEFAULT_MODEL_FILE });
    const modelDir = join(options.exportPath, name);
    if ((await stat(modelDir).catch(() => undefined)) && !options.force) {
      throw new OutputExistsError(`${modelDir} already exists; pass --force to replace it`);
    }
    const partial = join(options.exportPath, `.${name}.partial-${randomBytes(4).toString('hex')}`);
    try {
      await mkdir(join(partial, version), { recursive: true });
      await writeFile(join(partial, TRITON_CONFIG_FILE), writeTritonConfig(view));
      if (!config.pipeline) {
        const model = await readListedFile(source, manifest, manifest.model.serializedFile);
        await writeFile(join(partial, version, TRITON_DEFAULT_MODEL_FILE), model);
      }
      if (config.labels_file !== undefined) {
        const target = join(partial, config.labels_file);
        await mkdir(dirname(target), { recursive: true });
        await writeFile(target, await readListedFile(source, manifest, config.labels_file));
      }
      if (options.force) await rm(modelDir, { recursive: true, force: true });
      await rename(partial, modelDir);
    } catch (error) {
      await rm(partial, { recursive: true, force: true });
      throw error;
    }
    return { modelDir, version, differences };
  } finally {
    await source.close();
  }
}
