import { modelConfigFromText } from '../config/load.js';
import type { ModelConfig } from '../config/model-config.js';
import { ArchiveManifestError, ArchiveMissingFileError } from '../core/errors.js';
import { MANIFEST_PATH, parseManifest, type ArchiveManifest } from './manifest.js';
import type { ArchiveSource } from './source.js';

export interface ArchiveContents {
  readonly manifest: ArchiveManifest;
  readonly config: ModelConfig;
}

/** The manifest and the validated config of an opened archive. */
export async function readArchiveContents(source: ArchiveSource): Promise<ArchiveContents> {
  const manifest = await readManifest(source);
  const configPath = manifest.model.configFile;
  const config = modelConfigFromText(
    (await requireEntry(source, configPath)).toString('utf8'),
    `${source.location}!${configPath}`,
  );
  return { manifest, config };
}

/** Manifests are a few KiB; this bounds what a hostile one can make us buffer. */
const MAX_MANIFEST_BYTES = 16 * 1024 ** 2;

/** The parsed manifest of an opened archive; ArchiveManifestError when absent or invalid. */
export async function readManifest(source: ArchiveSource): Promise<ArchiveManifest> {
  const entry = source.entry(MANIFEST_PATH);
  if (entry === undefined) throw new ArchiveManifestError(`${source.location}: has no ${MANIFEST_PATH}`);
  if (entry.size > MAX_MANIFEST_BYTES) {
    throw new ArchiveManifestError(
      `${source.location}: ${MANIFEST_PATH} is ${entry.size} bytes, over ${MAX_MANIFEST_BYTES}`,
    );
  }
  return parseManifest((await source.readFile(MANIFEST_PATH)).toString('utf8'), source.location);
}

export async function requireEntry(source: ArchiveSource, path: string): Promise<Buffer> {
  if (!source.entry(path)) throw new ArchiveMissingFileError(`${source.location}: ${path} is missing`);
  return source.readFile(path);
}
