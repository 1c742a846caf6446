/**
 * A realistic bench report for tests: resnet18 on a 16-core machine, swept over
 * max_batch_size 1, 8, 16, two instance counts and closed- and open-loop loads. Forward passes
 * cost about 2 ms + 0.5 ms per row, so batching can speed things up at most 5×.
 *
 * Worth knowing when asserting on it, with a p99 objective of 25 ms:
 * - the highest throughput (B=16 d=2ms i=2, c=32) had a connection error, so the
 *   recommendation is B=16 d=2ms i=2, c=8 (1249 req/s, p99 8.1 ms);
 * - B=1 d=0 i=1, c=32 overflowed the queue (503×12); B=16 d=2ms i=1, c=32 was not stable.
 */
import { fitBatchCost, recommend, speedupTable } from '../../src/bench/fit.js';
import type { BatchCostFit, BenchReport, LoadLevel, PointResult } from '../../src/bench/report-types.js';

export const SAMPLE_SLO_P99_MS = 25;

const SERVER_C_MS = 2;
const SERVER_M_MS = 0.5;

export interface PointFigures {
  readonly throughput: number;
  readonly p50: number;
  readonly p99: number;
  /** Rows per forward pass the server formed. */
  readonly averageBatch: number;
  readonly errors?: Readonly<Record<string, number>>;
  readonly stable?: boolean;
  readonly clientBatch?: number;
}

/** A point whose secondary figures (p90, p99.9, counts, server side) follow from the main ones. */
export function samplePoint(
  [maxBatchSize, maxQueueDelayUs, instances]: readonly [number, number, number],
  load: LoadLevel,
  figures: PointFigures,
): PointResult {
  const { throughput, p50, p99, averageBatch, errors = {}, stable = true, clientBatch = 1 } = figures;
  const durationSeconds = 10;
  const served = Math.round(throughput * durationSeconds);
  const errorCount = Object.values(errors).reduce((sum, n) => sum + n, 0);
  const computeMs = SERVER_C_MS + SERVER_M_MS * averageBatch;
  return {
    server: { maxBatchSize, maxQueueDelayUs, instances },
    load,
    clientBatch,
    durationSeconds,
    requests: served + errorCount,
    throughput,
    itemsPerSecond: throughput * clientBatch,
    latency: {
      count: served,
      mean: p50 * 1.06,
      p50,
      p90: p50 + (p99 - p50) * 0.6,
      p99,
      p999: p99 * 1.3,
      max: p99 * 1.7,
    },
    errors,
    errorCount,
    stable,
    windows: stable ? 4 : 6,
    serverSide: {
      requests: served,
      inferences: served * clientBatch,
      executions: Math.round((served * clientBatch) / averageBatch),
      averageBatch,
      queueMsPerRequest: Math.max(0, p50 - computeMs - 0.4),
      computeMsPerRequest: computeMs,
    },
  };
}

const closed = (concurrency: number): LoadLevel => ({ kind: 'concurrency', concurrency });

export const samplePoints: readonly PointResult[] = [
  samplePoint([1, 0, 1], closed(1), { throughput: 352.4, p50: 2.71, p99: 3.42, averageBatch: 1 }),
  samplePoint([1, 0, 1], closed(8), { throughput: 396.1, p50: 20.1, p99: 24.9, averageBatch: 1 }),
  samplePoint([1, 0, 1], closed(32), { throughput: 398, p50: 79.8, p99: 96.3, averageBatch: 1, errors: { '503': 12 } }),
  samplePoint([8, 2000, 1], closed(1), { throughput: 221.7, p50: 4.48, p99: 5.1, averageBatch: 1 }),
  samplePoint([8, 2000, 1], closed(8), { throughput: 1142.9, p50: 6.9, p99: 9.8, averageBatch: 7.6 }),
  samplePoint([8, 2000, 1], closed(32), { throughput: 1318.4, p50: 23.6, p99: 31.2, averageBatch: 8 }),
  samplePoint([16, 2000, 1], closed(1), { throughput: 220.9, p50: 4.49, p99: 5.2, averageBatch: 1 }),
  samplePoint([16, 2000, 1], closed(8), { throughput: 1176.5, p50: 6.7, p99: 9.5, averageBatch: 7.8 }),
  samplePoint([16, 2000, 1], closed(32), {
    throughput: 1561.2,
    p50: 19.9,
    p99: 26.4,
    averageBatch: 15.4,
    stable: false,
  }),
  samplePoint(
    [16, 2000, 1],
    { kind: 'rate', rate: 1000, arrival: 'poisson' },
    { throughput: 998.7, p50: 5.9, p99: 11.2, averageBatch: 5.1 },
  ),
  samplePoint([16, 2000, 2], closed(8), { throughput: 1249, p50: 6.2, p99: 8.1, averageBatch: 3.9 }),
  samplePoint([16, 2000, 2], closed(32), {
    throughput: 1722.3,
    p50: 17.8,
    p99: 21,
    averageBatch: 14.6,
    errors: { connection: 1 },
  }),
];

/** Mean compute_infer per batch size as the server's statistics gave them. */
export const sampleServerSamples = [
  { batchSize: 1, ms: 2.53, count: 9400 },
  { batchSize: 2, ms: 2.98, count: 310 },
  { batchSize: 4, ms: 4.02, count: 820 },
  { batchSize: 8, ms: 6.01, count: 4200 },
  { batchSize: 12, ms: 7.97, count: 930 },
  { batchSize: 16, ms: 10.04, count: 3100 },
] as const;

/** `--in-process`: no HTTP, so a smaller fixed cost per pass. */
export const sampleInProcessSamples = [
  { batchSize: 1, ms: 2.1, count: 200 },
  { batchSize: 2, ms: 2.57, count: 200 },
  { batchSize: 4, ms: 3.55, count: 200 },
  { batchSize: 8, ms: 5.52, count: 200 },
  { batchSize: 16, ms: 9.45, count: 200 },
  { batchSize: 32, ms: 17.3, count: 100 },
] as const;

function fitted(samples: readonly BatchCostFit['samples'][number][]): BatchCostFit {
  const fit = fitBatchCost(samples);
  if (!fit) throw new Error('the sample timings span several batch sizes');
  return fit;
}

const fit = fitted(sampleServerSamples);
const recommendation = recommend(samplePoints, SAMPLE_SLO_P99_MS);

export const sampleReport: BenchReport = {
  schemaVersion: 1,
  createdAt: '2025-03-14T09:26:53.000Z',
  environment: {
    batchserve: '0.1.0',
    node: 'v20.20.0',
    onnxruntime: '1.30.0',
    cpus: 16,
    cpuModel: 'AMD EPYC 7763 64-Core Processor',
    platform: 'linux-x64',
  },
  target: { url: 'http://127.0.0.1:8000', model: 'resnet18', protocol: 'v2-binary' },
  points: samplePoints,
  fit,
  inProcess: fitted(sampleInProcessSamples),
  speedupFit: 'fit',
  speedup: speedupTable(fit, samplePoints),
  sloP99Ms: SAMPLE_SLO_P99_MS,
  ...(recommendation ? { recommendation } : {}),
  warnings: [
    'B=1 d=0 i=1, c=32: 12 errors (503×12)',
    'B=16 d=2ms i=2, c=32: 1 error (connection×1)',
    'B=16 d=2ms i=1, c=32: not stable after 6 windows (the last two differed by 14%)',
  ],
};
