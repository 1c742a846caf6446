import { modelConfigFromText } from '../config/load.js';
import type { ModelConfig } from '../config/model-config.js';
import { ArchiveMissingFileError } from '../errors.js';
import { MANIFEST_PATH, parseManifest, type ArchiveManifest } from './manifest.js';
import type { ArchiveSource } from './source.js';

export interface ArchiveContents {
  readonly manifest: ArchiveManifest;
  readonly config: ModelConfig;
}

/** The manifest and the validated config of an opened archive. */
export async function readArchiveContents(source: ArchiveSource): Promise<ArchiveContents> {
  const manifest = parseManifest((await requireEntry(source, MANIFEST_PATH)).toString('utf8'), source.location);
  const configPath = manifest.model.configFile;
  const config = modelConfigFromText(
    (await requireEntry(source, configPath)).toString('utf8'),
    `${source.location}!${configPath}`,
  );
  return { manifest, config };
}

export async function requireEntry(source: ArchiveSource, path: string): Promise<Buffer> {
  if (!source.entry(path)) throw new ArchiveMissingFileError(`${source.location}: ${path} is missing`);
  return source.readFile(path);
}
