/**
 * The bench's results, as written to `--json FILE` (schemaVersion 1, documented
 * in docs/bench.md): every figure the table, CSV, Markdown and HTML reports show comes from here.
 * Times are milliseconds unless a name says otherwise.
 */

/**
 * REST: v2 binary or JSON tensors, TorchServe bodies. gRPC: unary ModelInfer, or
 * ModelStreamInfer. http-json: a file POSTed as it is to any URL (a server that is not v2).
 */
export type Protocol = 'v2-binary' | 'v2-json' | 'torchserve' | 'grpc' | 'grpc-stream' | 'http-json';
export type Arrival = 'poisson' | 'constant';

/** Closed loop: a fixed number of requests in flight. Open loop: a fixed arrival rate. */
export type LoadLevel =
  | { readonly kind: 'concurrency'; readonly concurrency: number }
  | { readonly kind: 'rate'; readonly rate: number; readonly arrival: Arrival };

/** The server configuration one sweep point ran under. */
export interface ServerPoint {
  readonly maxBatchSize: number;
  /** Microseconds, or `auto`: adaptive batching. */
  readonly maxQueueDelayUs: number | 'auto';
  readonly instances: number;
}

export interface LatencySummary {
  readonly count: number;
  readonly mean: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
}

/** What the server's statistics say happened during a point (deltas of /stats). */
export interface ServerSideFigures {
  readonly requests: number;
  readonly inferences: number;
  readonly executions: number;
  /** Rows per forward pass the server actually formed. */
  readonly averageBatch: number;
  readonly queueMsPerRequest: number;
  readonly computeMsPerRequest: number;
  /** The model version whose statistics these are: the one that answered most of the point's requests. */
  readonly version?: string;
  /**
   * Response cache hits ÷ lookups (the statistics' cache_hit and cache_miss counts over the
   * point), 0–1; absent when the model made no lookups (its response cache is off).
   */
  readonly cacheHitRatio?: number;
  /**
   * The share of the point's duration the instances spent computing (their batches' compute
   * time ÷ duration × instances), 0–1: how busy the device was. Absent where not measured.
   */
  readonly busyShare?: number;
}

/** One GPU's use while a point was measured, from nvidia-smi (a local target on a machine with an NVIDIA GPU). */
export interface GpuUse {
  /** nvidia-smi's index. */
  readonly gpu: number;
  readonly name: string;
  /** Mean of the utilisation samples, 0–1; absent when the driver reports none (a MIG instance). */
  readonly utilization?: number;
  /** The most memory in use in any sample, bytes. */
  readonly memoryUsedBytes?: number;
  readonly samples: number;
}

export interface PointResult {
  /** Absent for `--protocol http-json`: bench cannot see a plain HTTP server's settings. */
  readonly server?: ServerPoint;
  readonly load: LoadLevel;
  /** Rows each request carried (`--client-batch`). */
  readonly clientBatch: number;
  readonly durationSeconds: number;
  /** Completed requests (any status) in the measured windows. */
  readonly requests: number;
  readonly throughput: number;
  readonly itemsPerSecond: number;
  readonly latency: LatencySummary;
  /**
   * By kind: an HTTP status ("503"), a gRPC status name ("UNAVAILABLE"), "error_message" (a
   * failed grpc-stream answer), "connection", "timeout", "other".
   */
  readonly errors: Readonly<Record<string, number>>;
  readonly errorCount: number;
  /** Whether the last windows agreed within the stability rule. */
  readonly stable: boolean;
  readonly windows: number;
  /** What `stable` was judged on: how far the last windows strayed from their mean. */
  readonly variation?: WindowVariation;
  readonly serverSide?: ServerSideFigures;
  /**
   * Successful answers per model version they named (X-Model-Version, or gRPC's
   * x-model-version / model_version); absent when no answer named one.
   */
  readonly versions?: Readonly<Record<string, number>>;
  /** Each GPU's use during the measured windows; absent for a remote target or a machine without an NVIDIA GPU. */
  readonly gpus?: readonly GpuUse[];
  /**
   * With the load's `keepHistogram` (benchmarks that pool several runs; the CLI never asks):
   * the successful requests' latencies, µs, as HdrHistogram's compressed base64.
   */
  readonly latencyHistogram?: string;
}

/**
 * The stability rule's evidence: over the last `compared` full windows, the largest distance
 * of a window's throughput and of its p99 from their mean, in % of the mean.
 */
export interface WindowVariation {
  /** Full windows compared: the rule's count, or fewer when the run ended first. */
  readonly compared: number;
  /** Windows the rule wants (3). */
  readonly required: number;
  /** `--stability`: the most either figure may stray, %. */
  readonly limitPct: number;
  readonly throughputPct: number;
  readonly p99Pct: number;
  /** Completions per second, errors included; absent in reports written before it was compared. */
  readonly completedPct?: number;
  /**
   * Of the compared windows, those in which no request completed: they measured nothing, so
   * the rule never calls them stable. Absent in reports written before it was counted.
   */
  readonly emptyWindows?: number;
}

/**
 * Why a fitted line cannot describe batching, whatever its R²: a pass cannot cost less than
 * nothing (c < 0), and a time per pass that does not grow with B (m ≤ 0) has no 1 + c/m.
 */
export type FitFailure = 'c < 0' | 'm ≤ 0';

/** T(B) = c + m·B fitted by least squares over per-batch-size mean forward-pass times. */
export interface BatchCostFit {
  readonly c: number;
  readonly m: number;
  readonly r2: number;
  /** The most batching can speed things up: 1 + c/m; absent when the fit failed. */
  readonly ceiling?: number;
  /** A failed fit: no ceiling and no predicted speedup come from it. */
  readonly failure?: FitFailure;
  /** R² below 0.9: the linear model explains the timings poorly. */
  readonly poorFit: boolean;
  readonly samples: readonly { readonly batchSize: number; readonly ms: number; readonly count: number }[];
}

/** Which of the report's fits predicts its speedups: `fit` (the server's) or `inProcess`. */
export type SpeedupFit = 'fit' | 'inProcess';

export interface SpeedupRow {
  readonly batchSize: number;
  /** S(B) = B(c+m)/(c+Bm) from the fit; absent when the fit failed. */
  readonly predicted?: number;
  /** S at the fullest batch the load could form (concurrency × client batch ÷ instances); absent when the fit failed. */
  readonly achievableBound?: number;
  /** Best throughput at this max_batch_size ÷ best at max_batch_size 1; absent without a B=1 point. */
  readonly measured?: number;
}

export interface Recommendation {
  readonly sloP99Ms: number;
  readonly point: PointResult;
  /** To paste into model-config.yaml. */
  readonly snippet: string;
}

/**
 * `--plan`: how many replicas carry `targetRate` inside the p99 budget, from the highest
 * open-loop rate one replica sustained, and the queue depth to give the autoscaler.
 */
export interface CapacityPlan {
  /** Requests per second to serve in all. */
  readonly targetRate: number;
  readonly sloP99Ms: number;
  /** The open-loop point at the highest rate one replica sustained (plan.ts `sustains`). */
  readonly point: PointResult;
  /** Its offered rate, requests per second. */
  readonly replicaRate: number;
  /** Rows queued or running on the replica there (Little's law on its statistics). */
  readonly pendingRows: number;
  /** ceil(targetRate / replicaRate). */
  readonly replicas: number;
  /** For `deploy --target-queue-depth`: the KEDA threshold on sum(batchserve_pending_rows). */
  readonly targetQueueDepth: number;
  /** Each configuration's rate search: the highest rate it sustained (null: none) over its probes. */
  readonly searches: readonly RateSearchResult[];
}

export interface RateSearchResult {
  readonly server: ServerPoint;
  readonly sustainedRate: number | null;
  /** Rates tried, in order, with whether each was sustained. */
  readonly probes: readonly { readonly rate: number; readonly sustained: boolean }[];
}

export interface BenchReport {
  readonly schemaVersion: 1;
  readonly createdAt: string;
  readonly environment: {
    readonly batchserve: string;
    readonly node: string;
    readonly onnxruntime: string;
    readonly cpus: number;
    readonly cpuModel: string;
    readonly platform: string;
  };
  readonly target: {
    readonly url?: string;
    readonly archive?: string;
    readonly model: string;
    readonly protocol: Protocol;
  };
  readonly points: readonly PointResult[];
  /** From the server's per-batch-size compute_infer statistics. */
  readonly fit?: BatchCostFit;
  /** `--in-process`: the curve straight on the session, no HTTP. */
  readonly inProcess?: BatchCostFit;
  /** The fit the speedup rows' predictions come from. */
  readonly speedupFit?: SpeedupFit;
  readonly speedup: readonly SpeedupRow[];
  /** `--slo-p99`, ms: the budget the recommendation and the plan were judged against. */
  readonly sloP99Ms?: number;
  readonly recommendation?: Recommendation;
  readonly plan?: CapacityPlan;
  /** Loud notes: errors, unstable points, a poor fit. */
  readonly warnings: readonly string[];
}
