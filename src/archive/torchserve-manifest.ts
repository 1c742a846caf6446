import { TorchServeArchiveError } from '../core/errors.js';
import { quoted } from '../core/quote.js';
import { isTorchServeManifest, MANIFEST_PATH } from './manifest.js';

/**
 * The model part of a manifest torch-model-archiver writes (pytorch/serve's
 * model-archiver/model_archiver/manifest_components/model.py): flat names at the archive
 * root, no sizes or hashes, and a Python handler: a built-in's name or a `.py` file.
 */
export interface TorchServeModel {
  readonly modelName: string;
  readonly serializedFile?: string;
  readonly handler: string;
  readonly modelFile?: string;
  readonly modelVersion?: string;
  readonly requirementsFile?: string;
  readonly configFile?: string;
}

const OPTIONAL_KEYS = ['serializedFile', 'modelFile', 'modelVersion', 'requirementsFile', 'configFile'] as const;

/** The model part of a torch-model-archiver manifest, its keys checked for type. */
export function parseTorchServeManifest(text: string, source: string): TorchServeModel {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    throw new TorchServeArchiveError(`${source}: ${MANIFEST_PATH} is not valid JSON (${(error as Error).message})`);
  }
  if (!isTorchServeManifest(raw)) {
    throw new TorchServeArchiveError(
      `${source}: ${MANIFEST_PATH} is not torch-model-archiver's (runtime python, no formatVersion)`,
    );
  }
  const model = (raw as { model?: unknown }).model;
  if (model === null || typeof model !== 'object' || Array.isArray(model)) {
    throw new TorchServeArchiveError(`${source}: ${MANIFEST_PATH}: model: expected an object`);
  }
  const fields = model as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of ['modelName', 'handler'] as const) {
    if (typeof fields[key] !== 'string' || fields[key] === '')
      problems.push(`model.${key}: expected a non-empty string`);
  }
  for (const key of OPTIONAL_KEYS) {
    const value = fields[key];
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      problems.push(`model.${key}: expected a non-empty string, got ${quoted(JSON.stringify(value) ?? '')}`);
    }
  }
  if (problems.length > 0) throw new TorchServeArchiveError(`${source}: ${MANIFEST_PATH}: ${problems.join('; ')}`);
  return model as TorchServeModel;
}
