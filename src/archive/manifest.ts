import { ArchiveManifestError } from '../core/errors.js';

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
    /** A built-in handler name (`tensor`, `image-classifier`) or a file in the archive. */
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

/** Parses and checks a manifest's shape; `source` names the archive in errors. */
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
  if (manifest.formatVersion !== ARCHIVE_FORMAT_VERSION) {
    problems.push(
      `formatVersion is ${String(manifest.formatVersion)}, this batchserve reads ${ARCHIVE_FORMAT_VERSION}`,
    );
  }
  const model = manifest.model;
  if (model === null || typeof model !== 'object') {
    problems.push('model: expected an object');
  } else {
    for (const key of ['modelName', 'serializedFile', 'handler', 'modelVersion', 'configFile'] as const) {
      if (typeof model[key] !== 'string' || model[key] === '')
        problems.push(`model.${key}: expected a non-empty string`);
    }
    problems.push(...modelVariantProblems(model, manifest.files));
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
  return manifest as ArchiveManifest;
}

/**
 * The keys `pack --precision` and `--optimize` add are optional (older archives lack them), but
 * when present they must name files the archive lists: the loader may open them.
 */
function modelVariantProblems(model: ArchiveManifest['model'], files: unknown): string[] {
  const problems: string[] = [];
  const listed = new Set(Array.isArray(files) ? files.map((file: Partial<ManifestFile>) => file?.path) : []);
  for (const key of ['originalFile', 'optimizedFile'] as const) {
    const value: unknown = model[key];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value === '') problems.push(`model.${key}: expected a non-empty string`);
    else if (!listed.has(value)) problems.push(`model.${key}: "${value}" is not in the files table`);
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
