import { PredictRowsFailedError, UsageError } from '../core/errors.js';
import type { InputKind } from '../predict/dataset.js';
import { parseShard } from '../predict/job-paths.js';
import type { MergeSummary } from '../predict/merge-shards.js';
import type { PredictSummary } from '../predict/predict-job.js';
import { durationOption, integerOption } from './options.js';

export interface PredictCommandOptions {
  input?: string;
  output?: string;
  inputFormat?: InputKind;
  format?: string;
  glob?: string;
  csvColumns?: string[];
  idColumn?: string;
  batchSize?: string;
  instances?: string;
  device?: string;
  shard?: string;
  resume: boolean;
  force: boolean;
  quiet: boolean;
  progressInterval: string;
  checkpointInterval: string;
}

export interface MergeCommandOptions {
  output: string;
  force: boolean;
  quiet: boolean;
}

/** Scores the dataset, prints the summary on stdout, and fails (exit 1) when any row failed. */
export async function runPredict(archive: string, options: PredictCommandOptions): Promise<void> {
  const { input, output } = options;
  if (input === undefined || output === undefined) {
    throw new UsageError(`predict needs ${input === undefined ? '--input' : '--output'}`);
  }
  // The model's modules (onnxruntime, workers) load only here: `predict merge` never needs them.
  const { predictDataset } = await import('../predict/predict-job.js');
  const summary = await predictDataset({
    archive,
    input: {
      path: input,
      ...(options.inputFormat ? { kind: options.inputFormat } : {}),
      ...(options.glob !== undefined ? { glob: options.glob } : {}),
      ...(options.csvColumns ? { csvColumns: options.csvColumns } : {}),
      ...(options.idColumn !== undefined ? { idColumn: options.idColumn } : {}),
    },
    output,
    ...(options.format ? { format: options.format } : {}),
    ...(options.batchSize !== undefined ? { batchSize: integerOption(options.batchSize, '--batch-size', 1) } : {}),
    ...(options.instances !== undefined ? { instances: integerOption(options.instances, '--instances', 1) } : {}),
    ...(options.device !== undefined ? { device: options.device } : {}),
    ...(options.shard !== undefined ? { shard: parseShard(options.shard) } : {}),
    resume: options.resume,
    force: options.force,
    progress: {
      mode: options.quiet ? 'quiet' : process.stderr.isTTY ? 'bar' : 'lines',
      write: (text) => process.stderr.write(text),
      intervalMs: milliseconds(options.progressInterval, '--progress-interval'),
      ...(process.stderr.columns ? { columns: process.stderr.columns } : {}),
    },
    checkpointIntervalMs: milliseconds(options.checkpointInterval, '--checkpoint-interval'),
  });
  if (!options.quiet) process.stdout.write(renderSummary(summary));
  if (summary.failed > 0) {
    throw new PredictRowsFailedError(`${summary.failed} of ${summary.rows} rows failed; see ${summary.errors ?? ''}`);
  }
}

export async function runMerge(shards: string[], options: MergeCommandOptions): Promise<void> {
  const { mergeShards } = await import('../predict/merge-shards.js');
  const summary = await mergeShards({ output: options.output, shards, force: options.force });
  if (!options.quiet) process.stdout.write(renderMergeSummary(summary));
  if (summary.failed > 0) {
    throw new PredictRowsFailedError(`${summary.failed} of ${summary.rows} rows failed; see ${summary.errors ?? ''}`);
  }
}

export function renderSummary(summary: PredictSummary): string {
  const rows = summary.rows.toLocaleString('en-US');
  const head =
    summary.resumedAt === summary.rows && summary.rows > 0
      ? `already complete: ${rows} rows`
      : `scored ${rows} rows${summary.resumedAt > 0 ? ` (resumed at row ${summary.resumedAt.toLocaleString('en-US')})` : ''} in ${summary.seconds.toFixed(1)} s (${summary.rowsPerSecond.toFixed(0)} rows/s)`;
  return (
    `${head}: ${summary.records.toLocaleString('en-US')} records → ${summary.output}\n` +
    (summary.failed > 0 ? `${summary.failed.toLocaleString('en-US')} rows failed → ${summary.errors ?? ''}\n` : '')
  );
}

function renderMergeSummary(summary: MergeSummary): string {
  return (
    `merged ${summary.shards} shards: ${summary.rows.toLocaleString('en-US')} rows, ${summary.records.toLocaleString('en-US')} records → ${summary.output}\n` +
    (summary.failed > 0 ? `${summary.failed.toLocaleString('en-US')} rows failed → ${summary.errors ?? ''}\n` : '')
  );
}

function milliseconds(value: string, flag: string): number {
  const ms = durationOption(value, flag) / 1000;
  if (ms <= 0) throw new UsageError(`${flag}: must be longer than 0, got "${value}"`);
  return ms;
}
