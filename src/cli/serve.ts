import { parseDuration } from '../config/schema-kit.js';
import { UsageError } from '../errors.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import { readConfigFile } from '../config/load.js';
import { validateServerConfig, type ServerConfig } from '../server/server-config.js';
import { startServer, type BatchServer } from '../server/server.js';
import { BATCHSERVE_VERSION } from '../version.js';

export interface ServeCommandOptions {
  config?: string;
  models?: string[];
  modelStore?: string;
  host?: string;
  port?: string;
  managementPort?: string;
  metricsPort?: string;
  device?: string;
  maxRequestSize?: string;
  drainTimeout?: string;
  logLevel?: string;
  auth: boolean;
  keyFile?: string;
}

/** Runs until SIGTERM/SIGINT, then drains; resolves with the exit code. */
export async function runServe(options: ServeCommandOptions): Promise<number> {
  const config = await resolveConfig(options);
  if (config.models.length === 0) {
    throw new UsageError('nothing to serve: pass --models name=path.mar (or --model-store DIR --models all)');
  }
  const server = await startServer({ config });
  process.stdout.write(startupBlock(server, config));
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  const timeoutMs = config.drain_timeout / 1000;
  server.logger.info({ signal, timeoutMs }, 'draining: readiness is false, answering admitted requests');
  const drained = await server.drain(timeoutMs);
  if (!drained) server.logger.error({ timeoutMs }, 'drain timeout passed with requests unanswered');
  else server.logger.info('drained; exiting');
  return drained ? 0 : 1;
}

async function resolveConfig(options: ServeCommandOptions): Promise<ServerConfig> {
  const fromFile = (options.config ? await readConfigFile(options.config) : {}) as Record<string, unknown>;
  const flags: Record<string, unknown> = {};
  if (options.models) flags.models = options.models;
  if (options.modelStore) flags.model_store = options.modelStore;
  if (options.host) flags.host = options.host;
  if (options.port !== undefined) flags.port = integer(options.port, '--port');
  if (options.managementPort !== undefined)
    flags.management_port = integer(options.managementPort, '--management-port');
  if (options.metricsPort !== undefined) flags.metrics_port = integer(options.metricsPort, '--metrics-port');
  if (options.device) flags.device = options.device;
  if (options.maxRequestSize !== undefined)
    flags.max_request_size = integer(options.maxRequestSize, '--max-request-size');
  if (options.drainTimeout !== undefined) {
    const micros = parseDuration(options.drainTimeout);
    if (micros === undefined)
      throw new UsageError(`--drain-timeout: expected a duration such as "10s", got "${options.drainTimeout}"`);
    flags.drain_timeout = micros;
  }
  if (options.logLevel) flags.log_level = options.logLevel;
  const fileAuth = (fromFile.auth ?? {}) as Record<string, unknown>;
  const auth = {
    ...fileAuth,
    ...(options.auth ? {} : { enabled: false }),
    ...(options.keyFile ? { key_file: options.keyFile } : {}),
  };
  return validateServerConfig({ ...fromFile, ...flags, auth }, options.config ?? 'command line');
}

function integer(value: string, flag: string): number {
  const number = Number(value);
  if (!Number.isSafeInteger(number)) throw new UsageError(`${flag}: expected an integer, got "${value}"`);
  return number;
}

function startupBlock(server: BatchServer, config: ServerConfig): string {
  const { urls } = server;
  const auth =
    server.token === undefined
      ? 'NO AUTH'
      : server.keyFile
        ? `bearer token in ${server.keyFile}`
        : 'bearer token from config';
  const lines = [
    `batchserve ${BATCHSERVE_VERSION} serving on ${config.host}`,
    `  inference   ${urls.inference}   KServe v2 /v2/…, TorchServe /predictions/…`,
    `  management  ${urls.management}   /models (${auth})`,
    `  metrics     ${urls.metrics}/metrics`,
    '  models',
    ...server.repository.list().map((model) => `    ${describeModel(model)}`),
    ...server.startupFailures.map((failure) => `    FAILED ${failure.spec}: ${failure.message}`),
    '',
  ];
  return `${lines.join('\n')}\n`;
}

function describeModel(model: LoadedModel): string {
  const { config } = model;
  const batching = config.dynamic_batching;
  const devices = model
    .devices()
    .map((device) => `${model.instances.filter((i) => i.device === device).length}×${device}`);
  const batch =
    config.max_batch_size > 0
      ? `max_batch_size ${config.max_batch_size}, delay ${batching.max_queue_delay} µs, preferred [${batching.preferred_batch_sizes.join(', ')}], queue ${batching.max_queue_size}`
      : 'no batching';
  return `${model.name} v${model.version}  ${model.manifest.model.handler} handler  ${devices.join(' ')}  ${batch}  (loaded in ${model.loadSeconds.toFixed(2)} s)`;
}
