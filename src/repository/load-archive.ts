import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Logger } from 'pino';
import { unpackArchive } from '../archive/extract.js';
import { readArchiveContents } from '../archive/read.js';
import { openArchive } from '../archive/source.js';
import { servedModelFile } from '../archive/served-model.js';
import { machineLimitProblems, type CompleteModelConfig, type ModelConfig } from '../config/model-config.js';
import { loadChatTemplate, PLAIN_CHAT, type ChatTemplate } from '../handlers/chat-template.js';
import { loadTokenizer } from '../handlers/text-tokens.js';
import { decoderLayout } from '../runtime/decoder-layout.js';
import { servedGenerationOptions } from '../runtime/generation-options.js';
import { Generator, type GenerationChannel } from '../runtime/generator.js';
import { pathInside } from '../core/entry-name.js';
import { ConfigInvalidError, ModelLoadError } from '../core/errors.js';
import { checkHandlerImport } from '../handlers/handler-probe.js';
import { isBuiltinHandler } from '../handlers/load.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import { generatesText, LocalInstance, type ServingInstance } from '../runtime/local-instance.js';
import { openInstance, type InstanceSpec } from '../runtime/open-instance.js';
import { applyTensorrtOptions } from '../runtime/tensorrt-options.js';
import { WorkerInstance } from '../runtime/worker-instance.js';
import { LoadedModel, type LoadedModelParts } from './loaded-model.js';
import type { ModelLookup } from '../pipeline/model-step.js';
import { openPipeline } from '../pipeline/open-pipeline.js';
import type { ArchiveManifest } from '../archive/manifest.js';
import { isTritonVersionFolder } from './triton-repository.js';
import { openTritonVersion, type TritonSource } from '../archive/triton-folder.js';

export interface LoadOptions {
  /** Where archives are extracted while served. */
  readonly workRoot: string;
  readonly metrics: ServerMetrics;
  /** Where instance restarts are logged. */
  readonly logger?: Logger;
  /** Overrides every instance group's device (`serve --device`). */
  readonly device?: string;
  /** Overrides the archive's version (e.g. `name=path.mar` registered as a given version). */
  readonly version?: string;
  /** Overrides the archive's model name (`serve --model-name`). */
  readonly name?: string;
  /** Finds the loaded models a pipeline's steps name; without it, pipelines do not load. */
  readonly lookup?: ModelLookup;
}

/**
 * Extracts an archive (verifying every hash on the way), opens its instances, checks the
 * config against the real model, imports the handler and warms up every preferred batch
 * size. Only a model that passed all of this is returned; on failure nothing is left behind.
 */
export async function loadModelArchive(archivePath: string, options: LoadOptions): Promise<LoadedModel> {
  const started = process.hrtime.bigint();
  const workDir = await mkdtemp(join(options.workRoot, `${basename(archivePath).replace(/[^\w.-]/g, '_')}-`));
  const instances: ServingInstance[] = [];
  try {
    // A Triton version folder is served in place; an archive is extracted into the work folder.
    const { modelDir, manifest, storedConfig, configSource, triton, differences } = (await isTritonVersionFolder(
      archivePath,
    ))
      ? await openTritonFolder(archivePath)
      : await extractArchive(archivePath, join(workDir, 'model'));
    for (const difference of differences ?? []) {
      options.logger?.info({ model: manifest.model.modelName, version: manifest.model.modelVersion }, difference);
    }
    const machineProblems = machineLimitProblems(storedConfig);
    if (machineProblems.length > 0) throw new ConfigInvalidError(configSource, machineProblems);
    const labels = storedConfig.labels_file
      ? (await readFile(pathInside(modelDir, storedConfig.labels_file, 'labels_file'), 'utf8'))
          .split(/\r?\n/)
          .filter((line) => line !== '')
      : undefined;
    const tokenizerFile = storedConfig.text?.tokenizer_file;
    const tokenizer = tokenizerFile
      ? await readFile(pathInside(modelDir, tokenizerFile, 'text.tokenizer_file'), 'utf8')
      : undefined;
    const chatFile = storedConfig.text?.chat_template_file;
    const chat = chatFile
      ? loadChatTemplate(await readFile(pathInside(modelDir, chatFile, 'text.chat_template_file'), 'utf8'), chatFile)
      : PLAIN_CHAT;
    const devices = storedConfig.instances.flatMap((group) =>
      Array.from({ length: group.count }, () => options.device ?? group.device),
    );
    const name = options.name ?? manifest.model.modelName;
    const version = options.version ?? manifest.model.modelVersion;
    if (storedConfig.pipeline) {
      const where = { name, version, archivePath, manifest, labels, workDir, modelDir, started, triton };
      return await loadPipeline(storedConfig, configSource, where, options);
    }
    const handler = isBuiltinHandler(manifest.model.handler)
      ? manifest.model.handler
      : pathInside(modelDir, manifest.model.handler, 'the handler');
    let config: CompleteModelConfig | undefined;
    const deviceNotes: string[] = [];
    let fallbackLogged = false;
    let handlerChecked = false;

    const createInstance = async (index: number): Promise<ServingInstance> => {
      const device = devices[index] ?? devices[0] ?? 'cpu';
      const served = servedModelFile(manifest, device);
      // One line per archive, however many instances fall back (and not again on restarts).
      if (served.fallback && !fallbackLogged) {
        fallbackLogged = true;
        options.logger?.warn({ model: name, version }, served.fallback);
      }
      const spec: InstanceSpec = {
        modelName: name,
        modelVersion: version,
        modelPath: pathInside(modelDir, served.file, 'the model file'),
        modelSource: `${archivePath}!${served.file}`,
        handler,
        config: storedConfig,
        configSource,
        labels,
        ...(tokenizer !== undefined ? { tokenizer } : {}),
        device,
      };
      const id = `${name}:${version}:${index}`;
      applyTensorrtOptions(spec.device, storedConfig.tensorrt);
      if (storedConfig.runtime.thread === 'worker') {
        const started = await WorkerInstance.start(id, spec);
        config ??= started.config;
        if (started.deviceNote) deviceNotes.push(`${id}: ${started.deviceNote}`);
        return started.instance;
      }
      // A main-thread instance imports into the server's own thread, where a handler that loops
      // or exits at import would stop every model: its import is tried in a worker first.
      if (!handlerChecked && !isBuiltinHandler(handler)) {
        await checkHandlerImport(handler, storedConfig.handler_load_timeout / 1000);
        handlerChecked = true;
      }
      const opened = await openInstance(spec);
      config ??= opened.config;
      if (opened.deviceNote) deviceNotes.push(`${id}: ${opened.deviceNote}`);
      return new LocalInstance(id, opened.device, opened.session, opened.handler, opened.context, opened.generation);
    };
    for (let index = 0; index < devices.length; index++) instances.push(await createInstance(index));
    // A text-generation archive's instances each opened an engine; they run one model, so the
    // first one's findings stand for all.
    const decoder = instances.find((instance) => instance.decoder)?.decoder;
    // Sequences go to whichever instances run when they arrive (restarts and scaling change them).
    const generator = decoder
      ? (serving: () => readonly ServingInstance[]): Generator =>
          startGenerator(
            () => serving().filter(generatesText),
            config as CompleteModelConfig,
            decoder.maxContext,
            { tokenizer, chat },
            name,
            version,
            options,
          )
      : undefined;
    if (decoder) {
      const { padding, maxContext, contextWarning } = decoder;
      if (contextWarning) options.logger?.warn({ model: name, version }, contextWarning);
      options.logger?.info(
        { model: name, version, batching: padding.batching, maxContext },
        `generation: sequences share steps ${padding.batching === 'padded' ? 'padded' : 'only at equal lengths'}: ${padding.reason}; max_context ${maxContext}`,
      );
    }

    const model = new LoadedModel({
      name,
      version,
      archivePath,
      manifest,
      config: config as CompleteModelConfig,
      labels,
      instances,
      createInstance,
      workDir,
      deviceNotes,
      loadSeconds: Number(process.hrtime.bigint() - started) / 1e9,
      metrics: options.metrics,
      triton,
      ...(generator ? { generator } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    });
    // With max_queue_delay: auto, its cost line is seeded before the model reports ready.
    await model.calibrateCost();
    return model;
  } catch (error) {
    await Promise.all(instances.map((instance) => instance.release()));
    await rm(workDir, { recursive: true, force: true });
    if (error instanceof Error && 'code' in error && String(error.code).startsWith('BS_ERR_')) throw error;
    throw new ModelLoadError(`cannot load ${archivePath}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
}

/** What the loader reads of a model before opening it: an extracted archive, or a Triton folder as it is. */
interface OpenedModel {
  readonly modelDir: string;
  readonly manifest: ArchiveManifest;
  readonly storedConfig: ModelConfig;
  readonly configSource: string;
  readonly triton?: TritonSource;
  /** A Triton folder's config fields served otherwise than Triton would, one sentence each. */
  readonly differences?: readonly string[];
}

async function extractArchive(archivePath: string, modelDir: string): Promise<OpenedModel> {
  await unpackArchive(archivePath, modelDir);
  const source = await openArchive(modelDir);
  const { manifest, config } = await readArchiveContents(source).finally(() => source.close());
  return { modelDir, manifest, storedConfig: config, configSource: `${archivePath}!${manifest.model.configFile}` };
}

async function openTritonFolder(versionPath: string): Promise<OpenedModel> {
  const { modelDir, manifest, config, configSource, triton, differences } = await openTritonVersion(versionPath);
  return { modelDir, manifest, storedConfig: config, configSource, triton, differences };
}

type ArchiveParts = Pick<
  LoadedModelParts,
  'name' | 'version' | 'archivePath' | 'manifest' | 'labels' | 'workDir' | 'triton'
>;

/** A pipeline archive: no sessions; its instances run the steps against the models loaded now. */
async function loadPipeline(
  storedConfig: ModelConfig,
  configSource: string,
  { started, modelDir, ...archive }: ArchiveParts & { started: bigint; modelDir: string },
  options: LoadOptions,
): Promise<LoadedModel> {
  if (!options.lookup) throw new ModelLoadError(`${archive.archivePath} is a pipeline; only a server loads pipelines`);
  const pipeline = await openPipeline({
    name: archive.name,
    version: archive.version,
    dir: modelDir,
    config: storedConfig,
    configSource,
    lookup: options.lookup,
    // Steps run only once the model below exists and serves.
    stepFinished: (step, ns) => loaded.recordStep(step, ns),
  });
  const loaded = new LoadedModel({
    ...archive,
    config: pipeline.config,
    instances: pipeline.instances,
    createInstance: (index) => Promise.resolve(pipeline.createInstance(index)),
    deviceNotes: [],
    loadSeconds: Number(process.hrtime.bigint() - started) / 1e9,
    metrics: options.metrics,
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return loaded;
}

/** The requests' side of a text-generation archive's engines, wired to the metrics. */
function startGenerator(
  channels: () => readonly GenerationChannel[],
  config: CompleteModelConfig,
  maxContext: number,
  text: { tokenizer: string | undefined; chat: ChatTemplate },
  name: string,
  version: string,
  { metrics }: LoadOptions,
): Generator {
  return new Generator(
    channels,
    decoderLayout(config.inputs, config.outputs),
    loadTokenizer(text.tokenizer, 'text-generation').tokenizer,
    text.chat,
    servedGenerationOptions(config.generation, maxContext),
    {
      firstToken: (seconds) => metrics.firstToken(name, version, seconds),
      nextToken: (seconds) => metrics.nextToken(name, version, seconds),
      activeChanged: (active) => metrics.setActiveSequences(name, version, active),
      cacheBytes: (used, reserved, prefix) => metrics.setCacheBytes(name, version, used, reserved, prefix),
      prefixReused: (sequences, tokens) => metrics.prefixReused(name, version, sequences, tokens),
    },
  );
}
