/**
 * Triton's statistics extension (GET /v2/models/{m}/versions/{v}/stats): cumulative counts and
 * nanoseconds per model version, in the JSON shape Triton serves, so Triton's clients and
 * perf_analyzer read them unchanged.
 */

export interface DurationStatJson {
  count: number;
  ns: number;
}

export interface InferenceStatsJson {
  success: DurationStatJson;
  fail: DurationStatJson;
  queue: DurationStatJson;
  compute_input: DurationStatJson;
  compute_infer: DurationStatJson;
  compute_output: DurationStatJson;
  /** Response cache lookups (`response_cache` in the model config); zero without a cache. */
  cache_hit: DurationStatJson;
  cache_miss: DurationStatJson;
}

export interface BatchStatJson {
  batch_size: number;
  compute_input: DurationStatJson;
  compute_infer: DurationStatJson;
  compute_output: DurationStatJson;
}

export interface ModelStatsJson {
  name: string;
  version: string;
  /** Milliseconds since the epoch of the last forward pass; 0 before the first. */
  last_inference: number;
  /** Rows inferred: a request of 3 rows counts 3, as in Triton. */
  inference_count: number;
  /** Forward passes; below inference_count when requests were batched together. */
  execution_count: number;
  inference_stats: InferenceStatsJson;
  /** One entry per batch size executed, by ascending batch size. */
  batch_stats: BatchStatJson[];
  /** Pipelines only: each step's runs over a pipeline batch, in step order of first run. */
  step_stats?: StepStatJson[];
}

export interface StepStatJson {
  step: string;
  execution: DurationStatJson;
}

export interface RequestTimings {
  queueNs: number;
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
  totalNs: number;
}

export type ExecutionTimings = Pick<RequestTimings, 'computeInputNs' | 'computeInferNs' | 'computeOutputNs'>;

class DurationStat {
  count = 0;
  ns = 0;

  add(ns: number): void {
    this.count += 1;
    this.ns += ns;
  }

  /** Whole nanoseconds, as Triton's uint64 fields; sums are kept unrounded until here. */
  toJSON(): DurationStatJson {
    return { count: this.count, ns: Math.round(this.ns) };
  }
}

class PhaseStats {
  readonly computeInput = new DurationStat();
  readonly computeInfer = new DurationStat();
  readonly computeOutput = new DurationStat();

  add(t: ExecutionTimings): void {
    this.computeInput.add(t.computeInputNs);
    this.computeInfer.add(t.computeInferNs);
    this.computeOutput.add(t.computeOutputNs);
  }
}

/**
 * The statistics of one model version. Request-level figures (inference_stats) count each
 * request once, its compute phases being those of the batch it ran in; batch-level figures
 * (execution_count, inference_count, batch_stats) come from the forward passes.
 */
export class ModelStatistics {
  readonly #name: string;
  readonly #version: string;
  readonly #now: () => number;
  #lastInference = 0;
  #inferenceCount = 0;
  #executionCount = 0;
  readonly #success = new DurationStat();
  readonly #fail = new DurationStat();
  readonly #cacheHit = new DurationStat();
  readonly #cacheMiss = new DurationStat();
  readonly #queue = new DurationStat();
  readonly #compute = new PhaseStats();
  readonly #batches = new Map<number, PhaseStats>();
  readonly #steps = new Map<string, DurationStat>();

  /** `now` gives milliseconds since the epoch; injectable so tests get a fixed last_inference. */
  constructor(name: string, version: string, now: () => number = Date.now) {
    this.#name = name;
    this.#version = version;
    this.#now = now;
  }

  /** One request that completed successfully. */
  recordSuccess(t: RequestTimings): void {
    this.#success.add(t.totalNs);
    this.#queue.add(t.queueNs);
    this.#compute.add(t);
  }

  /** A response cache lookup that found the answer, and how long finding it took. */
  recordCacheHit(ns: number): void {
    this.#cacheHit.add(ns);
  }

  /** A response cache lookup that did not, and how long the lookup and the insertion took. */
  recordCacheMiss(ns: number): void {
    this.#cacheMiss.add(ns);
  }

  /** One run of a pipeline step over a batch of pipeline requests. */
  recordStep(step: string, ns: number): void {
    let stat = this.#steps.get(step);
    if (stat === undefined) {
      stat = new DurationStat();
      this.#steps.set(step, stat);
    }
    stat.add(ns);
  }

  /** One request that failed, wherever it failed. */
  recordFailure(totalNs: number): void {
    this.#fail.add(totalNs);
  }

  /**
   * One successful forward pass over `batchSize` rows (a batch). Rows are counted here rather
   * than per request: every row of a batch belongs to some request, and the batcher knows the
   * sum without adding it up again.
   */
  recordExecution(batchSize: number, t: ExecutionTimings): void {
    this.#lastInference = this.#now();
    this.#executionCount += 1;
    this.#inferenceCount += batchSize;
    let batch = this.#batches.get(batchSize);
    if (batch === undefined) {
      batch = new PhaseStats();
      this.#batches.set(batchSize, batch);
    }
    batch.add(t);
  }

  toJSON(): ModelStatsJson {
    return {
      name: this.#name,
      version: this.#version,
      last_inference: this.#lastInference,
      inference_count: this.#inferenceCount,
      execution_count: this.#executionCount,
      inference_stats: {
        success: this.#success.toJSON(),
        fail: this.#fail.toJSON(),
        queue: this.#queue.toJSON(),
        compute_input: this.#compute.computeInput.toJSON(),
        compute_infer: this.#compute.computeInfer.toJSON(),
        compute_output: this.#compute.computeOutput.toJSON(),
        cache_hit: this.#cacheHit.toJSON(),
        cache_miss: this.#cacheMiss.toJSON(),
      },
      batch_stats: [...this.#batches]
        .sort(([a], [b]) => a - b)
        .map(([size, batch]) => ({
          batch_size: size,
          compute_input: batch.computeInput.toJSON(),
          compute_infer: batch.computeInfer.toJSON(),
          compute_output: batch.computeOutput.toJSON(),
        })),
      ...(this.#steps.size > 0
        ? { step_stats: [...this.#steps].map(([step, stat]) => ({ step, execution: stat.toJSON() })) }
        : {}),
    };
  }
}

/** The body of a stats response: `{ model_stats: [...] }`, in the order given. */
export function statisticsResponse(stats: ModelStatistics[]): { model_stats: ModelStatsJson[] } {
  return { model_stats: stats.map((s) => s.toJSON()) };
}
