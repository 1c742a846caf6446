import { basename, dirname, extname, join, resolve } from 'node:path';
import { UsageError } from '../core/errors.js';

export const OUTPUT_FORMATS = ['jsonl', 'csv', 'parquet'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** Slice `index` (0-based) of `count` contiguous slices of the input's rows. */
export interface Shard {
  readonly index: number;
  readonly count: number;
}

/** Every file a job writes, all beside its output. */
export interface JobPaths {
  /** Where the finished output appears, renamed into place whole. */
  readonly output: string;
  readonly errors: string;
  readonly checkpoint: string;
  /** The work folder: the output and errors so far, the open segment; removed when finished. */
  readonly partial: string;
  /** The output so far: every committed segment, appended in row order. */
  readonly committed: string;
  /** The segment being written since the last commit. */
  readonly segment: string;
  /** The errors so far, in row order. */
  readonly partialErrors: string;
  /** The finished output before its rename (Parquet: rewritten from the committed records). */
  readonly assembled: string;
}

export function jobPaths(output: string): JobPaths {
  const absolute = resolve(output);
  const partial = `${absolute}.partial`;
  return {
    output: absolute,
    errors: errorsPath(absolute),
    checkpoint: checkpointPath(absolute),
    partial,
    committed: join(partial, 'committed'),
    segment: join(partial, 'segment'),
    partialErrors: join(partial, 'errors.jsonl'),
    assembled: join(partial, `assembled${extname(absolute)}`),
  };
}

export const errorsPath = (output: string): string => `${output}.errors.jsonl`;
export const checkpointPath = (output: string): string => `${output}.checkpoint.json`;

/** `--format` when given, else the output's extension, else JSON Lines. */
export function outputFormatOf(output: string, format: string | undefined): OutputFormat {
  if (format !== undefined) {
    if (!(OUTPUT_FORMATS as readonly string[]).includes(format)) {
      throw new UsageError(`--format ${format}: expected one of ${OUTPUT_FORMATS.join(', ')}`);
    }
    return format as OutputFormat;
  }
  const extension = extname(output).toLowerCase();
  return extension === '.csv' ? 'csv' : extension === '.parquet' || extension === '.pq' ? 'parquet' : 'jsonl';
}

/** `I/N` with 0 ≤ I < N. */
export function parseShard(text: string): Shard {
  const match = /^(\d+)\/(\d+)$/.exec(text.trim());
  const index = Number(match?.[1]);
  const count = Number(match?.[2]);
  if (!match || !Number.isSafeInteger(count) || count < 1 || index >= count) {
    throw new UsageError(`--shard ${text}: expected I/N with 0 ≤ I < N, e.g. 0/4 for the first of 4 slices`);
  }
  return { index, count };
}

/** The rows of a shard: the I-th of N contiguous slices, sizes differing by at most one. */
export function shardRange(shard: Shard | undefined, total: number): { start: number; end: number } {
  if (!shard) return { start: 0, end: total };
  return {
    start: Math.floor((shard.index * total) / shard.count),
    end: Math.floor(((shard.index + 1) * total) / shard.count),
  };
}

/** `out.jsonl` → `out.shard-0-of-4.jsonl`; an output with no extension gets the suffix at its end. */
export function shardOutputPath(output: string, shard: Shard): string {
  const extension = extname(output);
  const stem = basename(output, extension);
  return join(dirname(output), `${stem}.shard-${shard.index}-of-${shard.count}${extension}`);
}
