import type { ArchiveFormat } from '../archive/format.js';
import { exportTritonModel } from '../archive/export-triton.js';
import { importTorchServeArchive } from '../archive/import-torchserve.js';
import { importTritonModel, isTritonModelFolder } from '../archive/import-triton.js';
import { UsageError } from '../core/errors.js';
import { formatBytes } from './format.js';

export interface ImportCommandOptions {
  exportPath: string;
  handler?: string;
  configFile?: string;
  modelName?: string;
  /** A Triton model folder's version folder to import; default the highest. */
  version?: string;
  archiveFormat: ArchiveFormat;
  force: boolean;
}

/**
 * Converts a torch-model-archiver .mar, or one version of a Triton model folder, saying first
 * what will differ from TorchServe or Triton.
 */
export async function runImport(location: string, options: ImportCommandOptions): Promise<void> {
  const { version, ...rest } = options;
  const triton = await isTritonModelFolder(location);
  if (!triton && version !== undefined)
    throw new UsageError('--version picks a version folder of a Triton model folder');
  if (triton && (options.handler !== undefined || options.configFile !== undefined)) {
    throw new UsageError(
      '--handler and --config-file replace what a TorchServe archive holds; a Triton model folder has neither',
    );
  }
  const { pack, differences } = triton
    ? await importTritonModel({ source: location, ...(version !== undefined ? { version } : {}), ...rest })
    : await importTorchServeArchive({ source: location, ...rest });
  for (const difference of differences) process.stdout.write(`differs: ${difference}\n`);
  process.stdout.write(
    `imported ${location} as ${pack.path} (${pack.format}, ${formatBytes(pack.size)}, ${pack.manifest.files.length} files, sha256 ${pack.sha256})\n`,
  );
}

export interface ExportCommandOptions {
  triton: boolean;
  exportPath: string;
  force: boolean;
}

/** Writes an archive as a Triton model folder, saying first what will differ from batchserve. */
export async function runExport(location: string, options: ExportCommandOptions): Promise<void> {
  if (!options.triton) throw new UsageError('name the format to export to: --triton (a Triton model folder)');
  const { modelDir, version, differences } = await exportTritonModel({
    archive: location,
    exportPath: options.exportPath,
    force: options.force,
  });
  for (const difference of differences) process.stdout.write(`differs: ${difference}\n`);
  process.stdout.write(`exported ${location} as ${modelDir} (config.pbtxt, version ${version})\n`);
}
