import { rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, resolve } from 'node:path';
import { CheckpointError, InputFileError, OutputExistsError, UsageError } from '../core/errors.js';
import { ServerMetrics } from '../metrics/server-metrics.js';
import { loadModelArchive } from '../repository/load-archive.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import { identityDifference, readCheckpoint, type Checkpoint, type JobIdentity } from './checkpoint.js';
import type { InputSpec } from './dataset.js';
import { completeFinish, JobOutput } from './job-output.js';
import { jobPaths, outputFormatOf, shardOutputPath, shardRange, type JobPaths, type Shard } from './job-paths.js';
import { locateInput } from './locate-input.js';
import { streamRows } from './row-stream.js';
import { startProgress, type ProgressMode } from './progress.js';
import type { Scorer } from './scored-record.js';
import { chunkRowsFor, score } from './score.js';

export interface PredictOptions {
  readonly archive: string;
  readonly input: InputSpec;
  /** With a shard, the shard's own name is derived from it (`out.shard-0-of-4.jsonl`). */
  readonly output: string;
  /** jsonl, csv or parquet; default from the output's extension. */
  readonly format?: string;
  /** Default: the archive's max_batch_size. */
  readonly batchSize?: number;
  /** Default: the archive's instance count. */
  readonly instances?: number;
  /** Overrides every instance's device. */
  readonly device?: string;
  readonly shard?: Shard;
  /** Continue a partial run of the same job if there is one (else start one). */
  readonly resume: boolean;
  /** Replace an existing output, checkpoint or partial run. */
  readonly force: boolean;
  readonly progress: {
    readonly mode: ProgressMode;
    readonly write: (text: string) => void;
    readonly intervalMs: number;
    readonly columns?: number;
  };
  /** How often written rows are committed and the checkpoint rewritten. */
  readonly checkpointIntervalMs: number;
}

export interface PredictSummary {
  readonly output: string;
  /** Set when rows failed. */
  readonly errors: string | undefined;
  readonly checkpoint: string;
  /** Rows this job scores (its shard's when sharded). */
  readonly rows: number;
  readonly records: number;
  readonly failed: number;
  /** Rows a resumed job found done already. */
  readonly resumedAt: number;
  /** Wall time of the whole command. */
  readonly seconds: number;
  /** Rows this run scored per second, from the first row read to the output renamed into place (model loading excluded). */
  readonly rowsPerSecond: number;
}

/**
 * `batchserve predict`: scores every row of a dataset with the archive's own handler, the same
 * LoadedModel and batcher `serve` uses, and writes one record per row in input order.
 */
export async function predictDataset(options: PredictOptions): Promise<PredictSummary> {
  const started = performance.now();
  if (options.resume && options.force) {
    throw new UsageError('--resume keeps a partial run and --force discards it: pass one of them');
  }
  const format = outputFormatOf(options.output, options.format);
  const paths = jobPaths(options.shard ? shardOutputPath(options.output, options.shard) : options.output);
  const folder = await stat(dirname(paths.output)).catch(() => undefined);
  if (!folder?.isDirectory()) throw new UsageError(`the folder of --output ${paths.output} does not exist`);
  const archive = resolve(options.archive);
  const archiveFound = await stat(archive).catch(() => {
    throw new InputFileError(`cannot read the archive ${options.archive}`);
  });
  const located = await locateInput(options.input);
  const job: JobIdentity = {
    archive: { path: archive, size: archiveFound.size, mtimeMs: archiveFound.mtimeMs },
    input: located.identity,
    format,
    options: {
      glob: options.input.glob ?? null,
      csvColumns: options.input.csvColumns ?? null,
      idColumn: options.input.idColumn ?? null,
      device: options.device ?? null,
      shard: options.shard ?? null,
    },
  };
  const previous = await previousRun(paths, job, options);
  if (previous?.state === 'finished') return summaryOf(paths, previous, previous.done, started, started);
  if (previous?.state === 'finishing') {
    return summaryOf(paths, await completeFinish(paths, previous), previous.done, started, started);
  }

  const model = await loadModelArchive(archive, {
    workRoot: tmpdir(),
    metrics: new ServerMetrics({ collectProcessMetrics: false }),
    ...(options.device !== undefined ? { device: options.device } : {}),
  });
  try {
    if (options.batchSize !== undefined) model.reconfigure({ maxBatchSize: options.batchSize });
    if (options.instances !== undefined) await model.scale(options.instances);
    const dataset = await located.open(model.signature);
    try {
      const range = shardRange(options.shard, dataset.rowCount);
      const base = { job, rows: { ...range, total: dataset.rowCount } };
      if (previous && identityDifference(previous.rows, base.rows)) {
        throw new CheckpointError(
          `${paths.checkpoint} covers rows ${previous.rows.start}–${previous.rows.end} of ${previous.rows.total}, this job ${range.start}–${range.end} of ${dataset.rowCount}; pass --force to start again`,
        );
      }
      const output = await JobOutput.begin({ paths, format, base, ...(previous ? { resume: previous } : {}) });
      const resumedAt = output.saved.done;
      const scoringStarted = performance.now();
      const first = range.start + resumedAt;
      const scorer: Scorer = {
        name: model.name,
        version: model.version,
        outputNames: model.signature.outputs.map((output) => output.name),
      };
      const progress = startProgress({
        ...options.progress,
        snapshot: () => ({
          total: range.end - range.start,
          done: output.written.done,
          startedAt: resumedAt,
          failed: output.written.failed,
          saved: output.saved.done,
          elapsedMs: performance.now() - scoringStarted,
        }),
      });
      let commitError: { error: unknown } | undefined;
      const committing = setInterval(() => {
        output.commit().catch((error: unknown) => (commitError ??= { error }));
      }, options.checkpointIntervalMs);
      try {
        const maxInFlight = inFlightRows(model);
        const chunkRows = chunkRowsFor(model);
        await streamRows({
          rows: dataset.rows(first, range.end, { chunkRows }),
          from: first,
          to: range.end,
          maxInFlight,
          window: Math.max(maxInFlight, chunkRows) * 4,
          score: (row) => score(model, scorer, row),
          deliver: async (outcome) => {
            if (commitError) throw commitError.error;
            await output.write(outcome.row, 'record' in outcome ? { record: outcome.record } : outcome);
          },
        });
        clearInterval(committing);
        const finished = await output.finish({ name: model.name, version: model.version });
        return summaryOf(paths, finished, resumedAt, started, scoringStarted);
      } catch (error) {
        clearInterval(committing);
        // Keep what was written: a --resume starts after it.
        await output.commit().catch(() => undefined);
        await output.abandon().catch(() => undefined);
        throw error;
      } finally {
        progress.stop();
      }
    } finally {
      await dataset.close?.();
    }
  } finally {
    await model.unload();
  }
}

/**
 * What an earlier run of this output left: nothing (start), a running checkpoint to resume,
 * or a finishing or finished job. Refuses what cannot go on without --force or --resume.
 */
async function previousRun(
  paths: JobPaths,
  job: JobIdentity,
  options: PredictOptions,
): Promise<Checkpoint | undefined> {
  if (options.force) {
    // The old output and errors stay readable until the new ones are renamed over them.
    await Promise.all([paths.checkpoint, paths.partial].map((path) => rm(path, { recursive: true, force: true })));
    return undefined;
  }
  const checkpoint = await readCheckpoint(paths.checkpoint);
  const outputExists = await stat(paths.output).then(
    () => true,
    () => false,
  );
  if (!checkpoint) {
    if (outputExists) throw new OutputExistsError(`${paths.output} exists; pass --force to replace it`);
    // A run that died before its first checkpoint left nothing worth keeping.
    await rm(paths.partial, { recursive: true, force: true });
    return undefined;
  }
  if (!options.resume) {
    if (checkpoint.state === 'finished') {
      throw new OutputExistsError(`${paths.output} exists; pass --force to replace it`);
    }
    throw new CheckpointError(
      `a partial run of ${paths.output} exists (${checkpoint.done} of ${checkpoint.rows.end - checkpoint.rows.start} rows done); pass --resume to finish it or --force to start again`,
    );
  }
  const difference = identityDifference(checkpoint.job, job);
  if (difference) {
    throw new CheckpointError(`${paths.checkpoint} is of another job (${difference}); pass --force to start again`);
  }
  if (checkpoint.state === 'finished' && !outputExists) {
    throw new CheckpointError(`${paths.checkpoint} says the job finished but ${paths.output} is missing; pass --force`);
  }
  return checkpoint;
}

/**
 * Rows kept submitted: each instance's running batch and a full one queued behind it, plus one
 * more, so a batch is always full when an instance frees; never more than the queue holds.
 */
function inFlightRows(model: LoadedModel): number {
  const { config } = model;
  const batch = Math.max(1, config.max_batch_size);
  return Math.max(1, Math.min(batch * (2 * model.instances.length + 1), config.dynamic_batching.max_queue_size));
}

function summaryOf(
  paths: JobPaths,
  checkpoint: Checkpoint,
  resumedAt: number,
  started: number,
  scoringStarted: number,
): PredictSummary {
  const now = performance.now();
  const seconds = (now - started) / 1000;
  const scoringSeconds = (now - scoringStarted) / 1000;
  const scored = checkpoint.done - resumedAt;
  return {
    output: paths.output,
    errors: checkpoint.failed > 0 ? paths.errors : undefined,
    checkpoint: paths.checkpoint,
    rows: checkpoint.rows.end - checkpoint.rows.start,
    records: checkpoint.records,
    failed: checkpoint.failed,
    resumedAt,
    seconds,
    rowsPerSecond: scoringSeconds > 0 ? scored / scoringSeconds : 0,
  };
}
