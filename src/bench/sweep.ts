import type { ModelStatsJson } from '../metrics/model-statistics.js';
import type { LoadOptions } from './load-generator.js';
import { runLoad } from './load-generator.js';
import { payloadFromFile, randomPayload, type RequestPayload } from './payload.js';
import type { LoadLevel, PointResult, Protocol, ServerPoint, ServerSideFigures } from './report-types.js';
import { samplesFromStats } from './fit.js';
import type { BenchTarget } from './targets.js';

export interface SweepOptions {
  /** Each undefined axis keeps the server's current value. */
  readonly batchSizes?: readonly number[];
  readonly delaysUs?: readonly number[];
  readonly instances?: readonly number[];
  readonly levels: readonly LoadLevel[];
  readonly load: Omit<LoadOptions, 'level' | 'onWindow' | 'onMeasureStart'>;
  readonly protocol: Protocol;
  readonly clientBatch: number;
  readonly inputFile?: string;
  readonly onProgress?: (progress: SweepProgress) => void;
}

export interface SweepProgress {
  readonly server: ServerPoint;
  readonly level: LoadLevel;
  readonly pointIndex: number;
  readonly pointCount: number;
  readonly throughput?: number;
  readonly p99Ms?: number;
}

export interface BatchTimeSample {
  readonly batchSize: number;
  readonly ms: number;
  readonly count: number;
}

export interface SweepResult {
  readonly points: PointResult[];
  /**
   * Forward-pass time per batch size from the server's statistics: the lowest per-point mean,
   * over points that ran that batch size at least MIN_EXECUTIONS times. Under heavy load the
   * server's own HTTP work competes with the forward pass for cores; the least contended
   * point is the best estimate of what a batch costs.
   */
  readonly samples: BatchTimeSample[];
}

const MIN_EXECUTIONS = 10;

/**
 * Runs every load level at every server point of the cross product batch sizes × delays ×
 * instances, reading the server's statistics before and after each run so that each point
 * carries what the server itself formed (average batch, queue and compute time).
 */
export async function runSweep(target: BenchTarget, options: SweepOptions): Promise<SweepResult> {
  const current = await target.current();
  const serverPoints: ServerPoint[] = [];
  for (const instances of options.instances ?? [current.instances]) {
    for (const maxBatchSize of options.batchSizes ?? [current.maxBatchSize]) {
      for (const maxQueueDelayUs of options.delaysUs ?? [current.maxQueueDelayUs]) {
        serverPoints.push({ maxBatchSize, maxQueueDelayUs, instances });
      }
    }
  }
  const pointCount = serverPoints.length * options.levels.length;
  const points: PointResult[] = [];
  const fastest = new Map<number, BatchTimeSample>();
  for (const server of serverPoints) {
    await target.apply(server);
    const payload = await buildPayload(target, options);
    for (const level of options.levels) {
      const progress = { server, level, pointIndex: points.length, pointCount };
      options.onProgress?.(progress);
      // Read after the warm-up, so the server-side figures exclude it like the client's do.
      let before = await target.stats();
      const result = await runLoad(target.inferenceUrl, payload, {
        ...options.load,
        level,
        onMeasureStart: async () => {
          before = await target.stats();
        },
        onWindow: ({ throughput, p99Ms }) => options.onProgress?.({ ...progress, throughput, p99Ms }),
      });
      const after = await target.stats();
      for (const sample of samplesFromStats(before, after)) {
        const best = fastest.get(sample.batchSize);
        if (sample.count >= MIN_EXECUTIONS && (!best || sample.ms < best.ms)) fastest.set(sample.batchSize, sample);
      }
      points.push({
        server,
        load: level,
        clientBatch: options.clientBatch,
        durationSeconds: result.durationSeconds,
        requests: result.requests,
        throughput: result.throughput,
        itemsPerSecond: result.itemsPerSecond,
        latency: result.latency,
        errors: result.errors,
        errorCount: result.errorCount,
        stable: result.stable,
        windows: result.windows,
        serverSide: serverSideFigures(before, after),
      });
    }
  }
  return { points, samples: [...fastest.values()].sort((a, b) => a.batchSize - b.batchSize) };
}

async function buildPayload(target: BenchTarget, options: SweepOptions): Promise<RequestPayload> {
  const metadata = await target.metadata();
  return options.inputFile
    ? payloadFromFile(options.inputFile, metadata, options.protocol)
    : randomPayload(metadata, { protocol: options.protocol, clientBatch: options.clientBatch, seed: 1 });
}

/** What the server's statistics changed by while one point ran. */
export function serverSideFigures(before: ModelStatsJson, after: ModelStatsJson): ServerSideFigures {
  const delta = (pick: (stats: ModelStatsJson) => number): number => pick(after) - pick(before);
  const requests = delta((s) => s.inference_stats.success.count);
  const executions = delta((s) => s.execution_count);
  const inferences = delta((s) => s.inference_count);
  const computeNs = delta(
    (s) =>
      s.inference_stats.compute_input.ns + s.inference_stats.compute_infer.ns + s.inference_stats.compute_output.ns,
  );
  return {
    requests,
    inferences,
    executions,
    averageBatch: executions > 0 ? inferences / executions : 0,
    queueMsPerRequest: requests > 0 ? delta((s) => s.inference_stats.queue.ns) / requests / 1e6 : 0,
    computeMsPerRequest: requests > 0 ? computeNs / requests / 1e6 : 0,
  };
}
