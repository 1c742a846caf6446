import type { Generator } from '../runtime/generator.js';
import { rm } from 'node:fs/promises';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { ArchiveManifest } from '../archive/manifest.js';
import {
  Batcher,
  effectiveTimeoutUs,
  type BatchingPolicy,
  type QueueReservation,
  type SubmitOptions,
  type SubmitResult,
} from '../batching/batcher.js';
import { MODEL_CONFIG_LIMITS, modelConfigSchema, type CompleteModelConfig } from '../config/model-config.js';
import { validateField } from '../config/schema-kit.js';
import type { ModelSignature } from '../protocol/prepared-request.js';
import { ModelNotReadyError, UsageError } from '../core/errors.js';
import { ModelStatistics } from '../metrics/model-statistics.js';
import type { CostFit } from '../batching/cost-fit.js';
import { batchMsOn } from '../batching/expected-completion.js';
import { ResponseCache } from './response-cache.js';
import { calibrateCost } from './calibrate-cost.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import type { ServingInstance } from '../runtime/local-instance.js';
import type { HandlerRequest } from '../core/request.js';
import type { TritonSource } from '../archive/triton-folder.js';

/** A live change of batching: `maxQueueDelayUs` is a delay, or `auto`. */
export interface BatchingChange {
  readonly maxBatchSize?: number;
  readonly maxQueueDelayUs?: number | 'auto';
}

export type ModelState = 'ready' | 'unloading' | 'unloaded';

/** Creates one more instance of a model (a session on a device), numbered `index`. */
export type InstanceFactory = (index: number) => Promise<ServingInstance>;

export interface LoadedModelParts {
  readonly name: string;
  readonly version: string;
  readonly archivePath: string;
  readonly manifest: ArchiveManifest;
  readonly config: CompleteModelConfig;
  readonly labels: readonly string[] | undefined;
  readonly instances: readonly ServingInstance[];
  readonly createInstance: InstanceFactory;
  /** The extracted archive, removed on unload. */
  readonly workDir: string;
  /** Set for a version of a Triton repository's model: its config.pbtxt and what it says beyond model-config.yaml. */
  readonly triton?: TritonSource | undefined;
  /** What `auto` devices picked and why, one line per instance. */
  readonly deviceNotes: readonly string[];
  readonly loadSeconds: number;
  readonly metrics: ServerMetrics;
  /** Set for a text-generation archive: makes its generator over the instances serving at each request. */
  readonly generator?: (instances: () => readonly ServingInstance[]) => Generator;
  readonly logger?: Logger;
  /** Waits out the backoff between restart attempts; tests pass one that takes no real time. */
  readonly restartDelay?: (ms: number) => Promise<void>;
}

/** A cached answer ran no forward pass. */
const NO_COMPUTE = Object.freeze({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });

/** The adaptive fit's gauges are set at most this often, ms (and whenever trust changes). */
const FIT_GAUGE_MS = 100;

/** A stopped instance gets this many tries to come back, a second more apart each time. */
const RESTART_ATTEMPTS = 3;

/** A model version that serves: its instances, its batcher and its statistics. */
export class LoadedModel {
  readonly name: string;
  readonly version: string;
  readonly archivePath: string;
  readonly manifest: ArchiveManifest;
  readonly labels: readonly string[] | undefined;
  readonly loadSeconds: number;
  readonly deviceNotes: readonly string[];
  readonly stats: ModelStatistics;
  readonly loadedAt = new Date();
  readonly generator: Generator | undefined;
  readonly triton: TritonSource | undefined;
  #currentConfig: CompleteModelConfig;
  #currentSignature: ModelSignature;
  #instanceList: ServingInstance[];
  readonly #batcher: Batcher;
  readonly #parts: LoadedModelParts;
  #modelState: ModelState = 'ready';
  #liveFit: (CostFit & { wait_ms: number }) | undefined;
  /** When the fit gauges were last set: at most every FIT_GAUGE_MS, they are off the hot path. */
  #fitGaugeAt = -Infinity;
  /** Timing batches for `max_queue_delay: auto`, once per loaded version (calibrate-cost.ts). */
  #calibration: Promise<void> | undefined;
  /** Set with `response_cache.enable`; one per version, so answers never cross versions. */
  readonly #cache: ResponseCache | undefined;
  #unloading: Promise<void> | undefined;

  constructor(parts: LoadedModelParts) {
    this.#parts = parts;
    this.name = parts.name;
    this.version = parts.version;
    this.archivePath = parts.archivePath;
    this.manifest = parts.manifest;
    this.labels = parts.labels;
    this.loadSeconds = parts.loadSeconds;
    this.deviceNotes = parts.deviceNotes;
    this.triton = parts.triton;
    this.generator = parts.generator?.(() => this.#instanceList);
    this.#currentConfig = parts.config;
    this.#currentSignature = signatureOf(parts.config);
    this.#instanceList = [...parts.instances];
    this.stats = new ModelStatistics(parts.name, parts.version);
    const { metrics } = parts;
    this.#batcher = new Batcher(this.#instanceList, policyOf(parts.config), {
      batchExecuted: (rows, timings, instanceId) => {
        this.stats.recordExecution(rows, timings);
        const seconds = (timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs) / 1e9;
        metrics.batchExecuted(this.name, this.version, rows, seconds, instanceId);
      },
      queueChanged: (rows) => metrics.setQueueDepth(this.name, this.version, rows),
      pendingChanged: (rows) => metrics.setPendingRows(this.name, this.version, rows),
      busyChanged: (busy, total) => metrics.setBusyInstances(this.name, this.version, busy, total),
      fitChanged: (fit, waitMs) => this.#fitChanged(fit, waitMs),
    });
    if (parts.config.dynamic_batching.max_queue_delay === 'auto') void this.calibrateCost();
    metrics.setBusyInstances(this.name, this.version, 0, this.#instanceList.length);
    // From the start, so an autoscaler's query on a fresh pod reads 0, not an empty series.
    metrics.setPendingRows(this.name, this.version, 0);
    metrics.setQueueDepth(this.name, this.version, 0);
    const caching = parts.config.response_cache;
    this.#cache = caching?.enable
      ? new ResponseCache(caching.max_bytes, {
          evicted: (entries) => metrics.cacheEvicted(this.name, this.version, entries),
          sized: (bytes) => metrics.cacheSized(this.name, this.version, bytes),
        })
      : undefined;
    for (const instance of this.#instanceList) this.#watch(instance);
    metrics.modelLoaded(this.name, this.version, parts.loadSeconds, this.devices().join(','));
  }

  get state(): ModelState {
    return this.#modelState;
  }

  /**
   * With `max_queue_delay: auto`, times a few batches of zeros at sizes 1, ⌈max/2⌉ and max on
   * one instance so the cost line steers from the first request; once per version (started at
   * load, or when a live reconfigure switches to auto). Needs `warmup` (the handler takes v2
   * tensors) and max_batch_size ≥ 3; a failure is logged and leaves auto at delay 0 until its
   * own batches make the line.
   */
  calibrateCost(): Promise<void> {
    const config = this.#currentConfig;
    // A fixed delay steers by nothing it could time: only auto pays for the batches.
    if (config.dynamic_batching.max_queue_delay !== 'auto' || !config.warmup || config.max_batch_size < 3) {
      return Promise.resolve();
    }
    this.#calibration ??= calibrateCost(this.#batcher, config).then(
      (timed) => {
        this.#parts.logger?.info(
          { model: this.name, version: this.version, timed_ms: timed },
          'adaptive batching: cost line seeded from batches timed at load',
        );
        if (this.#liveFit === undefined) this.#fitChanged(this.#batcher.seededFit, 0);
        this.#warnIfBudgetBelowTwoBatches(config);
      },
      (error: unknown) =>
        this.#parts.logger?.warn(
          { model: this.name, version: this.version, err: String(error) },
          'adaptive batching: could not time batches at load; dispatching as with delay 0 until the fit is trusted',
        ),
    );
    return this.#calibration;
  }

  /**
   * A request that arrives just after a full batch started waits it out, then runs in a batch
   * that may fill as well: below twice a full batch, `max_latency` cannot be kept even at low
   * load. Said once, at load, from the line timed there.
   */
  #warnIfBudgetBelowTwoBatches(config: CompleteModelConfig): void {
    const line = this.#batcher.seededFit;
    const fullBatchMs = batchMsOn(line, config.max_batch_size);
    const budgetMs = latencyBudgetUs(config.dynamic_batching) / 1000;
    if (!(line.m > 0) || 2 * fullBatchMs <= budgetMs) return;
    this.#parts.logger?.warn(
      { model: this.name, version: this.version, full_batch_ms: fullBatchMs, max_latency_ms: budgetMs },
      `adaptive batching: max_latency (${Math.round(budgetMs)} ms) is under twice a full batch of ${config.max_batch_size} ` +
        `(${fullBatchMs.toFixed(1)} ms): a request that waits for a busy instance can pass it at any load; ` +
        'raise max_latency or lower max_batch_size',
    );
  }

  /** With `max_queue_delay: auto`: the cost line learnt so far and the last wait chosen; else undefined. */
  get adaptiveBatching(): (CostFit & { wait_ms: number }) | undefined {
    return this.#liveFit;
  }

  get config(): CompleteModelConfig {
    return this.#currentConfig;
  }

  /** What requests are checked against: kept with the config, so no request derives it. */
  get signature(): ModelSignature {
    return this.#currentSignature;
  }

  get instances(): readonly ServingInstance[] {
    return this.#instanceList;
  }

  get queuedRows(): number {
    return this.#batcher.rowsQueued;
  }

  get reservedRows(): number {
    return this.#batcher.rowsReserved;
  }

  get busyInstances(): number {
    return this.#batcher.busyInstances;
  }

  devices(): string[] {
    return [...new Set(this.#instanceList.map((instance) => instance.device))];
  }

  /** Holds a queue place for a request admitted on its headers; refuses (503) when the queue is full. */
  reserve(): QueueReservation {
    return this.#batcher.reserve();
  }

  /** Queues one request for batching (or answers it from the cache). Its outcome is recorded by the inference call (server/inference-call). */
  infer(given: HandlerRequest, options: SubmitOptions): Promise<SubmitResult> {
    if (this.#modelState !== 'ready') {
      return Promise.reject(
        new ModelNotReadyError(`model ${this.name} version ${this.version} is ${this.#modelState}`),
      );
    }
    const request = this.#currentConfig.pipeline ? this.#withDeadline(given, options) : given;
    const cache = this.#cache;
    if (cache === undefined) return this.#batcher.submit(request, options);
    const key = cache.keyOf(request);
    const started = process.hrtime.bigint();
    const cached = cache.get(key);
    if (cached !== undefined) {
      // Found: the held queue place is not needed, and no batch runs.
      options.reservation?.release();
      this.stats.recordCacheHit(Number(process.hrtime.bigint() - started));
      this.#parts.metrics.cacheLookup(this.name, this.version, true);
      return Promise.resolve({ response: cached, queueNs: 0, timings: NO_COMPUTE, batchRows: 0, instanceId: 'cache' });
    }
    const lookupNs = Number(process.hrtime.bigint() - started);
    this.#parts.metrics.cacheLookup(this.name, this.version, false);
    return this.#batcher.submit(request, options).then((result) => {
      const storing = process.hrtime.bigint();
      cache.put(key, result.response);
      this.stats.recordCacheMiss(lookupNs + Number(process.hrtime.bigint() - storing));
      return result;
    });
  }

  /** Tokens a served request carried (text models), for the tokens counter. */
  countTokens(kind: 'prompt' | 'completion', tokens: number): void {
    this.#parts.metrics.tokensCounted(this.name, this.version, kind, tokens);
  }

  /** A pipeline's steps get what is left of the request's timeout, and its client's signal. */
  #withDeadline(request: HandlerRequest, options: SubmitOptions): HandlerRequest {
    const timeoutUs = effectiveTimeoutUs(this.#currentConfig.dynamic_batching.default_timeout, options.timeoutUs);
    return {
      ...request,
      ...(timeoutUs > 0 ? { deadline: performance.now() + timeoutUs / 1000 } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
    };
  }

  /** A pipeline step's run over one pipeline batch: statistics and the `step`-labelled histogram. */
  recordStep(step: string, ns: number): void {
    this.stats.recordStep(step, ns);
    this.#parts.metrics.pipelineStep(this.name, this.version, step, ns / 1e9);
  }

  /** Changes batching live: `maxBatchSize` and `maxQueueDelayUs` (a delay, or `auto`) of the running batcher. */
  reconfigure(change: BatchingChange): void {
    this.checkReconfigure(change);
    const config = this.#currentConfig;
    const maxBatchSize = change.maxBatchSize ?? config.max_batch_size;
    const maxQueueDelay = change.maxQueueDelayUs ?? config.dynamic_batching.max_queue_delay;
    // An override at run time is held to the bounds an archive's config is.
    const problems: string[] = [];
    validateField(modelConfigSchema.fields.max_batch_size, maxBatchSize, 'max_batch_size', problems);
    const delaySpec = modelConfigSchema.fields.dynamic_batching.fields.max_queue_delay;
    validateField(delaySpec, maxQueueDelay, 'dynamic_batching.max_queue_delay', problems);
    if (problems.length > 0) throw new UsageError(`model ${this.name}: ${problems.join('; ')}`);
    this.#currentConfig = Object.freeze({
      ...config,
      max_batch_size: maxBatchSize,
      dynamic_batching: Object.freeze({
        ...config.dynamic_batching,
        max_queue_delay: maxQueueDelay,
        preferred_batch_sizes: config.dynamic_batching.preferred_batch_sizes.filter((size) => size <= maxBatchSize),
      }),
    });
    this.#currentSignature = signatureOf(this.#currentConfig);
    this.#batcher.reconfigure(policyOf(this.#currentConfig));
    if (maxQueueDelay === 'auto') void this.calibrateCost();
  }

  /** Throws what `reconfigure` would refuse, changing nothing: callers check every change before applying any. */
  checkReconfigure(change: BatchingChange): void {
    const config = this.#currentConfig;
    const maxBatchSize = change.maxBatchSize ?? config.max_batch_size;
    if (maxBatchSize > 0 && config.max_batch_size === 0) {
      throw new UsageError(`model ${this.name} does not batch (max_batch_size 0); its batch size cannot be raised`);
    }
    if (!Number.isSafeInteger(maxBatchSize) || maxBatchSize < 0) {
      throw new UsageError(`batch size must be a non-negative integer, got ${maxBatchSize}`);
    }
  }

  /** Grows or shrinks the instances; removed ones finish their running batch first. */
  async scale(count: number): Promise<void> {
    if (!Number.isSafeInteger(count) || count < 1 || count > MODEL_CONFIG_LIMITS.instances) {
      throw new UsageError(`instance count must be from 1 to ${MODEL_CONFIG_LIMITS.instances}, got ${count}`);
    }
    const current = this.#instanceList;
    if (count > current.length) {
      const added: ServingInstance[] = [];
      for (let index = current.length; index < count; index++) added.push(await this.#parts.createInstance(index));
      for (const instance of added) this.#watch(instance);
      this.#instanceList = [...current, ...added];
      this.#batcher.setRunners(this.#instanceList);
    } else if (count < current.length) {
      const removed = current.slice(count);
      this.#instanceList = current.slice(0, count);
      this.#batcher.setRunners(this.#instanceList);
      await this.#batcher.drained();
      await Promise.all(removed.map((instance) => instance.release()));
    }
  }

  /** Logs when trust changes, keeps the line for describe, and sets the gauges (at most every FIT_GAUGE_MS). */
  #fitChanged(fit: CostFit, waitMs: number): void {
    const { logger, metrics } = this.#parts;
    const trustChanged = fit.trusted !== this.#liveFit?.trusted;
    if (trustChanged) {
      logger?.info(
        { model: this.name, version: this.version, c_ms: fit.c, m_ms: fit.m, r2: fit.r2 },
        fit.trusted
          ? 'adaptive batching: the cost fit is trusted and now steers the wait'
          : `adaptive batching: dispatching as with delay 0 until the cost fit is trusted (${fit.reason ?? ''})`,
      );
    }
    this.#liveFit = { ...fit, wait_ms: waitMs };
    const now = performance.now();
    if (trustChanged || now - this.#fitGaugeAt >= FIT_GAUGE_MS) {
      this.#fitGaugeAt = now;
      metrics.batchingFit(this.name, this.version, fit, waitMs);
    }
  }

  #watch(instance: ServingInstance): void {
    instance.onStopped?.((error) => void this.#replace(instance, error));
  }

  /**
   * An instance that died on its own (its worker exited) leaves the batcher at once, so no
   * batch waits on it, and a fresh one opens in its place; the batch it was running failed.
   */
  async #replace(stopped: ServingInstance, error: Error): Promise<void> {
    const index = this.#instanceList.indexOf(stopped);
    if (index < 0 || this.#modelState !== 'ready') return;
    const { logger, metrics } = this.#parts;
    const where = { model: this.name, version: this.version };
    this.#instanceList = this.#instanceList.filter((instance) => instance !== stopped);
    this.#batcher.setRunners(this.#instanceList);
    metrics.instanceRestarted(this.name, this.version);
    logger?.error({ ...where, instance: stopped.id, err: error.message }, 'instance stopped; opening a new one');
    for (let attempt = 1; attempt <= RESTART_ATTEMPTS; attempt++) {
      try {
        const fresh = await this.#parts.createInstance(index);
        if (this.#modelState !== 'ready') {
          await fresh.release();
          return;
        }
        this.#watch(fresh);
        this.#instanceList = [...this.#instanceList.slice(0, index), fresh, ...this.#instanceList.slice(index)];
        this.#batcher.setRunners(this.#instanceList);
        logger?.info({ ...where, instance: fresh.id }, 'instance restarted');
        return;
      } catch (restartError) {
        logger?.error({ ...where, attempt, err: String(restartError) }, 'instance restart failed');
        await (this.#parts.restartDelay ?? unrefDelay)(attempt * 1000);
      }
    }
  }

  /**
   * Stops taking requests, answers every admitted one, then frees the sessions. Every caller
   * gets the same promise, so a second unload also waits for the drain to finish.
   */
  unload(): Promise<void> {
    this.#unloading ??= this.#drainAndRelease();
    return this.#unloading;
  }

  async #drainAndRelease(): Promise<void> {
    this.#modelState = 'unloading';
    await this.#batcher.drained();
    this.generator?.close();
    await Promise.all(this.#instanceList.map((instance) => instance.release()));
    await rm(this.#parts.workDir, { recursive: true, force: true });
    this.#parts.metrics.modelUnloaded(this.name, this.version);
    this.#modelState = 'unloaded';
  }
}

/** `max_latency`, else the request timeout (a request is refused past it anyway), else 1 s. */
export function latencyBudgetUs(batching: CompleteModelConfig['dynamic_batching']): number {
  return batching.max_latency ?? (batching.default_timeout > 0 ? batching.default_timeout : 1_000_000);
}

/** A pending backoff must not keep the process alive. */
const unrefDelay = (ms: number): Promise<void> => delay(ms, undefined, { ref: false });

function signatureOf(config: CompleteModelConfig): ModelSignature {
  return Object.freeze({
    inputs: config.inputs,
    outputs: config.outputs,
    batching: config.max_batch_size > 0,
    // A pipeline's steps read BYTES inputs as bytes (images), not as text.
    ...(config.pipeline ? { bytesEncoding: 'latin1' as const } : {}),
  });
}

export function policyOf(config: CompleteModelConfig): BatchingPolicy {
  const batching = config.dynamic_batching;
  const delay = batching.max_queue_delay;
  return {
    maxBatchSize: config.max_batch_size,
    maxQueueDelayUs: delay === 'auto' ? 0 : delay,
    ...(delay === 'auto' ? { adaptive: { maxLatencyUs: latencyBudgetUs(batching) } } : {}),
    preferredBatchSizes: batching.preferred_batch_sizes,
    maxQueueSize: batching.max_queue_size,
    defaultTimeoutUs: batching.default_timeout,
    priorityLevels: batching.priority_levels,
    ...(batching.default_priority_level !== undefined ? { defaultPriorityLevel: batching.default_priority_level } : {}),
  };
}
