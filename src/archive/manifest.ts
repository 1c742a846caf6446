import { ArchiveManifestError, ArchiveUnsafePathError, TorchServeArchiveError } from '../core/errors.js';
import { quoted } from '../core/quote.js';
import { modelNameProblem } from '../core/model-name.js';
import { entryNameProblem } from '../core/entry-name.js';

/** Where the manifest lives inside every archive; written last when packing. */
export const MANIFEST_PATH = 'MAR-INF/MANIFEST.json';
export const ARCHIVE_FORMAT_VERSION = 1;
/** The manifest's `handler` of a pipeline archive, whose `serializedFile` is its config. */
export const PIPELINE_HANDLER = 'pipeline';

export interface ManifestFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
}

/**
 * TorchServe's manifest keys, so its tooling can read ours, plus what it lacks:
 * `formatVersion` and a `files` table with the size and sha256 of every other entry.
 */
export interface ArchiveManifest {
  readonly createdOn: string;
  readonly runtime: 'onnxruntime';
  readonly model: {
    readonly modelName: string;
    readonly serializedFile: string;
    /** A built-in handler name (`tensor`, `image-classifier`, `text-embedding`, `text-classifier`, `text-generation`) or a file in the archive. */
    readonly handler: string;
    readonly modelVersion: string;
    readonly configFile: string;
    readonly extraFiles?: string;
    /** Set by `pack --precision`: serializedFile is the converted model, originalFile the one given. */
    readonly precision?: ModelPrecision;
    readonly originalFile?: string;
    /** The converted model against the original on the same inputs, measured before packing. */
    readonly accuracy?: AccuracyFigures;
    /** Set by `pack --optimize`: serializedFile's graph as onnxruntime optimised and saved it. */
    readonly optimizedFile?: string;
    readonly optimization?: GraphOptimization;
  };
  readonly archiverVersion: string;
  readonly formatVersion: number;
  readonly files: readonly ManifestFile[];
}

export const MODEL_PRECISIONS = ['fp16', 'int8'] as const;
export type ModelPrecision = (typeof MODEL_PRECISIONS)[number];

export interface GraphOptimization {
  /** onnxruntime's graph optimization level the file was saved at. */
  readonly level: string;
  /** The onnxruntime that saved it; another version serves serializedFile instead. */
  readonly onnxruntimeVersion: string;
}

/** One output's figures; a null error means the converted model answered NaN or ±Infinity. */
export interface OutputAccuracy {
  readonly name: string;
  readonly maxAbsError: number | null;
  /** max |converted − original| / max |original|: relative to the output's own range. */
  readonly maxRelError: number | null;
  /** Classifier outputs only: the share of rows whose arg-max class is the same. */
  readonly top1Agreement?: number;
  /**
   * Sequences of class choices only ([batch, steps, classes] of per-step probabilities, a CTC
   * recogniser's): the share of rows whose greedy decoding is the same; it, not the error, decides.
   */
  readonly decodedAgreement?: number;
}

export interface AccuracyFigures {
  /** `random`: seeded values in the config's shapes; `calibration`: the --calibration-data folder. */
  readonly inputs: 'random' | 'calibration';
  readonly samples: number;
  readonly limits: { readonly maxRelError: number; readonly minTop1Agreement: number };
  readonly outputs: readonly OutputAccuracy[];
  /** False only when `--force` packed a model beyond the limits. */
  readonly passed: boolean;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
const MANIFEST_KEYS: ReadonlySet<string> = new Set([
  'createdOn',
  'runtime',
  'model',
  'archiverVersion',
  'formatVersion',
  'files',
]);
const MODEL_KEYS: ReadonlySet<string> = new Set([
  'modelName',
  'serializedFile',
  'handler',
  'modelVersion',
  'configFile',
  'extraFiles',
  'precision',
  'originalFile',
  'accuracy',
  'optimizedFile',
  'optimization',
]);
/**
 * A handler that names no file: a built-in (the loader refuses names it does not know).
 * Anything else is a path, and must be a file the archive lists.
 */
const BUILTIN_HANDLER_NAME = /^[a-z][a-z0-9-]*$/;

/**
 * torch-model-archiver's `runtime` is python, python2 or python3 (older ones also wrote
 * `engine`, `specificationVersion`…), and its manifest never has our `formatVersion`.
 */
export function isTorchServeManifest(raw: unknown): boolean {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return false;
  const manifest = raw as { runtime?: unknown; formatVersion?: unknown };
  return (
    manifest.formatVersion === undefined && typeof manifest.runtime === 'string' && /^python/.test(manifest.runtime)
  );
}

/** What a reader of our archives says of one torch-model-archiver made: how to convert it. */
function torchServeArchiveRefusal(source: string): TorchServeArchiveError {
  return new TorchServeArchiveError(
    `${source}: was made by torch-model-archiver (TorchServe), whose manifest holds no hashes; convert it with \`batchserve model-archive import ${source}\``,
  );
}

/**
 * Parses and checks a manifest's shape, then every path it names: each must be a safe
 * relative name (ArchiveUnsafePathError otherwise) of a file its `files` table lists, so a
 * loader that joins it to the extraction folder can only ever reach a hashed entry.
 * `source` names the archive in errors.
 */
export function parseManifest(text: string, source: string): ArchiveManifest {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new ArchiveManifestError(`${source}: ${MANIFEST_PATH} is not valid JSON (${(error as Error).message})`);
  }
  const problems: string[] = [];
  const manifest = raw as Partial<ArchiveManifest> | null;
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest)) {
    throw new ArchiveManifestError(`${source}: ${MANIFEST_PATH} must be a JSON object`);
  }
  if (isTorchServeManifest(raw)) throw torchServeArchiveRefusal(source);
  problems.push(...unknownKeys(manifest, MANIFEST_KEYS, ''));
  if (manifest.formatVersion !== ARCHIVE_FORMAT_VERSION) {
    problems.push(
      `formatVersion is ${String(manifest.formatVersion)}, this batchserve reads ${ARCHIVE_FORMAT_VERSION}`,
    );
  }
  const model = manifest.model;
  if (model === null || typeof model !== 'object' || Array.isArray(model)) {
    problems.push('model: expected an object');
  } else {
    problems.push(...unknownKeys(model, MODEL_KEYS, 'model.'));
    for (const key of ['modelName', 'serializedFile', 'handler', 'modelVersion', 'configFile'] as const) {
      if (typeof model[key] !== 'string' || model[key] === '')
        problems.push(`model.${key}: expected a non-empty string`);
    }
    // Both become URL path segments and folder names (work folders, prediction logs).
    for (const key of ['modelName', 'modelVersion'] as const) {
      const value = model[key];
      const problem = typeof value === 'string' && value !== '' ? modelNameProblem(value) : undefined;
      if (problem !== undefined) problems.push(`model.${key}: ${quoted(value)} ${problem}`);
    }
    if (model.extraFiles !== undefined && typeof model.extraFiles !== 'string') {
      problems.push('model.extraFiles: expected a comma-separated string');
    }
    problems.push(...modelVariantProblems(model));
  }
  if (!Array.isArray(manifest.files)) {
    problems.push('files: expected an array');
  } else {
    manifest.files.forEach((file: Partial<ManifestFile>, index) => {
      if (typeof file?.path !== 'string' || file.path === '') problems.push(`files[${index}].path: expected a string`);
      if (!Number.isSafeInteger(file?.size) || (file.size as number) < 0)
        problems.push(`files[${index}].size: expected a non-negative integer`);
      if (typeof file?.sha256 !== 'string' || !SHA256_HEX.test(file.sha256))
        problems.push(`files[${index}].sha256: expected 64 lowercase hex digits`);
    });
  }
  if (problems.length > 0) {
    throw new ArchiveManifestError(`${source}: ${MANIFEST_PATH}: ${problems.join('; ')}`);
  }
  const checked = manifest as ArchiveManifest;
  checkNamedFiles(checked, source);
  return checked;
}

function unknownKeys(object: object, known: ReadonlySet<string>, prefix: string): string[] {
  return Object.keys(object)
    .filter((key) => !known.has(key))
    .map((key) => `${prefix}${quoted(key)}: unknown key`);
}

/** The archive paths a manifest's model names, by the key that names each. */
export function manifestPaths(model: ArchiveManifest['model']): { key: string; path: string }[] {
  const paths = [
    { key: 'model.serializedFile', path: model.serializedFile },
    { key: 'model.configFile', path: model.configFile },
  ];
  if (!BUILTIN_HANDLER_NAME.test(model.handler)) paths.push({ key: 'model.handler', path: model.handler });
  for (const path of model.extraFiles?.split(',') ?? []) paths.push({ key: 'model.extraFiles', path });
  for (const key of ['originalFile', 'optimizedFile'] as const) {
    const path = model[key];
    if (path !== undefined) paths.push({ key: `model.${key}`, path });
  }
  return paths;
}

/** Every path the manifest names is safe and listed; every listed path is safe. */
function checkNamedFiles(manifest: ArchiveManifest, source: string): void {
  const listed = new Set<string>();
  for (const [index, file] of manifest.files.entries()) {
    const problem = entryNameProblem(file.path);
    if (problem !== undefined) {
      throw new ArchiveUnsafePathError(
        `${source}: ${MANIFEST_PATH}: files[${index}].path ${quoted(file.path)} ${problem}`,
      );
    }
    listed.add(file.path);
  }
  const unlisted: string[] = [];
  for (const { key, path } of manifestPaths(manifest.model)) {
    const problem = entryNameProblem(path);
    if (problem !== undefined) {
      throw new ArchiveUnsafePathError(`${source}: ${MANIFEST_PATH}: ${key} ${quoted(path)} ${problem}`);
    }
    if (!listed.has(path)) unlisted.push(`${key}: ${quoted(path)} is not in the files table`);
  }
  if (unlisted.length > 0) throw new ArchiveManifestError(`${source}: ${MANIFEST_PATH}: ${unlisted.join('; ')}`);
}

/** The keys `pack --precision` and `--optimize` add are optional: older archives lack them. */
function modelVariantProblems(model: ArchiveManifest['model']): string[] {
  const problems: string[] = [];
  for (const key of ['originalFile', 'optimizedFile'] as const) {
    const value: unknown = model[key];
    if (value !== undefined && (typeof value !== 'string' || value === ''))
      problems.push(`model.${key}: expected a non-empty string`);
  }
  if (model.precision !== undefined && model.precision !== 'fp16' && model.precision !== 'int8') {
    problems.push('model.precision: expected "fp16" or "int8"');
  }
  const optimization = model.optimization as Partial<GraphOptimization> | undefined;
  if (model.optimizedFile !== undefined || optimization !== undefined) {
    if (typeof optimization?.level !== 'string' || typeof optimization.onnxruntimeVersion !== 'string') {
      problems.push('model.optimization: expected {level, onnxruntimeVersion} beside model.optimizedFile');
    }
  }
  return problems;
}
