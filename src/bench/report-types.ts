/**
 * The bench's results, as written to `--json FILE` (schemaVersion 1, documented in the
 * README): every figure the table, CSV, Markdown and HTML reports show comes from here.
 * Times are milliseconds unless a name says otherwise.
 */

/** REST: v2 binary or JSON tensors, TorchServe bodies. gRPC: unary ModelInfer, or ModelStreamInfer. */
export type Protocol = 'v2-binary' | 'v2-json' | 'torchserve' | 'grpc' | 'grpc-stream';
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
}

export interface PointResult {
  readonly server: ServerPoint;
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
  readonly serverSide?: ServerSideFigures;
}

/** T(B) = c + m·B fitted by least squares over per-batch-size mean forward-pass times. */
export interface BatchCostFit {
  readonly c: number;
  readonly m: number;
  readonly r2: number;
  /** The most batching can speed things up: 1 + c/m. */
  readonly ceiling: number;
  /** R² below 0.9: the linear model explains the timings poorly. */
  readonly poorFit: boolean;
  readonly samples: readonly { readonly batchSize: number; readonly ms: number; readonly count: number }[];
}

export interface SpeedupRow {
  readonly batchSize: number;
  /** S(B) = B(c+m)/(c+Bm) from the fit. */
  readonly predicted: number;
  /** S at the fullest batch the load could form (concurrency × client batch ÷ instances). */
  readonly achievableBound: number;
  /** Best throughput at this max_batch_size ÷ best at max_batch_size 1; absent without a B=1 point. */
  readonly measured?: number;
}

export interface Recommendation {
  readonly sloP99Ms: number;
  readonly point: PointResult;
  /** To paste into model-config.yaml. */
  readonly snippet: string;
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
  readonly speedup: readonly SpeedupRow[];
  readonly recommendation?: Recommendation;
  /** Loud notes: errors, unstable points, a poor fit. */
  readonly warnings: readonly string[];
}
