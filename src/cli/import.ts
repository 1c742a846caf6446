import type { ArchiveFormat } from '../archive/format.js';
import { importTorchServeArchive } from '../archive/import-torchserve.js';
import { formatBytes } from './format.js';

export interface ImportCommandOptions {
  exportPath: string;
  handler?: string;
  configFile?: string;
  modelName?: string;
  archiveFormat: ArchiveFormat;
  force: boolean;
}

/** Converts a torch-model-archiver .mar, saying first what will differ from TorchServe. */
export async function runImport(location: string, options: ImportCommandOptions): Promise<void> {
  const { pack, differences } = await importTorchServeArchive({ source: location, ...options });
  for (const difference of differences) process.stdout.write(`differs: ${difference}\n`);
  process.stdout.write(
    `imported ${location} as ${pack.path} (${pack.format}, ${formatBytes(pack.size)}, ${pack.manifest.files.length} files, sha256 ${pack.sha256})\n`,
  );
}
