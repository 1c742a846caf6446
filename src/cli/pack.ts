import type { ArchiveFormat } from '../archive/format.js';
import { packArchive } from '../archive/pack.js';
import { formatBytes } from './format.js';
import { startSpinner } from './spinner.js';

export interface PackCommandOptions {
  modelName: string;
  serializedFile: string;
  version: string;
  handler: string;
  configFile?: string;
  extraFiles?: string[];
  exportPath: string;
  archiveFormat: ArchiveFormat;
  force: boolean;
}

export async function runPack(options: PackCommandOptions): Promise<void> {
  const spinner = startSpinner('checking model, config and handler');
  try {
    const result = await packArchive({
      ...options,
      extraFiles: options.extraFiles ?? [],
      onProgress: ({ phase, doneBytes, totalBytes }) => {
        if (phase !== 'checking') spinner.text = `${phase} ${formatBytes(doneBytes)} / ${formatBytes(totalBytes)}`;
      },
    });
    spinner.stop();
    process.stdout.write(
      `packed ${result.path} (${result.format}, ${formatBytes(result.size)}, ${result.manifest.files.length} files, sha256 ${result.sha256})\n`,
    );
  } catch (error) {
    spinner.stop();
    throw error;
  }
}
