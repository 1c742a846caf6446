import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { ArchiveManifestError, TorchServeArchiveError } from '../core/errors.js';
import { quoted } from '../core/quote.js';
import type { ArchiveFormat } from './format.js';
import { MANIFEST_PATH } from './manifest.js';
import { packArchive, type PackResult } from './pack.js';
import { requireEntry } from './read.js';
import { openArchive, type ArchiveSource } from './source.js';
import { parseTorchServeManifest, type TorchServeModel } from './torchserve-manifest.js';

export interface ImportOptions {
  /** The .mar torch-model-archiver wrote (a zip, or a folder with the same layout). */
  readonly source: string;
  readonly exportPath?: string;
  /** Replaces TorchServe's handler: a built-in name or a .js/.ts file; required for a Python one. */
  readonly handler?: string;
  /** A batchserve model-config.yaml, used instead of what TorchServe's config maps onto. */
  readonly configFile?: string;
  /** Default: the manifest's modelName. */
  readonly modelName?: string;
  readonly force?: boolean;
  readonly archiveFormat?: ArchiveFormat;
}

export interface ImportResult {
  readonly pack: PackResult;
  /** What differs from serving it under TorchServe, one sentence each. */
  readonly differences: readonly string[];
}

/** Manifests are a few KiB; the same bound as our own reader's. */
const MAX_MANIFEST_BYTES = 16 * 1024 ** 2;

/**
 * TorchServe's model-config.yaml keys that have a batchserve equivalent (docs/torchserve.md):
 * batchSize and maxBatchDelay (ms) are the dynamic batcher's, minWorkers the instance count,
 * jobQueueSize the queue bound, clientTimeoutInMills how long a request may wait queued.
 */
const CONFIG_MAPPING: Readonly<Record<string, (value: number) => Record<string, unknown>>> = {
  batchSize: (value) => ({ max_batch_size: value }),
  maxBatchDelay: (value) => ({ dynamic_batching: { max_queue_delay: `${value}ms` } }),
  minWorkers: (value) => ({ instances: [{ count: value }] }),
  jobQueueSize: (value) => ({ dynamic_batching: { max_queue_size: value } }),
  clientTimeoutInMills: (value) => ({ dynamic_batching: { default_timeout: `${value}ms` } }),
};

/**
 * Rewrites an archive torch-model-archiver made into a batchserve one: its ONNX file and
 * extra files are packed (checked and hashed as `pack` does), its TorchServe config keys
 * mapped where batchserve has them. A PyTorch serialized file, or a Python handler with no
 * `--handler` to replace it, is refused with what to do instead: neither can run here.
 */
export async function importTorchServeArchive(options: ImportOptions): Promise<ImportResult> {
  const source = await openArchive(options.source);
  const work = await mkdtemp(join(tmpdir(), 'batchserve-import-'));
  try {
    const model = parseTorchServeManifest((await readManifestText(source)).toString('utf8'), source.location);
    const serializedFile = servableFile(model, source.location);
    const differences: string[] = [];
    const handler = replacementHandler(model, options.handler, differences, source);
    const carried = new Set([MANIFEST_PATH, serializedFile]);
    const labels = options.configFile === undefined ? await labelsOfIndexToName(source, differences) : undefined;
    const configFile = await importedConfig(source, model, options.configFile, work, differences, labels);
    if (model.configFile !== undefined) carried.add(model.configFile);
    for (const [key, what] of [
      ['modelFile', 'its model definition'],
      ['requirementsFile', 'its pip requirements'],
    ] as const) {
      const path = model[key];
      if (path === undefined) continue;
      carried.add(path);
      differences.push(`${what} ${quoted(path)} is not carried: an ONNX file holds the whole model`);
    }
    const python = source.entries.filter((entry) => !carried.has(entry.path) && /\.py$/i.test(entry.path));
    if (python.length > 0) {
      differences.push(
        `${python.length} Python file(s) not carried (${python.map((entry) => quoted(entry.path)).join(', ')}): nothing here runs Python`,
      );
    }
    for (const entry of python) carried.add(entry.path);
    const extras = source.entries.filter((entry) => !carried.has(entry.path) && !entry.path.startsWith('MAR-INF/'));
    for (const entry of [{ path: serializedFile }, ...extras]) {
      const target = join(work, 'files', ...entry.path.split('/'));
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, await requireEntry(source, entry.path));
    }
    if (labels !== undefined) await writeFile(join(work, 'files', LABELS_FILE), labels.join('\n') + '\n');
    // Each top-level name once: pack stores a folder under its own name, as TorchServe did.
    const topLevel = [
      ...new Set([
        ...extras.map((entry) => entry.path.split('/')[0] as string),
        ...(labels !== undefined ? [LABELS_FILE] : []),
      ]),
    ];
    const pack = await packArchive({
      modelName: options.modelName ?? model.modelName,
      version: model.modelVersion ?? '1.0',
      serializedFile: join(work, 'files', ...serializedFile.split('/')),
      handler,
      ...(configFile !== undefined ? { configFile } : {}),
      extraFiles: topLevel.map((name) => join(work, 'files', name)),
      ...(options.exportPath !== undefined ? { exportPath: options.exportPath } : {}),
      ...(options.force !== undefined ? { force: options.force } : {}),
      ...(options.archiveFormat !== undefined ? { archiveFormat: options.archiveFormat } : {}),
    });
    return { pack, differences };
  } finally {
    await source.close();
    await rm(work, { recursive: true, force: true });
  }
}

async function readManifestText(source: ArchiveSource): Promise<Buffer> {
  const entry = source.entry(MANIFEST_PATH);
  if (entry === undefined) throw new ArchiveManifestError(`${source.location}: has no ${MANIFEST_PATH}`);
  if (entry.size > MAX_MANIFEST_BYTES) {
    throw new ArchiveManifestError(
      `${source.location}: ${MANIFEST_PATH} is ${entry.size} bytes, over ${MAX_MANIFEST_BYTES}`,
    );
  }
  return source.readFile(MANIFEST_PATH);
}

/** The serialized file, when it is one onnxruntime runs; otherwise the conversion to make. */
function servableFile(model: TorchServeModel, location: string): string {
  const file = model.serializedFile;
  if (file === undefined) {
    throw new TorchServeArchiveError(
      `${location}: names no serializedFile (its model is built by Python code): export it with torch.onnx.export(model, example_input, "model.onnx") and pack that`,
    );
  }
  if (!/\.onnx$/i.test(file)) {
    throw new TorchServeArchiveError(
      `${location}: its serialized file ${quoted(file)} is not ONNX, which is all batchserve runs: export the model with torch.onnx.export(model, example_input, "model.onnx") and pack that`,
    );
  }
  return file;
}

/**
 * TorchServe's handler is Python: a built-in's name (image_classifier…) or a file of the
 * archive. A built-in is replaced by the tensor handler (saying so), a file only by a handler
 * the user names, since whatever it did to requests must be done some other way.
 */
function replacementHandler(
  model: TorchServeModel,
  chosen: string | undefined,
  differences: string[],
  source: ArchiveSource,
): string {
  // `handler.py`, `handler.py:fn`, or a module name whose .py the archive holds.
  const module = model.handler.split(':')[0] ?? model.handler;
  const custom = /\.py$/i.test(module) || module.includes('/') || source.entry(`${module}.py`) !== undefined;
  if (chosen !== undefined) {
    differences.push(`its handler ${quoted(model.handler)} is not run: ${quoted(chosen)} serves the model instead`);
    return chosen;
  }
  if (custom) {
    throw new TorchServeArchiveError(
      `its handler ${quoted(model.handler)} is Python, which batchserve cannot run: name what replaces it with --handler (tensor serves the model's tensors as they are; \`batchserve model-archive init\` writes a .js handler to start from)`,
    );
  }
  differences.push(
    `TorchServe's built-in ${quoted(model.handler)} handler is not run: the tensor handler serves the model's tensors as they are (KServe v2 JSON or binary); --handler image-classifier decodes and classifies images`,
  );
  return 'tensor';
}

/**
 * The batchserve config to pack: the user's, or TorchServe's keys mapped (a YAML file written
 * under `work`), or none, when pack's inference from the model is all there is.
 */
async function importedConfig(
  source: ArchiveSource,
  model: TorchServeModel,
  chosen: string | undefined,
  work: string,
  differences: string[],
  labels: readonly string[] | undefined,
): Promise<string | undefined> {
  if (chosen !== undefined) {
    if (model.configFile !== undefined) {
      differences.push(`its config ${quoted(model.configFile)} is not read: --config-file replaces it`);
    }
    return chosen;
  }
  const config: Record<string, unknown> =
    model.configFile === undefined ? {} : await mappedConfig(source, model.configFile, differences);
  if (labels !== undefined) config.labels_file = LABELS_FILE;
  if (Object.keys(config).length === 0) return undefined;
  const path = join(work, 'model-config.yaml');
  await writeFile(path, stringifyYaml(config));
  return path;
}

/** TorchServe's config keys that batchserve has, as batchserve config values. */
async function mappedConfig(
  source: ArchiveSource,
  configFile: string,
  differences: string[],
): Promise<Record<string, unknown>> {
  const text = (await requireEntry(source, configFile)).toString('utf8');
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (error) {
    throw new TorchServeArchiveError(`${source.location}: ${configFile} is not YAML (${(error as Error).message})`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new TorchServeArchiveError(`${source.location}: ${configFile}: expected a mapping of keys`);
  }
  const config: Record<string, unknown> = {};
  const ignored: string[] = [];
  for (const [key, value] of Object.entries(raw)) {
    const map = CONFIG_MAPPING[key];
    if (map === undefined || !Number.isInteger(value) || (value as number) < 0) {
      ignored.push(key);
      continue;
    }
    const mapped = map(value as number);
    for (const [name, part] of Object.entries(mapped)) {
      const held = config[name];
      config[name] = typeof held === 'object' && !Array.isArray(held) ? { ...held, ...(part as object) } : part;
    }
  }
  if (ignored.length > 0) {
    differences.push(
      `${configFile}: ${ignored.map((key) => quoted(key)).join(', ')} not carried (batchserve takes batchSize, maxBatchDelay, minWorkers, jobQueueSize and clientTimeoutInMills as whole numbers)`,
    );
  }
  return config;
}

/** Where the labels of an index_to_name.json go, one a line: the config's labels_file. */
const LABELS_FILE = 'index_to_name.txt';

/**
 * TorchServe's classifier handlers name classes from index_to_name.json, `{"0": "tench"}` or
 * `{"0": ["n01440764", "tench"]}` (the last string is the name, as TorchServe's
 * map_class_to_label reads it); batchserve's labels_file is those names in index order.
 * Undefined when the archive has none, or already holds a file of that name.
 */
async function labelsOfIndexToName(source: ArchiveSource, differences: string[]): Promise<string[] | undefined> {
  const mapping = 'index_to_name.json';
  if (source.entry(mapping) === undefined) return undefined;
  if (source.entry(LABELS_FILE) !== undefined) {
    differences.push(`${mapping} is not turned into labels: the archive already holds ${LABELS_FILE}`);
    return undefined;
  }
  const fail = (why: string): never => {
    throw new TorchServeArchiveError(`${source.location}: ${mapping} ${why}`);
  };
  let raw: unknown;
  try {
    raw = JSON.parse((await requireEntry(source, mapping)).toString('utf8'));
  } catch (error) {
    return fail(`is not JSON (${(error as Error).message})`);
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return fail('is not an object of class indices, {"0": "name", …}');
  }
  const entries = raw as Record<string, unknown>;
  const count = Object.keys(entries).length;
  const labels = Array.from({ length: count }, (_, index) => {
    const value = entries[String(index)];
    const name: unknown = Array.isArray(value) ? (value as unknown[])[value.length - 1] : value;
    if (typeof name !== 'string' || /[\r\n]/.test(name)) {
      return fail(
        `has no name for class ${index} (keys must be the indices 0 to ${count - 1}, each a name or a list ending with one)`,
      );
    }
    return name;
  });
  differences.push(`${mapping}'s ${count} class names written to ${LABELS_FILE}, the config's labels_file`);
  return labels;
}
