import { ArchiveManifestError } from '../core/errors.js';

/** Where the manifest lives inside every archive; written last when packing. */
export const MANIFEST_PATH = 'MAR-INF/MANIFEST.json';
export const ARCHIVE_FORMAT_VERSION = 1;

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
  };
  readonly archiverVersion: string;
  readonly formatVersion: number;
  readonly files: readonly ManifestFile[];
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
