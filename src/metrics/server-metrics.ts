import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { BUSY_WINDOW_SECONDS, BusyWindow } from './busy-window.js';
import type { CostFit } from '../batching/cost-fit.js';
import { GpuMetrics, type GpuMetricsOptions } from './gpu-metrics.js';

/**
 * 50µs to 10s in 1-2-5 steps: a small model's forward pass on CPU sits near the bottom, a
 * queued request under overload near the top, and p99 needs buckets on both sides of it.
 */
const DURATION_BUCKETS = [
  0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10,
];

/** Powers of two up to 1024: the sizes a dynamic batcher is usually configured to prefer. */
const BATCH_SIZE_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/** The front end a request came in by: REST (KServe v2 and TorchServe over HTTP) or gRPC. */
export type Protocol = 'rest' | 'grpc';

/** One (model, version, protocol)'s request series. */
interface ProtocolSeries {
  /** One counter child per HTTP status seen (gRPC answers count as the HTTP status of their error). */
  readonly requests: Map<number, Counter.Internal>;
  readonly requestDuration: Histogram.Internal<string>;
}

/** The children of one (model, version), resolved once so the hot path skips prom-client's label handling. */
interface ModelSeries {
  readonly rest: ProtocolSeries;
  /** Made at the first gRPC request, so REST-only servers export no empty gRPC series. */
  grpc: ProtocolSeries | undefined;
  readonly queueDuration: Histogram.Internal<string>;
  readonly computeDuration: Histogram.Internal<string>;
  readonly batchCompute: Histogram.Internal<string>;
  readonly batchSize: Histogram.Internal<string>;
  /**
   * The batcher's state, kept as plain numbers and handed to the gauges on scrape (see
   * #liveGauge); undefined until reported, so a series without a batcher (a pipeline) exports none.
   */
  queueRows: number | undefined;
  pendingRows: number | undefined;
  instancesBusy: number | undefined;
  instances: number | undefined;
  /** The instances' compute seconds over the last few seconds, for the busy share. */
  readonly busy: BusyWindow;
  /** instance id → its busy-seconds counter child, looked up once. */
  readonly busyCounters: Map<string, Counter.Internal>;
  /** The device of the load gauge series, so unloading can remove exactly that one. */
  loadDevice: string | undefined;
}

/** The server's Prometheus metrics, on a registry of its own so several servers can share a process. */
const TOTAL_NAMED_GAUGES = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
];

export class ServerMetrics {
  readonly registry = new Registry();
  readonly contentType: string = this.registry.contentType;

  /** model → version → series; nested so a lookup builds no key string. Before the gauges that read it on scrape. */
  readonly #series = new Map<string, Map<string, ModelSeries>>();

  readonly #requests = new Counter({
    name: 'batchserve_requests_total',
    help: 'Inference requests finished, by protocol (rest, grpc) and HTTP status code (a gRPC error counts as the status its error has on REST), in requests.',
    labelNames: ['model', 'version', 'protocol', 'status'],
    registers: [this.registry],
  });
  readonly #refused = new Counter({
    name: 'batchserve_requests_refused_total',
    help: 'Inference requests answered 503 without running, by the code that says why (BS_ERR_LATENCY_BUDGET: auto expected it to finish past max_latency; BS_ERR_QUEUE_FULL: max_queue_size reached; BS_ERR_MODEL_NOT_READY; BS_ERR_QUEUE_TIMEOUT), in requests.',
    labelNames: ['model', 'version', 'code'],
    registers: [this.registry],
  });
  readonly #requestDuration = new Histogram({
    name: 'batchserve_request_duration_seconds',
    help: 'Time from receiving an inference request to finishing its response, by protocol, in seconds.',
    labelNames: ['model', 'version', 'protocol'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #queueDuration = new Histogram({
    name: 'batchserve_queue_duration_seconds',
    help: 'Time a request waited in the batching queue before its batch started, in seconds.',
    labelNames: ['model', 'version'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #computeDuration = new Histogram({
    name: 'batchserve_compute_duration_seconds',
    help: 'Forward pass of the batch a request ran in, pre- and post-processing included, counted once per request, in seconds.',
    labelNames: ['model', 'version'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #batchCompute = new Histogram({
    name: 'batchserve_batch_compute_duration_seconds',
    help: 'Forward pass of one batch, pre- and post-processing included, counted once per batch, in seconds.',
    labelNames: ['model', 'version'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #batchSize = new Histogram({
    name: 'batchserve_batch_size',
    help: 'Rows per forward pass (the batch size), counted once per batch, in rows.',
    labelNames: ['model', 'version'],
    buckets: BATCH_SIZE_BUCKETS,
    registers: [this.registry],
  });
  readonly #queueRows = this.#liveGauge(
    'batchserve_queue_rows',
    'Rows waiting in the batching queue, in rows.',
    (series) => series.queueRows,
  );
  readonly #pendingRows = this.#liveGauge(
    'batchserve_pending_rows',
    'Rows queued plus rows in a running forward pass (the autoscaling signal: sum across pods), in rows.',
    (series) => series.pendingRows,
  );
  readonly #instancesBusy = this.#liveGauge(
    'batchserve_instances_busy',
    'Model instances running a forward pass now, in instances.',
    (series) => series.instancesBusy,
  );
  readonly #instances = this.#liveGauge(
    'batchserve_instances',
    'Model instances loaded, busy or idle, in instances.',
    (series) => series.instances,
  );
  readonly #instanceBusySeconds = new Counter({
    name: 'batchserve_instance_busy_seconds_total',
    help: "Time each instance spent on forward passes (pre- and post-processing included, Triton's compute durations; rate() is its busy share), by instance, in seconds.",
    labelNames: ['model', 'version', 'instance'],
    registers: [this.registry],
  });
  readonly #instanceBusyRatio = this.#liveGauge(
    'batchserve_instance_busy_ratio',
    `Share of the last ${BUSY_WINDOW_SECONDS} s the version's instances spent on forward passes, all instances together, 0–1: the device's utilisation as the server drives it (1: never idle between batches), in ratio.`,
    (series) => (series.instances === undefined ? undefined : series.busy.ratio(Date.now(), series.instances)),
  );
  readonly #modelLoad = new Gauge({
    name: 'batchserve_model_load_seconds',
    help: 'Time the last load of a model version took on its device, in seconds.',
    labelNames: ['model', 'version', 'device'],
    registers: [this.registry],
  });

  readonly #pipelineStep = new Histogram({
    name: 'batchserve_pipeline_step_duration_seconds',
    help: "One pipeline step over one pipeline batch (a model step's wait in that model's queue included), by step, in seconds.",
    labelNames: ['model', 'version', 'step'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });

  readonly #instanceRestarts = new Counter({
    name: 'batchserve_instance_restarts_total',
    help: 'Model instances that stopped on their own (their worker thread exited) and were replaced, in instances.',
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  readonly #canaryWeight = new Gauge({
    name: 'batchserve_canary_weight',
    help: "The canary candidate's share of its model's traffic: each step while it runs, 100 once promoted, 0 once rolled back, in percent.",
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  readonly #shadowRequests = new Counter({
    name: 'batchserve_shadow_requests_total',
    help: 'Requests mirrored to a shadow version, by outcome: agree, disagree (answers differ) or failed (the shadow erred), in requests.',
    labelNames: ['model', 'version', 'result'],
    registers: [this.registry],
  });
  readonly #shadowDuration = new Histogram({
    name: 'batchserve_shadow_duration_seconds',
    help: 'Time a shadow version took to answer a mirrored request, in seconds.',
    labelNames: ['model', 'version'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #shadowAgreement = new Gauge({
    name: 'batchserve_shadow_agreement_ratio',
    help: 'Share of compared shadow answers that agreed with the serving version since the server started, in ratio.',
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  /** Adaptive batching (max_queue_delay: auto): the live fit of T(B) = c + m·B and its wait, per version. */
  readonly #batchingGauges = {
    c: this.#gauge(
      'batchserve_batching_fixed_cost_seconds',
      'Adaptive batching: the learnt fixed cost c of a forward pass, in seconds.',
    ),
    m: this.#gauge(
      'batchserve_batching_row_cost_seconds',
      'Adaptive batching: the learnt cost m of each row in a pass, in seconds.',
    ),
    r2: this.#gauge(
      'batchserve_batching_fit_r2',
      'Adaptive batching: how well T(B) = c + m·B fits the recent batches, in ratio.',
    ),
    trusted: this.#gauge(
      'batchserve_batching_fit_trusted',
      'Adaptive batching: 1 when the fit steers the wait, 0 while batching is as with delay 0 (too few batch sizes, a poor fit, c < 0 or m ≤ 0), in boolean.',
    ),
    wait: this.#gauge(
      'batchserve_batching_wait_seconds',
      'Adaptive batching: the wait for partners last chosen, in seconds.',
    ),
  };
  readonly #cache = {
    hits: this.#counter('batchserve_cache_hits_total', 'Requests answered from the response cache, in requests.'),
    misses: this.#counter('batchserve_cache_misses_total', 'Response cache lookups that found nothing, in requests.'),
    evictions: this.#counter(
      'batchserve_cache_evictions_total',
      'Answers pushed out of the response cache to make room, least recently used first, in entries.',
    ),
    bytes: this.#gauge('batchserve_cache_bytes', 'Keys and answers held by the response cache, in bytes.'),
  };
  readonly #logDropped = new Counter({
    name: 'batchserve_prediction_log_dropped_total',
    help: 'Prediction log records lost, by reason: buffer_full (the disk fell behind), write_failed (a write failed: a full or read-only disk) or closed (after shutdown), in records.',
    labelNames: ['model', 'reason'],
    registers: [this.registry],
  });
  readonly #tokens = new Counter({
    name: 'batchserve_tokens_total',
    help: "Tokens of text models' requests: kind prompt, what the tokenizer made of their texts (special tokens included); kind completion, what was generated, in tokens.",
    labelNames: ['model', 'version', 'kind'],
    registers: [this.registry],
  });
  readonly #firstToken = new Histogram({
    name: 'batchserve_time_to_first_token_seconds',
    help: 'Time from a generation request joining the queue to its first token, in seconds.',
    labelNames: ['model', 'version'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #interToken = new Histogram({
    name: 'batchserve_inter_token_latency_seconds',
    help: "Time between a generated sequence's consecutive tokens, in seconds.",
    labelNames: ['model', 'version'],
    buckets: DURATION_BUCKETS,
    registers: [this.registry],
  });
  readonly #activeSequences = new Gauge({
    name: 'batchserve_active_sequences',
    help: 'Sequences a generative model is decoding now (the rows of its next step), in sequences.',
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  readonly #cacheBytes = new Gauge({
    name: 'batchserve_kv_cache_bytes',
    help: "A generative model's key/value caches by state: used, what its running batches hold now, padding included; reserved, what they may come to hold before their sequences end, which admission keeps within generation.kv_cache_bytes; prefix, the cached prompt prefixes, in bytes.",
    labelNames: ['model', 'version', 'state'],
    registers: [this.registry],
  });
  readonly #prefixSequences = new Counter({
    name: 'batchserve_prefix_cache_hits_total',
    help: 'Generated sequences that started from a cached prompt prefix instead of reading their whole prompt, in sequences.',
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  readonly #prefixTokens = new Counter({
    name: 'batchserve_prefix_cache_tokens_total',
    help: 'Prompt tokens taken from the prefix cache instead of read again, in tokens.',
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  readonly #feedback = new Counter({
    name: 'batchserve_feedback_total',
    help: 'Feedback joined to a logged prediction, by the version that answered it, in requests.',
    labelNames: ['model', 'version'],
    registers: [this.registry],
  });
  /** model → version → [agreed, compared], for the agreement gauge. */
  readonly #shadowCounts = new Map<string, Map<string, [number, number]>>();

  /** Sampled from nvidia-smi while a version runs on a GPU; absent unless the server asks for it. */
  readonly #gpu: GpuMetrics | undefined;

  constructor({
    collectProcessMetrics = true,
    gpu,
  }: { collectProcessMetrics?: boolean; gpu?: GpuMetricsOptions } = {}) {
    if (collectProcessMetrics) {
      collectDefaultMetrics({ register: this.registry });
      // Gauges named *_total, which Prometheus keeps for counters (`promtool check metrics`
      // fails on them); each is the sum of the gauge of the same name without it, by `type`.
      for (const name of TOTAL_NAMED_GAUGES) this.registry.removeSingleMetric(name);
    }
    this.#gpu = gpu ? new GpuMetrics(this.registry, gpu) : undefined;
  }

  /** Stops GPU sampling. */
  close(): void {
    this.#gpu?.close();
  }

  /** One finished request. status: HTTP status code. */
  requestFinished(model: string, version: string, status: number, requestSeconds: number, protocol: Protocol): void {
    const modelSeries = this.#seriesOf(model, version);
    const series =
      protocol === 'rest' ? modelSeries.rest : (modelSeries.grpc ??= this.#protocolSeries(model, version, 'grpc'));
    let requests = series.requests.get(status);
    if (requests === undefined) {
      requests = this.#requests.labels(model, version, protocol, String(status));
      series.requests.set(status, requests);
    }
    requests.inc();
    series.requestDuration.observe(requestSeconds);
  }

  /** Tokens a served request carried, as its model's tokenizer counted them. */
  tokensCounted(model: string, version: string, kind: 'prompt' | 'completion', tokens: number): void {
    this.#tokens.labels(model, version, kind).inc(tokens);
  }

  /** A generated sequence's first token, `seconds` after it was queued. */
  firstToken(model: string, version: string, seconds: number): void {
    this.#firstToken.labels(model, version).observe(seconds);
  }

  /** A generated sequence's next token, `seconds` after its previous one. */
  nextToken(model: string, version: string, seconds: number): void {
    this.#interToken.labels(model, version).observe(seconds);
  }

  setActiveSequences(model: string, version: string, active: number): void {
    this.#activeSequences.labels(model, version).set(active);
  }

  setCacheBytes(model: string, version: string, used: number, reserved: number, prefix: number): void {
    this.#cacheBytes.labels(model, version, 'used').set(used);
    this.#cacheBytes.labels(model, version, 'reserved').set(reserved);
    this.#cacheBytes.labels(model, version, 'prefix').set(prefix);
  }

  /** Sequences that started from a cached prompt prefix, and the prompt tokens they did not read. */
  prefixReused(model: string, version: string, sequences: number, tokens: number): void {
    this.#prefixSequences.labels(model, version).inc(sequences);
    this.#prefixTokens.labels(model, version).inc(tokens);
  }

  /** A request refused with 503 before it ran; `code` says why. */
  requestRefused(model: string, version: string, code: string): void {
    this.#refused.labels(model, version, code).inc();
  }

  /** A request that left the queue (queue wait) and ran (compute = its batch's forward pass incl. pre/post-processing). */
  requestTimings(model: string, version: string, queueSeconds: number, computeSeconds: number): void {
    const series = this.#seriesOf(model, version);
    series.queueDuration.observe(queueSeconds);
    series.computeDuration.observe(computeSeconds);
  }

  /** One forward pass: its compute counted once per batch, where requestTimings counts it once per request served. */
  batchExecuted(model: string, version: string, batchSize: number, computeSeconds: number, instance: string): void {
    const series = this.#seriesOf(model, version);
    series.batchSize.observe(batchSize);
    series.batchCompute.observe(computeSeconds);
    series.busy.add(Date.now(), computeSeconds);
    let busy = series.busyCounters.get(instance);
    if (busy === undefined) {
      busy = this.#instanceBusySeconds.labels(model, version, instance);
      series.busyCounters.set(instance, busy);
    }
    busy.inc(computeSeconds);
  }

  setQueueDepth(model: string, version: string, rows: number): void {
    this.#seriesOf(model, version).queueRows = rows;
  }

  setPendingRows(model: string, version: string, rows: number): void {
    this.#seriesOf(model, version).pendingRows = rows;
  }

  setBusyInstances(model: string, version: string, busy: number, total: number): void {
    const series = this.#seriesOf(model, version);
    series.instancesBusy = busy;
    series.instances = total;
  }

  modelLoaded(model: string, version: string, seconds: number, device: string): void {
    const series = this.#seriesOf(model, version);
    if (series.loadDevice !== undefined && series.loadDevice !== device) {
      this.#modelLoad.remove(model, version, series.loadDevice);
    }
    series.loadDevice = device;
    this.#modelLoad.labels(model, version, device).set(seconds);
    this.#gpu?.placed(model, version, device.split(','));
  }

  /**
   * Removes the version's gauge series: a gone model has no queue or instances, and a stale
   * value would read as a live one. Counters and histograms stay, so rates over the window
   * that covers the unload remain right.
   */
  modelUnloaded(model: string, version: string): void {
    this.#gpu?.removed(model, version);
    const versions = this.#series.get(model);
    const series = versions?.get(version);
    if (versions === undefined || series === undefined) return;
    this.#queueRows.remove(model, version);
    this.#pendingRows.remove(model, version);
    this.#instancesBusy.remove(model, version);
    this.#instances.remove(model, version);
    this.#instanceBusyRatio.remove(model, version);
    this.#activeSequences.remove(model, version);
    this.#cacheBytes.remove(model, version, 'used');
    this.#cacheBytes.remove(model, version, 'reserved');
    this.#cacheBytes.remove(model, version, 'prefix');
    this.#prefixSequences.remove(model, version);
    this.#prefixTokens.remove(model, version);
    if (series.loadDevice !== undefined) this.#modelLoad.remove(model, version, series.loadDevice);
    for (const gauge of Object.values(this.#batchingGauges)) gauge.remove(model, version);
    this.#cache.bytes.remove(model, version);
    versions.delete(version);
    if (versions.size === 0) this.#series.delete(model);
  }

  /** A pipeline step's run over one batch of pipeline requests. */
  pipelineStep(model: string, version: string, step: string, seconds: number): void {
    this.#pipelineStep.labels(model, version, step).observe(seconds);
  }

  instanceRestarted(model: string, version: string): void {
    this.#instanceRestarts.labels(model, version).inc();
  }

  canaryWeight(model: string, candidate: string, percent: number): void {
    this.#canaryWeight.labels(model, candidate).set(percent);
  }

  /** One mirrored request: whether the shadow `version` agreed with the serving version, and how long it took. */
  shadowCompared(model: string, version: string, result: 'agree' | 'disagree' | 'failed', seconds: number): void {
    this.#shadowRequests.labels(model, version, result).inc();
    if (result === 'failed') return;
    this.#shadowDuration.labels(model, version).observe(seconds);
    let versions = this.#shadowCounts.get(model);
    if (versions === undefined) {
      versions = new Map();
      this.#shadowCounts.set(model, versions);
    }
    const counts = versions.get(version) ?? [0, 0];
    counts[0] += result === 'agree' ? 1 : 0;
    counts[1] += 1;
    versions.set(version, counts);
    this.#shadowAgreement.labels(model, version).set(counts[0] / counts[1]);
  }

  /** Adaptive batching refitted its cost line (ms in, seconds out). */
  batchingFit(model: string, version: string, fit: Pick<CostFit, 'c' | 'm' | 'r2' | 'trusted'>, waitMs: number): void {
    const gauges = this.#batchingGauges;
    gauges.c.labels(model, version).set(fit.c / 1e3);
    gauges.m.labels(model, version).set(fit.m / 1e3);
    gauges.r2.labels(model, version).set(fit.r2);
    gauges.trusted.labels(model, version).set(fit.trusted ? 1 : 0);
    gauges.wait.labels(model, version).set(waitMs / 1e3);
  }

  predictionLogDropped(model: string, reason: string, records: number): void {
    this.#logDropped.labels(model, reason).inc(records);
  }

  feedbackJoined(model: string, version: string): void {
    this.#feedback.labels(model, version).inc();
  }

  cacheLookup(model: string, version: string, hit: boolean): void {
    (hit ? this.#cache.hits : this.#cache.misses).labels(model, version).inc();
  }

  cacheEvicted(model: string, version: string, entries: number): void {
    this.#cache.evictions.labels(model, version).inc(entries);
  }

  cacheSized(model: string, version: string, bytes: number): void {
    this.#cache.bytes.labels(model, version).set(bytes);
  }

  #counter(name: string, help: string): Counter {
    return new Counter({ name, help, labelNames: ['model', 'version'], registers: [this.registry] });
  }

  /**
   * A gauge of the batcher's state, read from the series when scraped. The batcher moves it at
   * every request and batch; prom-client's set() builds a label key and a new entry each call,
   * garbage the hot path need not make.
   */
  #liveGauge(name: string, help: string, read: (series: ModelSeries) => number | undefined): Gauge {
    const series = this.#series;
    return new Gauge({
      name,
      help,
      labelNames: ['model', 'version'],
      registers: [this.registry],
      collect(this: Gauge) {
        for (const [model, versions] of series) {
          for (const [version, one] of versions) {
            const value = read(one);
            if (value !== undefined) this.labels(model, version).set(value);
          }
        }
      },
    });
  }

  #gauge(name: string, help: string): Gauge {
    return new Gauge({ name, help, labelNames: ['model', 'version'], registers: [this.registry] });
  }

  /** The exposition text; serialization happens here, on scrape, never on the hot path. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  #seriesOf(model: string, version: string): ModelSeries {
    let versions = this.#series.get(model);
    if (versions === undefined) {
      versions = new Map();
      this.#series.set(model, versions);
    }
    let series = versions.get(version);
    if (series === undefined) {
      series = {
        rest: this.#protocolSeries(model, version, 'rest'),
        grpc: undefined,
        queueDuration: this.#queueDuration.labels(model, version),
        computeDuration: this.#computeDuration.labels(model, version),
        batchCompute: this.#batchCompute.labels(model, version),
        batchSize: this.#batchSize.labels(model, version),
        queueRows: undefined,
        pendingRows: undefined,
        instancesBusy: undefined,
        instances: undefined,
        busy: new BusyWindow(Date.now()),
        busyCounters: new Map(),
        loadDevice: undefined,
      };
      versions.set(version, series);
    }
    return series;
  }

  #protocolSeries(model: string, version: string, protocol: Protocol): ProtocolSeries {
    return { requests: new Map(), requestDuration: this.#requestDuration.labels(model, version, protocol) };
  }
}
