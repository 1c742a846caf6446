import { Gauge, type Registry } from 'prom-client';
import { GpuSampler } from '../runtime/gpu-sampler.js';
import type { GpuSample } from '../runtime/nvidia-smi.js';

export interface GpuMetricsOptions {
  /** The nvidia-smi to run (default: `nvidia-smi` on PATH). */
  readonly command?: string;
  /** Time between samples; 0 turns GPU metrics off. */
  readonly intervalMs: number;
  readonly log?: (message: string) => void;
}

/** Devices whose instances run on an NVIDIA GPU, with their CUDA ordinal (WebGPU's adapter taken as the first). */
const GPU_DEVICE = /^(?:(?:cuda|tensorrt)(?::(\d+))?|webgpu)$/;

/**
 * Per-GPU gauges sampled from nvidia-smi while some loaded version has an instance on a GPU,
 * labelled `gpu` (nvidia-smi's index) and `models`: the sorted `model:version` names placed on
 * it, comma-separated, so one series per GPU sums correctly and `models=~".*resnet:1.*"`
 * finds a model's GPU. The gauges join the registry at the first reading with a GPU, so a
 * machine without one exports no empty families.
 */
export class GpuMetrics {
  readonly #registry: Registry;
  readonly #gauges = {
    utilization: gpuGauge(
      'batchserve_gpu_utilization',
      "Share (0–1) of nvidia-smi's last sample period in which a kernel ran on the GPU, in ratio.",
    ),
    memoryUsed: gpuGauge('batchserve_gpu_memory_used_bytes', 'GPU memory in use, all processes, in bytes.'),
    memoryTotal: gpuGauge('batchserve_gpu_memory_total_bytes', 'GPU memory in all, in bytes.'),
    power: gpuGauge('batchserve_gpu_power_watts', 'Power the GPU draws, in watts.'),
  };
  #registered = false;
  /** `model:version` → the CUDA ordinals of its instances' GPUs. */
  readonly #placements = new Map<string, readonly number[]>();
  /** nvidia-smi index → the `models` label of its series now. */
  readonly #series = new Map<number, string>();
  readonly #sampler: GpuSampler | undefined;

  constructor(registry: Registry, options: GpuMetricsOptions) {
    this.#registry = registry;
    this.#sampler =
      options.intervalMs > 0
        ? new GpuSampler({
            ...(options.command ? { command: options.command } : {}),
            intervalMs: options.intervalMs,
            onReading: (gpus) => this.#record(gpus),
            ...(options.log ? { log: options.log } : {}),
          })
        : undefined;
  }

  /** A version's instances now run on `devices` (config device names); sampling starts with the first GPU one. */
  placed(model: string, version: string, devices: readonly string[]): void {
    const ordinals = [...new Set(devices.flatMap(cudaOrdinal))];
    const key = `${model}:${version}`;
    if (ordinals.length > 0) this.#placements.set(key, ordinals);
    else this.#placements.delete(key);
    this.#follow();
  }

  removed(model: string, version: string): void {
    this.#placements.delete(`${model}:${version}`);
    this.#follow();
  }

  close(): void {
    this.#sampler?.stop();
  }

  #follow(): void {
    if (this.#placements.size > 0) {
      this.#sampler?.start();
    } else {
      this.#sampler?.stop();
      this.#record(undefined);
    }
  }

  /** Sets every GPU's series; removes them all when the reading failed, as stale values would read as live. */
  #record(gpus: readonly GpuSample[] | undefined): void {
    if (gpus === undefined || gpus.length === 0) {
      for (const index of this.#series.keys()) this.#remove(index);
      return;
    }
    if (!this.#registered) {
      for (const gauge of Object.values(this.#gauges)) this.#registry.registerMetric(gauge);
      this.#registered = true;
    }
    const ordinalIndex = cudaIndexMap(gpus);
    for (const gpu of gpus) {
      const models = [...this.#placements]
        .filter(([, ordinals]) => ordinals.some((ordinal) => ordinalIndex(ordinal) === gpu.index))
        .map(([key]) => key)
        .sort()
        .join(',');
      if (this.#series.get(gpu.index) !== models) this.#remove(gpu.index);
      this.#series.set(gpu.index, models);
      const labels = { gpu: String(gpu.index), models };
      this.#set(this.#gauges.utilization, labels, gpu.utilization);
      this.#set(this.#gauges.memoryUsed, labels, gpu.memoryUsedBytes);
      this.#set(this.#gauges.memoryTotal, labels, gpu.memoryTotalBytes);
      this.#set(this.#gauges.power, labels, gpu.powerWatts);
    }
  }

  /** A figure the driver does not report has no series, rather than a 0 that reads as idle. */
  #set(gauge: Gauge, labels: { gpu: string; models: string }, value: number | undefined): void {
    if (value === undefined) gauge.remove(labels);
    else gauge.set(labels, value);
  }

  #remove(index: number): void {
    const models = this.#series.get(index);
    if (models === undefined) return;
    for (const gauge of Object.values(this.#gauges)) gauge.remove({ gpu: String(index), models });
    this.#series.delete(index);
  }
}

function gpuGauge(name: string, help: string): Gauge {
  return new Gauge({ name, help, labelNames: ['gpu', 'models'], registers: [] });
}

/** The CUDA ordinal a device runs on: `cuda:1` → [1], `webgpu` → [0], `cpu` → []. */
export function cudaOrdinal(device: string): number[] {
  const match = GPU_DEVICE.exec(device);
  return match ? [Number(match[1] ?? 0)] : [];
}

/**
 * CUDA ordinal → nvidia-smi index. CUDA numbers the GPUs CUDA_VISIBLE_DEVICES lists, in its
 * order, by index or by UUID (or a UUID's prefix); nvidia-smi always numbers all of them.
 */
export function cudaIndexMap(
  gpus: readonly Pick<GpuSample, 'index' | 'uuid'>[],
  visible = process.env.CUDA_VISIBLE_DEVICES,
): (ordinal: number) => number | undefined {
  if (visible === undefined || visible.trim() === '') return (ordinal) => ordinal;
  const entries = visible.split(',').map((entry) => entry.trim());
  return (ordinal) => {
    const entry = entries[ordinal];
    if (entry === undefined) return undefined;
    if (/^\d+$/.test(entry)) return Number(entry);
    return gpus.find((gpu) => gpu.uuid.startsWith(entry))?.index;
  };
}
