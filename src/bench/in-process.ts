import { pathInside } from '../core/entry-name.js';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unpackArchive } from '../archive/extract.js';
import { readArchiveContents } from '../archive/read.js';
import { openArchive } from '../archive/source.js';
import { servedModelFile } from '../archive/served-model.js';
import { reconcileWithModel } from '../runtime/reconcile.js';
import { DEFAULT_SIMULATED_DEVICE, SIMULATED_DEVICE, SimulatedSession } from '../runtime/simulated-device.js';
import { UsageError } from '../core/errors.js';
import { createSession, readSignature } from '../runtime/session.js';
import { syntheticFeeds, type TensorMap } from '../handlers/ort-tensors.js';
import type { TensorSpec } from '../core/tensors.js';

export interface InProcessOptions {
  /** Default: 1, 2, 4, … up to the archive's max_batch_size. */
  readonly batchSizes?: readonly number[];
  /** Rounds over every batch size; each batch size's time is the median of its rounds. */
  readonly rounds: number;
  /** Timed forward passes per batch size in each round. */
  readonly iterations: number;
  readonly warmupIterations: number;
  readonly device?: string;
  /**
   * Milliseconds from some origin; default the wall clock. A benchmark on a shared machine can
   * pass the process's CPU time, which other work's load disturbs far less.
   */
  readonly clock?: () => number;
}

export interface InProcessSample {
  readonly batchSize: number;
  /** Mean forward-pass time, the quantity the server's compute_infer statistics count. */
  readonly ms: number;
  readonly count: number;
}

/**
 * The model's own batching curve with no HTTP and no batcher: T(B) for each batch size,
 * straight on an onnxruntime session opened as the server would (same runtime options).
 * This is the limit the server is judged against.
 */
export async function measureInProcess(archivePath: string, options: InProcessOptions): Promise<InProcessSample[]> {
  const workDir = await mkdtemp(join(tmpdir(), 'batchserve-inprocess-'));
  try {
    await unpackArchive(archivePath, join(workDir, 'model'));
    const source = await openArchive(join(workDir, 'model'));
    const { manifest, config: stored } = await readArchiveContents(source).finally(() => source.close());
    const device = options.device ?? stored.instances[0]?.device ?? 'cpu';
    // The file the server would load on this device: an --optimize archive is timed optimised.
    const modelPath = pathInside(join(workDir, 'model'), servedModelFile(manifest, device).file, 'the model file');
    const opened = await createSession(await readFile(modelPath), { runtime: stored.runtime, device });
    let session = opened;
    try {
      const config = reconcileWithModel(stored, readSignature(opened, modelPath), archivePath);
      // The simulated accelerator is timed as served: its passes, not the CPU's identity graph.
      if (device === SIMULATED_DEVICE) {
        const cost = stored.simulated_device ?? DEFAULT_SIMULATED_DEVICE;
        session = new SimulatedSession(opened, cost, config.outputs) as unknown as typeof opened;
      }
      if (config.max_batch_size === 0) {
        throw new UsageError(
          `model ${manifest.model.modelName} does not batch (max_batch_size 0): no curve to measure`,
        );
      }
      const sizes = options.batchSizes ?? powersOfTwoUpTo(config.max_batch_size);
      const feedsBySize = sizes.map((batchSize) => randomFeeds(config.inputs, batchSize));
      for (const feeds of feedsBySize) for (let i = 0; i < options.warmupIterations; i++) await session.run(feeds);
      // Rounds interleave the batch sizes, so drift in clock speed or load hits all of them alike.
      const rounds: number[][] = sizes.map(() => []);
      const clock = options.clock ?? wallClockMs;
      for (let round = 0; round < options.rounds; round++) {
        for (const [index, feeds] of feedsBySize.entries()) {
          const started = clock();
          for (let i = 0; i < options.iterations; i++) await session.run(feeds);
          rounds[index]?.push((clock() - started) / options.iterations);
        }
      }
      const samples = sizes.map((batchSize, index) => ({
        batchSize,
        ms: median(rounds[index] ?? []),
        count: options.rounds * options.iterations,
      }));
      return samples;
    } finally {
      await session.release();
    }
  } finally {
    await rm(workDir, { recursive: true, force: true });
  }
}

function wallClockMs(): number {
  return performance.now();
}

/** Random values in the float inputs, so timing is not flattered by all-zero data. */
function randomFeeds(inputs: readonly TensorSpec[], batchSize: number): TensorMap {
  const feeds = syntheticFeeds(inputs, batchSize);
  for (const tensor of Object.values(feeds)) {
    const data = tensor.data;
    if (data instanceof Float32Array) for (let i = 0; i < data.length; i++) data[i] = Math.random();
  }
  return feeds;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export function powersOfTwoUpTo(max: number): number[] {
  const sizes: number[] = [];
  for (let size = 1; size < max; size *= 2) sizes.push(size);
  return [...sizes, max];
}
