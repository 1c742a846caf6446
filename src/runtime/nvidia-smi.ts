import { execFile } from 'node:child_process';

/**
 * One GPU's figures from `nvidia-smi --query-gpu`, in base units. A figure the driver does not
 * report for this GPU (`[N/A]`, `[Not Supported]`) is undefined, never 0: an idle GPU and an
 * unknown one must read differently.
 */
export interface GpuSample {
  /** nvidia-smi's index: the physical order, which CUDA_VISIBLE_DEVICES may renumber. */
  readonly index: number;
  readonly uuid: string;
  readonly name: string;
  /** Share of the last sample period a kernel ran, 0–1. */
  readonly utilization: number | undefined;
  readonly memoryUsedBytes: number | undefined;
  readonly memoryTotalBytes: number | undefined;
  readonly powerWatts: number | undefined;
}

/** What one query found: the GPUs, a failure (a driver error, say) with its text, or no nvidia-smi at all. */
export type GpuReading =
  | { readonly kind: 'gpus'; readonly gpus: readonly GpuSample[] }
  | { readonly kind: 'failed'; readonly error: string }
  | { readonly kind: 'missing'; readonly error: string };

/** NVML's figures through its command-line front end: the fields in the order the parser reads them. */
export const GPU_QUERY_ARGS = [
  '--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw',
  '--format=csv,noheader,nounits',
] as const;

const MIB = 1024 * 1024;
const QUERY_TIMEOUT_MS = 5_000;

/**
 * Parses the query's output (csv, no header, no units: MiB, %, W). Any line that is not seven
 * fields with an integer index makes the whole reading a failure carrying the text, since
 * nvidia-smi prints its errors ("NVIDIA-SMI has failed because it couldn't communicate with
 * the NVIDIA driver…") on stdout.
 */
export function parseGpuQuery(text: string): GpuReading {
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean);
  const gpus: GpuSample[] = [];
  for (const line of lines) {
    const fields = line.split(',').map((field) => field.trim());
    const [index, uuid = '', name = '', utilization, memoryUsed, memoryTotal, power] = fields;
    if (fields.length !== 7 || !/^\d+$/.test(index ?? '')) return { kind: 'failed', error: firstLines(text) };
    const percent = figure(utilization);
    const usedMiB = figure(memoryUsed);
    const totalMiB = figure(memoryTotal);
    gpus.push({
      index: Number(index),
      uuid,
      name,
      utilization: percent === undefined ? undefined : percent / 100,
      memoryUsedBytes: usedMiB === undefined ? undefined : usedMiB * MIB,
      memoryTotalBytes: totalMiB === undefined ? undefined : totalMiB * MIB,
      powerWatts: figure(power),
    });
  }
  return { kind: 'gpus', gpus };
}

/**
 * Runs the query once. Never rejects: a missing binary or a failing driver is a reading too.
 * `signal` kills a query still running (a sampler that stops), so it cannot hold a closing process up.
 */
export function queryGpus(command = 'nvidia-smi', signal?: AbortSignal): Promise<GpuReading> {
  return new Promise((resolve) => {
    const options = { timeout: QUERY_TIMEOUT_MS, encoding: 'utf8' as const, ...(signal ? { signal } : {}) };
    execFile(command, GPU_QUERY_ARGS, options, (error, stdout, stderr) => {
      if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
        resolve({ kind: 'missing', error: `${command} not found` });
      } else if (error) {
        resolve({ kind: 'failed', error: firstLines(`${stdout}\n${stderr}`) || error.message });
      } else {
        resolve(parseGpuQuery(stdout));
      }
    });
  });
}

/** `[N/A]`, `[Not Supported]`, `[Unknown Error]` and the like: undefined. */
function figure(field: string | undefined): number | undefined {
  if (field === undefined || field.startsWith('[') || field === 'N/A') return undefined;
  const value = Number(field);
  return field !== '' && Number.isFinite(value) ? value : undefined;
}

/** An error text short enough for one log line or one table cell. */
function firstLines(text: string): string {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .slice(0, 2)
    .join(' ');
}
