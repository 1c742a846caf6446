import { UsageError } from '../core/errors.js';
import type { ArchiveFormat } from '../archive/format.js';
import { packArchive } from '../archive/pack.js';
import { formatBytes } from './format.js';
import { startSpinner } from './spinner.js';
import type { ModelPrecision } from '../archive/manifest.js';
import type { PreparedModel } from '../optimize/prepare-model.js';
import { describePreparedModel } from './pack-report.js';

export interface PackCommandOptions {
  modelName: string;
  serializedFile?: string;
  version: string;
  handler: string;
  configFile?: string;
  extraFiles?: string[];
  exportPath: string;
  archiveFormat: ArchiveFormat;
  force: boolean;
  acceptAccuracyLoss: boolean;
  optimize: boolean;
  precision?: ModelPrecision;
  keepIoTypes: boolean;
  fp32Ops?: string[];
  calibrationData?: string;
  maxError?: number;
  minAgreement?: number;
}

export async function runPack(options: PackCommandOptions): Promise<void> {
  if (options.acceptAccuracyLoss && !options.precision) {
    throw new UsageError('--accept-accuracy-loss needs --precision: only a converted model has an accuracy gate');
  }
  const spinner = startSpinner('checking model, config and handler');
  try {
    let preparedModel: PreparedModel | undefined;
    if (options.precision || options.optimize) {
      spinner.text = options.precision
        ? `converting to ${options.precision} and checking accuracy`
        : 'optimising the graph';
      const { prepareModel } = await import('../optimize/prepare-model.js');
      const { serializedFile } = options;
      if (serializedFile === undefined) throw new UsageError('--precision and --optimize need --serialized-file');
      preparedModel = await prepareModel({ ...options, serializedFile });
      spinner.stop();
      process.stdout.write(describePreparedModel(preparedModel));
      spinner.start('writing the archive');
    }
    const result = await packArchive({
      ...options,
      ...(preparedModel ? { preparedModel } : {}),
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
