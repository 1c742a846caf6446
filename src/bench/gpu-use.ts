import { GpuSampler } from '../runtime/gpu-sampler.js';
import { queryGpus, type GpuSample } from '../runtime/nvidia-smi.js';
import type { GpuUse } from './report-types.js';

export interface GpuWatchOptions {
  /** The nvidia-smi to run (default: `nvidia-smi` on PATH). */
  readonly command?: string;
  /** Between samples; nvidia-smi's own utilisation figure covers up to the last second. */
  readonly intervalMs?: number;
}

const DEFAULT_INTERVAL_MS = 1_000;
const LOOPBACK = new Set(['localhost', '127.0.0.1', '::1', '[::1]', '0.0.0.0']);

/** A server on this machine: the GPUs nvidia-smi shows here are the ones it runs on. */
export function isLocalUrl(url: string): boolean {
  try {
    const { hostname } = new URL(url);
    return LOOPBACK.has(hostname) || hostname.startsWith('127.');
  } catch {
    return false;
  }
}

/**
 * Samples the GPUs while each sweep point is measured, so the report shows whether batching
 * filled them. `open` answers undefined, and the report has no GPU column, unless the target
 * is local and nvidia-smi shows at least one GPU.
 */
export class GpuWatch {
  readonly #sampler: GpuSampler;
  #readings: (readonly GpuSample[])[] = [];

  private constructor(options: GpuWatchOptions) {
    this.#sampler = new GpuSampler({
      ...(options.command ? { command: options.command } : {}),
      intervalMs: options.intervalMs ?? DEFAULT_INTERVAL_MS,
      onReading: (gpus) => {
        if (gpus) this.#readings.push(gpus);
      },
    });
  }

  static async open(targetUrl: string, options: GpuWatchOptions = {}): Promise<GpuWatch | undefined> {
    if (!isLocalUrl(targetUrl)) return undefined;
    const reading = await queryGpus(options.command);
    return reading.kind === 'gpus' && reading.gpus.length > 0 ? new GpuWatch(options) : undefined;
  }

  /** Starts a point's samples (the first at once). */
  start(): void {
    this.#sampler.stop();
    this.#readings = [];
    this.#sampler.start();
  }

  /** Stops sampling, keeping the point's samples. */
  stop(): void {
    this.#sampler.stop();
  }

  /** Ends the point: each GPU's mean utilisation and peak memory over its samples. */
  finish(): GpuUse[] {
    this.stop();
    return summarize(this.#readings);
  }
}

export function summarize(readings: readonly (readonly GpuSample[])[]): GpuUse[] {
  const byIndex = new Map<number, GpuSample[]>();
  for (const gpus of readings) for (const gpu of gpus) byIndex.set(gpu.index, [...(byIndex.get(gpu.index) ?? []), gpu]);
  return [...byIndex].map(([index, samples]) => {
    const utilizations = samples.flatMap((sample) => (sample.utilization === undefined ? [] : [sample.utilization]));
    const memory = samples.flatMap((sample) => (sample.memoryUsedBytes === undefined ? [] : [sample.memoryUsedBytes]));
    return {
      gpu: index,
      name: samples[0]?.name ?? '',
      ...(utilizations.length > 0
        ? { utilization: roundRatio(utilizations.reduce((sum, value) => sum + value, 0) / utilizations.length) }
        : {}),
      ...(memory.length > 0 ? { memoryUsedBytes: Math.max(...memory) } : {}),
      samples: samples.length,
    };
  });
}

/** nvidia-smi reports whole percents: four decimals keep every figure and drop the sum's rounding noise. */
function roundRatio(ratio: number): number {
  return Math.round(ratio * 1e4) / 1e4;
}
