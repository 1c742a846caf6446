import { open, readFile, rename } from 'node:fs/promises';
import type { Datatype } from '../core/datatypes.js';
import { CheckpointError } from '../core/errors.js';
import type { InputIdentity } from './dataset.js';
import type { OutputFormat, Shard } from './job-paths.js';

/** What produced an output: a checkpoint is resumed, and shards are merged, only when these agree. */
export interface JobIdentity {
  readonly archive: { readonly path: string; readonly size: number; readonly mtimeMs: number };
  readonly input: InputIdentity;
  readonly format: OutputFormat;
  /** The options that change what is written (not --batch-size or --instances, which change only speed). */
  readonly options: {
    readonly glob: string | null;
    readonly csvColumns: readonly string[] | null;
    readonly idColumn: string | null;
    readonly device: string | null;
    readonly shard: Shard | null;
  };
}

/** The first record's outputs by name, or "answer": every record of a job must look alike. */
export type OutputLayout =
  Readonly<Record<string, { readonly datatype: Datatype; readonly shape: readonly number[] }>> | 'answer';

/**
 * `<output>.checkpoint.json`, rewritten (write, fsync, rename) at each commit. `done` rows from
 * `rows.start` are written, in order: their records are the first `outputBytes` of the
 * committed output and their failures the first `errorsBytes` of the errors. After a crash
 * anything past those sizes is cut off and the rows after `done` run again. A finished job
 * keeps its checkpoint: it is what `predict merge` checks a shard against.
 */
export interface Checkpoint {
  readonly version: 1;
  /** `finishing`: every row is written and the files are being renamed into place. */
  readonly state: 'running' | 'finishing' | 'finished';
  readonly job: JobIdentity;
  /** The rows this job scores, `[start, end)` of the input's `total`. */
  readonly rows: { readonly start: number; readonly end: number; readonly total: number };
  readonly done: number;
  readonly records: number;
  readonly failed: number;
  readonly outputBytes: number;
  readonly errorsBytes: number;
  /** Null until the first record is written. */
  readonly layout: OutputLayout | null;
  /** When the job is finished: the model that scored it. */
  readonly model?: { readonly name: string; readonly version: string };
  readonly updatedAt: string;
}

/** The checkpoint at `path`, or undefined when there is none. */
export async function readCheckpoint(path: string): Promise<Checkpoint | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CheckpointError(`cannot read ${path}: ${(error as Error).message}`);
  }
  let parsed: Partial<Checkpoint>;
  try {
    parsed = JSON.parse(text) as Partial<Checkpoint>;
  } catch {
    throw new CheckpointError(`${path} is not JSON; remove it, or pass --force to start again`);
  }
  if (parsed.version !== 1 || !parsed.job || !parsed.rows || typeof parsed.done !== 'number') {
    throw new CheckpointError(`${path} is not a batchserve predict checkpoint (version 1)`);
  }
  return parsed as Checkpoint;
}

/** Replaces the checkpoint atomically: a reader sees the old one or the new one, whole. */
export async function writeCheckpoint(path: string, checkpoint: Checkpoint): Promise<void> {
  const temporary = `${path}.tmp`;
  const handle = await open(temporary, 'w');
  try {
    await handle.writeFile(`${JSON.stringify(checkpoint, null, 2)}\n`);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, path);
}

/** The first place two job identities differ, as `key: was → now`, or undefined when they agree. */
export function identityDifference(was: unknown, now: unknown, path = ''): string | undefined {
  if (typeof was === 'object' && was !== null && typeof now === 'object' && now !== null) {
    const keys = new Set([...Object.keys(was), ...Object.keys(now)]);
    for (const key of keys) {
      const difference = identityDifference(
        (was as Record<string, unknown>)[key],
        (now as Record<string, unknown>)[key],
        path === '' ? key : `${path}.${key}`,
      );
      if (difference) return difference;
    }
    return undefined;
  }
  return was === now ? undefined : `${path}: ${JSON.stringify(was) ?? 'none'} → ${JSON.stringify(now) ?? 'none'}`;
}
