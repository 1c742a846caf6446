import type { ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { ModelLoadError } from '../core/errors.js';
import { formatDuration } from '../config/schema-kit.js';
import { latencyBudgetUs, type LoadedModel } from '../repository/loaded-model.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { firstCommands } from './first-commands.js';
import type { ServerConfig, TlsConfig } from './server-config.js';
import { tracingPlan, type TracingPlan } from './tracing.js';
import type { ApiAddresses, BatchServer } from './server.js';

/** The line after which the block lists models; the URLs are all known by then. */
const MODELS_HEADING = '  models\n';
/** The `msg` of the start-up block written as one JSON log line. */
const STARTUP_MESSAGE = 'serving';

/** How the start-up block names the batchserve command in the commands it offers: a name on PATH or the bin's path. */
export interface StartupOptions {
  readonly batchserve?: string;
}

/**
 * What `serve` prints once it listens: where each API is, what each model is, and three
 * commands to try against it.
 */
export function renderStartupBlock(server: BatchServer, config: ServerConfig, options: StartupOptions = {}): string {
  const tryLines = firstCommands(server, options.batchserve ?? 'batchserve');
  const { urls } = server;
  const traces = tracingPlan(config.tracing);
  const auth =
    server.token === undefined
      ? 'NO AUTH'
      : server.keys?.mode === 'torchserve'
        ? `TorchServe's management, inference and API keys in ${server.keyFile}`
        : server.keyFile
          ? `bearer token in ${server.keyFile}`
          : 'bearer token from config';
  const lines = [
    `batchserve ${BATCHSERVE_VERSION} serving on ${config.host}`,
    `  inference   ${urls.inference}   KServe v2 /v2/…, TorchServe /predictions/…, OpenAI /v1/…${server.keys?.guards('inference') ? ' (the inference key)' : ''}`,
    `  management  ${urls.management}   /models (${auth})`,
    `  metrics     ${urls.metrics}/metrics`,
    `  grpc        ${urls.grpc}   KServe v2 / Triton inference.GRPCInferenceService, health, reflection`,
    ...(config.tls ? [`  tls         ${describeTls(config.tls)}`] : []),
    ...(traces ? [`  traces      ${describeTracing(traces)}`] : []),
    `  work dir    ${server.workDir}`,
    ...(config.prediction_log === undefined ? [] : [`  predictions ${resolve(config.prediction_log)}/<model>/`]),
    '  models',
    ...server.repository.list().map((model) => `    ${describeModel(model)}${versionRole(server, model)}`),
    ...server.startupFailures.map((failure) => `    FAILED ${failure.spec}: ${failure.message}`),
    ...(tryLines.length > 0 ? ['  try', ...tryLines.map((line) => `    ${line}`)] : []),
    '',
  ];
  return `${lines.join('\n')}\n`;
}

/**
 * The start-up block as one JSON log line, in pino's shape (`level` 30 is info), for log
 * collectors: where a container's stdout goes, every line is JSON.
 */
export function renderStartupLine(
  server: BatchServer,
  config: ServerConfig,
  options: StartupOptions = {},
  now = Date.now(),
): string {
  const record = {
    level: 30,
    time: now,
    pid: process.pid,
    version: BATCHSERVE_VERSION,
    host: config.host,
    // As the text block prints them: the metrics URL is the scrape URL.
    urls: { ...server.urls, metrics: `${server.urls.metrics}/metrics` },
    auth:
      server.token === undefined
        ? 'none'
        : server.keys?.mode === 'torchserve'
          ? 'torchserve'
          : server.keyFile
            ? 'key_file'
            : 'config',
    ...(server.keyFile ? { keyFile: server.keyFile } : {}),
    ...(config.tls ? { tls: tlsRecord(config.tls) } : {}),
    ...(tracingRecord(config) ?? {}),
    workDir: server.workDir,
    ...(config.prediction_log === undefined ? {} : { predictionLog: resolve(config.prediction_log) }),
    models: server.repository.list().map((model) => ({
      name: model.name,
      version: model.version,
      handler: model.manifest.model.handler,
      archive: model.archivePath,
      devices: model.instances.map((instance) => instance.device),
      maxBatchSize: model.config.max_batch_size,
      maxQueueDelayUs: model.config.dynamic_batching.max_queue_delay,
      preferredBatchSizes: model.config.dynamic_batching.preferred_batch_sizes,
      maxQueueSize: model.config.dynamic_batching.max_queue_size,
      loadSeconds: model.loadSeconds,
      default: server.repository.defaultVersion(model.name) === model.version,
    })),
    failures: server.startupFailures,
    try: firstCommands(server, options.batchserve ?? 'batchserve'),
    msg: STARTUP_MESSAGE,
  };
  return `${JSON.stringify(record)}\n`;
}

/** The certificate, and where client certificates are required. */
function describeTracing(plan: TracingPlan): string {
  const where = plan.url ?? 'OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT';
  return `OpenTelemetry over OTLP/HTTP to ${where}; sampled parents followed, other requests at ${plan.ratio}`;
}

/** The JSON line's `tracing`, when on. */
function tracingRecord(config: ServerConfig): { tracing: Record<string, unknown> } | undefined {
  const plan = tracingPlan(config.tracing);
  return plan ? { tracing: { ...(plan.url ? { url: plan.url } : {}), sampleRatio: plan.ratio } } : undefined;
}

function describeTls(tls: TlsConfig): string {
  const clients =
    tls.client_ca === undefined
      ? ''
      : `; client certificates from ${resolve(tls.client_ca)} required on ${tls.client_auth.join(', ')}`;
  return `${resolve(tls.cert)} on every port, TLS 1.2+, reloaded on SIGHUP${clients}`;
}

/** The JSON line's `tls`: the URLs' schemes say which ports, this what they serve and ask. */
function tlsRecord(tls: TlsConfig): Record<string, unknown> {
  return {
    cert: resolve(tls.cert),
    ...(tls.client_ca === undefined ? {} : { clientCa: resolve(tls.client_ca), clientAuth: tls.client_auth }),
  };
}

/** `2000 µs`, or `auto (max_latency 30s)`. */
function describeDelay(batching: LoadedModel['config']['dynamic_batching']): string {
  return batching.max_queue_delay === 'auto'
    ? `auto (max_latency ${formatDuration(latencyBudgetUs(batching))})`
    : `${batching.max_queue_delay} µs`;
}

/**
 * Where a model has several versions loaded, which one answers requests that name none, and
 * that the others take traffic only when told to.
 */
function versionRole(server: BatchServer, model: LoadedModel): string {
  const { repository } = server;
  if (repository.versions(model.name).length < 2) return '';
  return repository.defaultVersion(model.name) === model.version
    ? '  [default: answers requests that name no version]'
    : '  [no traffic until set-default, a split or a canary gives it some]';
}

function describeModel(model: LoadedModel): string {
  const { config } = model;
  const batching = config.dynamic_batching;
  const devices = model
    .devices()
    .map((device) => `${model.instances.filter((i) => i.device === device).length}×${device}`);
  const batch =
    config.max_batch_size > 0
      ? `max_batch_size ${config.max_batch_size}, delay ${describeDelay(batching)}, preferred [${batching.preferred_batch_sizes.join(', ')}], queue ${batching.max_queue_size}`
      : 'no batching';
  return `${model.name} v${model.version}  ${model.manifest.model.handler} handler  ${devices.join(' ')}  ${batch}  (loaded in ${model.loadSeconds.toFixed(2)} s)`;
}

/**
 * The URLs in a start-up block, text or JSON line, for programs that run `serve` as a child
 * (bench, tests); undefined until the block has been printed up to its models heading, or
 * its JSON line in full.
 */
export function parseStartupUrls(output: string): ApiAddresses | undefined {
  if (output.includes(MODELS_HEADING)) {
    const url = (name: string, scheme = 'https?'): string =>
      new RegExp(`${name}\\s+(${scheme}://\\S+)`).exec(output)?.[1] ?? '';
    return {
      inference: url('inference'),
      management: url('management'),
      metrics: url('metrics'),
      grpc: url('grpc', 'grpcs?'),
    };
  }
  for (const line of output.split('\n')) {
    const record = parseJsonLine(line);
    if (record?.msg === STARTUP_MESSAGE && record.urls) return record.urls;
  }
  return undefined;
}

function parseJsonLine(line: string): { msg?: unknown; urls?: ApiAddresses } | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    return JSON.parse(line) as { msg?: unknown; urls?: ApiAddresses };
  } catch {
    // A line still being written.
    return undefined;
  }
}

/**
 * The URLs a `serve` child listens on, once its start-up block is out; rejects with its last
 * stderr line (when stderr is piped) if it exits first. `what` names it in that error.
 */
export function waitForStartupUrls(child: ChildProcess, what = 'serve'): Promise<ApiAddresses> {
  return new Promise((ready, fail) => {
    let stdout = '';
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const urls = parseStartupUrls(stdout);
      if (urls) ready(urls);
    });
    child.once('exit', (code) => {
      const line = stderr.trim().split('\n').at(-1) ?? '';
      fail(new ModelLoadError(`${what} exited with ${code}: ${line.replace(/^batchserve: /, '')}`));
    });
  });
}
