import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { modelConfigToYaml } from '../config/load.js';
import type { VersionPolicy } from '../config/model-policy.js';
import { TRITON_CONFIG_FILE } from '../config/triton-model-config.js';
import { pathInside } from '../core/entry-name.js';
import { InputFileError } from '../core/errors.js';
import type { ArchiveFormat } from './format.js';
import { packArchive, type PackResult } from './pack.js';
import { openTritonVersion, VERSION_FOLDER } from './triton-folder.js';

export interface TritonImportOptions {
  /** The model folder: `config.pbtxt` (or none) and numbered version folders. */
  readonly source: string;
  /** Which version folder; default the highest. */
  readonly version?: string;
  readonly exportPath?: string;
  /** Default: the folder's name. */
  readonly modelName?: string;
  readonly force?: boolean;
  readonly archiveFormat?: ArchiveFormat;
}

export interface TritonImportResult {
  readonly pack: PackResult;
  /** What differs from serving the folder under Triton, one sentence each. */
  readonly differences: readonly string[];
}

/** Whether `path` is a Triton model folder: a config.pbtxt, or a numbered version folder, in a folder. */
export async function isTritonModelFolder(path: string): Promise<boolean> {
  if (!(await stat(path).catch(() => undefined))?.isDirectory()) return false;
  if (await stat(join(path, TRITON_CONFIG_FILE)).catch(() => undefined)) return true;
  return (await tritonVersions(path)).length > 0;
}

async function tritonVersions(folder: string): Promise<string[]> {
  const entries = await readdir(folder, { withFileTypes: true });
  return entries
    .filter((entry) => entry.isDirectory() && VERSION_FOLDER.test(entry.name))
    .map((entry) => entry.name)
    .sort((a, b) => Number(a) - Number(b));
}

/**
 * Packs one version of a Triton model folder into an archive, read exactly as serve
 * --model-repository reads it (triton-folder.ts): the same mapping, the same refusals. The
 * version policy, which is a server's choice between archives, is said as a difference.
 */
export async function importTritonModel(options: TritonImportOptions): Promise<TritonImportResult> {
  const versions = await tritonVersions(options.source);
  const folder =
    options.version === undefined
      ? versions.at(-1)
      : versions.find((candidate) => Number(candidate) === Number(options.version));
  if (folder === undefined) {
    throw new InputFileError(
      options.version === undefined
        ? `${options.source}: no numbered version folder (Triton's <model>/1/model.onnx)`
        : `${options.source}: no version folder ${options.version} (it has ${versions.join(', ') || 'none'})`,
    );
  }
  const opened = await openTritonVersion(join(options.source, folder));
  const { config, manifest, triton, differences } = opened;
  const name = options.modelName ?? basename(options.source);
  const notes = [...differences];
  const policy = describePolicy(triton.versionPolicy);
  notes.push(
    `version_policy (${policy}) is not in the archive, which holds version ${manifest.model.modelVersion} alone: serve's model_policies.${name}.version_policy keeps it between archives`,
  );
  const work = await mkdtemp(join(tmpdir(), 'batchserve-import-'));
  try {
    const configFile = join(work, 'model-config.yaml');
    await writeFile(configFile, modelConfigToYaml(config));
    const labels =
      config.labels_file === undefined ? [] : [pathInside(opened.modelDir, config.labels_file, 'label_filename')];
    const pack = await packArchive({
      modelName: name,
      version: manifest.model.modelVersion,
      ...(config.pipeline
        ? {}
        : { serializedFile: pathInside(opened.modelDir, manifest.model.serializedFile, 'the model file') }),
      configFile,
      extraFiles: labels,
      ...(options.exportPath !== undefined ? { exportPath: options.exportPath } : {}),
      ...(options.force !== undefined ? { force: options.force } : {}),
      ...(options.archiveFormat !== undefined ? { archiveFormat: options.archiveFormat } : {}),
    });
    return { pack, differences: notes };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function describePolicy(policy: VersionPolicy): string {
  if (policy.latest !== undefined) return `latest ${policy.latest}`;
  if (policy.specific !== undefined) return `specific ${policy.specific.join(', ')}`;
  return 'all';
}
