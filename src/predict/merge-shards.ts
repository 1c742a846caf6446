import { randomBytes } from 'node:crypto';
import { open, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { OutputExistsError, ShardMergeError, UsageError } from '../core/errors.js';
import { identityDifference, readCheckpoint, writeCheckpoint, type Checkpoint } from './checkpoint.js';
import { appendFrom, csvHeaderLength } from './file-append.js';
import { checkpointPath, errorsPath } from './job-paths.js';

export interface MergeOptions {
  readonly output: string;
  readonly shards: readonly string[];
  readonly force: boolean;
}

export interface MergeSummary {
  readonly output: string;
  readonly errors: string | undefined;
  readonly shards: number;
  readonly rows: number;
  readonly records: number;
  readonly failed: number;
}

interface ShardFile {
  readonly path: string;
  readonly checkpoint: Checkpoint;
  readonly index: number;
  readonly count: number;
}

/**
 * `batchserve predict merge`: joins the outputs of `predict --shard I/N` in shard order. Each
 * shard's finished checkpoint vouches for it — same job (archive, input, format, options),
 * finished, its file the size it finished at — and together they must be shards 0 … N-1 of
 * one N, each once, covering the input's rows end to end. The result, its errors and a
 * finished checkpoint are what one unsharded run writes. JSON Lines and CSV only: a Parquet
 * file cannot be concatenated, and a folder of Parquet shards already reads as one dataset.
 */
export async function mergeShards(options: MergeOptions): Promise<MergeSummary> {
  if (options.shards.length === 0) throw new UsageError('predict merge: name the shard outputs to merge');
  const output = resolve(options.output);
  const folder = await stat(dirname(output)).catch(() => undefined);
  if (!folder?.isDirectory()) throw new UsageError(`the folder of --output ${output} does not exist`);
  if (!options.force && (await exists(output))) {
    throw new OutputExistsError(`${output} exists; pass --force to replace it`);
  }
  const outputs: string[] = [];
  for (const path of options.shards.map((shard) => resolve(shard))) {
    if (!(await isErrorsFileOfAnOutput(path))) outputs.push(path);
  }
  const shards = await Promise.all(outputs.map(readShard));
  const [first] = shards as [ShardFile, ...ShardFile[]];
  checkSameJob(shards, first);
  const ordered = checkCoverage(shards, first);
  if (first.checkpoint.job.format === 'parquet') {
    throw new ShardMergeError(
      'Parquet shards are not concatenated (a Parquet file is not appendable); read them together as one dataset (pyarrow, DuckDB, Spark read a folder of Parquet files), or run the shards with --format jsonl or csv',
    );
  }

  const withRecords = ordered.filter((shard) => shard.checkpoint.records > 0);
  const temporary = join(dirname(output), `.${basename(output)}.merge-${randomBytes(4).toString('hex')}`);
  const errorsTemporary = `${temporary}.errors`;
  try {
    const outputBytes = await concatenate(
      temporary,
      // With no records anywhere, the output is what an empty run writes: the first shard's file.
      withRecords.length > 0 ? withRecords : [first],
      first.checkpoint.job.format === 'csv',
    );
    const failing = ordered.filter((shard) => shard.checkpoint.failed > 0);
    const errorsBytes = failing.length > 0 ? await concatenate(errorsTemporary, failing, false, errorsPath) : 0;
    const totals = {
      records: ordered.reduce((sum, shard) => sum + shard.checkpoint.records, 0),
      failed: ordered.reduce((sum, shard) => sum + shard.checkpoint.failed, 0),
    };
    const { total } = first.checkpoint.rows;
    const merged: Checkpoint = {
      ...first.checkpoint,
      state: 'finished',
      job: { ...first.checkpoint.job, options: { ...first.checkpoint.job.options, shard: null } },
      rows: { start: 0, end: total, total },
      done: total,
      ...totals,
      outputBytes,
      errorsBytes,
      layout: withRecords[0]?.checkpoint.layout ?? null,
      updatedAt: new Date().toISOString(),
    };
    if (failing.length > 0) await rename(errorsTemporary, errorsPath(output));
    else await rm(errorsPath(output), { force: true });
    await rename(temporary, output);
    await writeCheckpoint(checkpointPath(output), merged);
    return {
      output,
      errors: failing.length > 0 ? errorsPath(output) : undefined,
      shards: ordered.length,
      rows: total,
      ...totals,
    };
  } finally {
    await rm(temporary, { force: true });
    await rm(errorsTemporary, { force: true });
  }
}

/** `out.shard-*.jsonl` also matches each shard's `<shard>.errors.jsonl`: those go with their shard. */
async function isErrorsFileOfAnOutput(path: string): Promise<boolean> {
  const suffix = '.errors.jsonl';
  if (!path.endsWith(suffix) || (await exists(checkpointPath(path)))) return false;
  return exists(checkpointPath(path.slice(0, -suffix.length)));
}

async function readShard(path: string): Promise<ShardFile> {
  const checkpoint = await readCheckpoint(checkpointPath(path));
  if (!checkpoint) {
    throw new ShardMergeError(
      `${path} has no checkpoint (${basename(checkpointPath(path))}): not a predict --shard output`,
    );
  }
  const shard = checkpoint.job.options.shard;
  if (!shard) throw new ShardMergeError(`${path} is the output of an unsharded run, not a shard`);
  if (checkpoint.state !== 'finished') {
    throw new ShardMergeError(
      `shard ${shard.index}/${shard.count} (${path}) is not finished: ${checkpoint.done} of ${checkpoint.rows.end - checkpoint.rows.start} rows done; run it again with --resume`,
    );
  }
  const size = await stat(path).then(
    (found) => found.size,
    () => -1,
  );
  if (size !== checkpoint.outputBytes) {
    throw new ShardMergeError(
      `${path} ${size < 0 ? 'is missing' : `holds ${size} bytes`}; it finished with ${checkpoint.outputBytes}: it changed since`,
    );
  }
  return { path, checkpoint, index: shard.index, count: shard.count };
}

/** Every shard is of one job: same archive, input, format and options but the shard, same model and layout. */
function checkSameJob(shards: readonly ShardFile[], first: ShardFile): void {
  const jobOf = (shard: ShardFile): unknown => ({
    ...shard.checkpoint.job,
    options: { ...shard.checkpoint.job.options, shard: shard.count },
    model: shard.checkpoint.model,
    total: shard.checkpoint.rows.total,
  });
  for (const shard of shards) {
    const difference = identityDifference(jobOf(first), jobOf(shard));
    if (difference) throw new ShardMergeError(`${shard.path} is of another job than ${first.path}: ${difference}`);
    const layouts = [first, shard].map((one) => one.checkpoint.layout);
    const layoutDifference = layouts.includes(null) ? undefined : identityDifference(layouts[0], layouts[1]);
    if (layoutDifference) {
      throw new ShardMergeError(`${shard.path} has other outputs than ${first.path}: ${layoutDifference}`);
    }
  }
}

/** Shards 0 … N-1, each once, whose row ranges follow each other from 0 to the input's end. */
function checkCoverage(shards: readonly ShardFile[], first: ShardFile): ShardFile[] {
  const byIndex = new Map<number, ShardFile>();
  for (const shard of shards) {
    const twin = byIndex.get(shard.index);
    if (twin) {
      throw new ShardMergeError(`shard ${shard.index}/${shard.count} is given twice: ${twin.path} and ${shard.path}`);
    }
    byIndex.set(shard.index, shard);
  }
  const missing = Array.from({ length: first.count }, (_, index) => index).filter((index) => !byIndex.has(index));
  if (missing.length > 0) {
    throw new ShardMergeError(
      `shard${missing.length > 1 ? 's' : ''} ${missing.map((index) => `${index}/${first.count}`).join(', ')} missing: every shard of ${first.count} is needed`,
    );
  }
  const ordered = [...byIndex.values()].sort((a, b) => a.index - b.index);
  let next = 0;
  for (const shard of ordered) {
    const { start, end } = shard.checkpoint.rows;
    if (start !== next) {
      throw new ShardMergeError(
        `shard ${shard.index}/${shard.count} covers rows ${start}–${end}, but the shards before it end at row ${next}`,
      );
    }
    next = end;
  }
  if (next !== first.checkpoint.rows.total) {
    throw new ShardMergeError(`the shards cover rows 0–${next} of ${first.checkpoint.rows.total}`);
  }
  return ordered;
}

/** Writes the files one after another into `target` (CSV: the first header only); returns the bytes. */
async function concatenate(
  target: string,
  shards: readonly ShardFile[],
  csv: boolean,
  fileOf: (path: string) => string = (path) => path,
): Promise<number> {
  const handle = await open(target, 'w');
  let bytes = 0;
  try {
    for (const [index, shard] of shards.entries()) {
      const source = fileOf(shard.path);
      bytes += await appendFrom(handle, bytes, source, csv && index > 0 ? await csvHeaderLength(source) : 0);
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  return bytes;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
