/**
 * `--protocol http-json`: the same load and report against a server that does not speak v2 —
 * the Flask app batchserve is to replace, say — so the two can be put side by side. Bench
 * knows nothing of such a server: the `--input` file's bytes are POSTed as they are to the URL
 * given, any 2xx answer is a success, and there are no metadata, no statistics and no settings
 * to sweep. Throughput and latency are measured as for any other protocol; the batching fit
 * is not, for want of the per-batch-size timings a v2 server reports.
 */
import { readFile } from 'node:fs/promises';
import { InputFileError, UsageError } from '../core/errors.js';
import { runLoad, type LoadOptions } from './load-generator.js';
import type { RequestPayload } from './payload.js';
import type { LoadLevel, PointResult } from './report-types.js';
import { windowVariation } from './stability.js';

export interface PlainHttpOptions {
  /** Where every request goes: any http:// or https:// URL, path and query included. */
  readonly url: string;
  readonly inputFile: string;
  readonly contentType: string;
  /** Rows one body carries, for items per second: the body's format is the server's own. */
  readonly rows: number;
  readonly levels: readonly LoadLevel[];
  readonly load: Omit<LoadOptions, 'level' | 'onWindow' | 'onMeasureStart'>;
  readonly onProgress?: (progress: PlainHttpProgress) => void;
}

export interface PlainHttpProgress {
  readonly level: LoadLevel;
  readonly pointIndex: number;
  readonly pointCount: number;
  readonly throughput?: number;
  readonly p99Ms?: number;
}

/** The file as one POST to `url`, sent unchanged with every request. */
export async function plainHttpPayload(
  url: string,
  file: string,
  contentType: string,
  rows: number,
): Promise<RequestPayload> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    throw new UsageError(`--protocol http-json needs an http:// or https:// URL, got ${url}`);
  }
  if (target.protocol !== 'http:' && target.protocol !== 'https:') {
    throw new UsageError(`--protocol http-json needs an http:// or https:// URL, got ${url}`);
  }
  let body: Buffer;
  try {
    body = await readFile(file);
  } catch (error) {
    throw new InputFileError(`cannot read the input file ${file}: ${(error as Error).message}`, { cause: error });
  }
  return {
    protocol: 'http-json',
    path: `${target.pathname}${target.search}`,
    headers: { 'content-type': contentType },
    body,
    rows,
  };
}

/** One point per load level, in the order given; the points carry no server settings or statistics. */
export async function runPlainHttp(options: PlainHttpOptions): Promise<PointResult[]> {
  const payload = await plainHttpPayload(options.url, options.inputFile, options.contentType, options.rows);
  const points: PointResult[] = [];
  for (const level of options.levels) {
    const progress: PlainHttpProgress = { level, pointIndex: points.length, pointCount: options.levels.length };
    options.onProgress?.(progress);
    const result = await runLoad(options.url, payload, {
      ...options.load,
      level,
      onWindow: ({ throughput, p99Ms }) => options.onProgress?.({ ...progress, throughput, p99Ms }),
    });
    points.push({
      load: level,
      clientBatch: options.rows,
      durationSeconds: result.durationSeconds,
      requests: result.requests,
      throughput: result.throughput,
      itemsPerSecond: result.itemsPerSecond,
      latency: result.latency,
      errors: result.errors,
      errorCount: result.errorCount,
      stable: result.stable,
      windows: result.windows,
      variation: windowVariation(result.fullWindows, options.load.minWindows, options.load.stabilityPct),
    });
  }
  return points;
}
