import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import ort from 'onnxruntime-node';
import { unpackArchive } from '../archive/extract.js';
import { readArchiveContents } from '../archive/read.js';
import { openArchive } from '../archive/source.js';
import type { CompleteModelConfig } from '../config/model-config.js';
import { reconcileWithModel } from '../config/reconcile.js';
import { ModelLoadError } from '../errors.js';
import { isBuiltinHandler, loadHandler } from '../handlers/load.js';
import { createHandlerContext } from '../handlers/pipeline.js';
import type { Handler } from '../handlers/types.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import { allocateTensorData, ortTypeOf } from '../runtime/datatypes.js';
import { ModelInstance } from '../runtime/model-instance.js';
import { createSession, readSignature } from '../runtime/session.js';
import type { TensorMap } from '../runtime/tensors.js';
import { LoadedModel } from './loaded-model.js';

export interface LoadOptions {
  /** Where archives are extracted while served. */
  readonly workRoot: string;
  readonly metrics: ServerMetrics;
  /** Overrides every instance group's device (`serve --device`). */
  readonly device?: string;
  /** Overrides the archive's version (e.g. `name=path.mar` registered as a given version). */
  readonly version?: string;
}

/**
 * Extracts an archive (verifying every hash on the way), opens its instances, checks the
 * config against the real model, imports the handler and warms up every preferred batch
 * size. Only a model that passed all of this is returned; on failure nothing is left behind.
 */
export async function loadModelArchive(archivePath: string, options: LoadOptions): Promise<LoadedModel> {
  const started = process.hrtime.bigint();
  const workDir = await mkdtemp(join(options.workRoot, `${basename(archivePath).replace(/[^\w.-]/g, '_')}-`));
  const instances: ModelInstance[] = [];
  try {
    const modelDir = join(workDir, 'model');
    await unpackArchive(archivePath, modelDir);
    const source = await openArchive(modelDir);
    const { manifest, config: storedConfig } = await readArchiveContents(source).finally(() => source.close());
    const modelPath = join(modelDir, manifest.model.serializedFile);
    const configSource = `${archivePath}!${manifest.model.configFile}`;
    const labels = storedConfig.labels_file
      ? (await readFile(join(modelDir, storedConfig.labels_file), 'utf8')).split(/\r?\n/).filter((line) => line !== '')
      : undefined;
    const handler: Handler = await loadHandler(
      isBuiltinHandler(manifest.model.handler) ? manifest.model.handler : join(modelDir, manifest.model.handler),
    );
    const devices = storedConfig.instances.flatMap((group) =>
      Array.from({ length: group.count }, () => options.device ?? group.device),
    );
    const name = manifest.model.modelName;
    const version = options.version ?? manifest.model.modelVersion;
    let config: CompleteModelConfig | undefined;

    const createInstance = async (index: number): Promise<ModelInstance> => {
      const device = devices[index] ?? devices[0] ?? 'cpu';
      const session = await createSession(modelPath, { runtime: storedConfig.runtime, device }, configSource);
      config ??= reconcileWithModel(storedConfig, readSignature(session, modelPath), configSource);
      const context = createHandlerContext({
        modelName: name,
        modelVersion: version,
        config,
        session,
        ...(labels ? { labels } : {}),
      });
      await handler.initialize?.(context);
      if (config.warmup) await warmUp(session, config);
      return new ModelInstance(`${name}:${version}:${index}`, device, session, handler, context);
    };
    for (let index = 0; index < devices.length; index++) instances.push(await createInstance(index));

    return new LoadedModel({
      name,
      version,
      archivePath,
      manifest,
      config: config as CompleteModelConfig,
      labels,
      instances,
      createInstance,
      workDir,
      loadSeconds: Number(process.hrtime.bigint() - started) / 1e9,
      metrics: options.metrics,
    });
  } catch (error) {
    await Promise.all(instances.map((instance) => instance.release()));
    await rm(workDir, { recursive: true, force: true });
    if (error instanceof Error && 'code' in error && String(error.code).startsWith('BS_ERR_')) throw error;
    throw new ModelLoadError(`cannot load ${archivePath}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

/**
 * A forward pass at batch size 1 and every preferred size, on zeros, so the first real
 * requests don't pay for lazy initialization (much larger on GPUs).
 */
async function warmUp(session: ort.InferenceSession, config: CompleteModelConfig): Promise<void> {
  const sizes = config.max_batch_size > 0 ? [...new Set([1, ...config.dynamic_batching.preferred_batch_sizes])] : [0];
  for (const size of sizes) {
    const feeds: TensorMap = {};
    for (const input of config.inputs) {
      const dims = input.shape.map((dim, axis) => (axis === 0 && size > 0 ? size : dim === -1 ? 1 : dim));
      const type = ortTypeOf(input.datatype);
      const length = dims.reduce((a, b) => a * b, 1);
      feeds[input.name] = zeros(type, length, dims);
    }
    await session.run(feeds);
  }
}

function zeros(type: ort.Tensor.Type, length: number, dims: number[]): ort.Tensor {
  return new ort.Tensor(type, allocateTensorData(type, length), dims);
}
