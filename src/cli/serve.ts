import { readFile, realpath } from 'node:fs/promises';
import { basename, delimiter, join } from 'node:path';
import { InputFileError, UsageError } from '../core/errors.js';
import { hasServingNodeFlags, SERVING_NODE_FLAGS } from '../core/serving-node-flags.js';
import { readConfigFile } from '../config/load.js';
import { parseProperties, serverConfigOfProperties, type PropertiesReading } from '../config/torchserve-properties.js';
import { isSingleArchiveStore } from '../repository/store-catalog.js';
import { validateServerConfig, type ServerConfig } from '../server/server-config.js';
import { startServer } from '../server/server.js';
import { renderStartupBlock, renderStartupLine } from '../server/startup-block.js';
import { durationOption, integerOption } from './options.js';

export interface ServeCommandOptions {
  config?: string;
  models?: string[];
  modelStore?: string;
  modelRepository?: string;
  loadModel?: string[];
  repositoryPollSecs?: string;
  modelName?: string;
  workDir?: string;
  host?: string;
  port?: string;
  managementPort?: string;
  metricsPort?: string;
  grpcPort?: string;
  grpcMaxStreams?: string;
  grpcMaxMetadataSize?: string;
  grpcKeepaliveTime?: string;
  grpcKeepaliveTimeout?: string;
  device?: string;
  maxRequestSize?: string;
  headersTimeout?: string;
  requestTimeout?: string;
  keepAliveTimeout?: string;
  maxConnections?: string;
  maxHeaderSize?: string;
  drainTimeout?: string;
  gpuMetricsInterval?: string;
  logLevel?: string;
  startupFormat?: string;
  auth: boolean;
  keyFile?: string;
  authMode?: 'single' | 'torchserve';
  tsConfig?: string;
  tlsCert?: string;
  tlsKey?: string;
  tlsClientCa?: string;
  tlsClientAuth?: string[];
  otlpEndpoint?: string;
  traceSampleRatio?: string;
  stateFile?: string;
  predictionLog?: string;
  modelControl?: string;
  modelControlMode?: string;
}

/**
 * Where a flag's value came from, for messages: the flag itself (`--port`), or the variable
 * commander read it from (`BATCHSERVE_PORT`).
 */
export type OptionOrigin = (key: keyof ServeCommandOptions) => { readonly name: string; readonly fromEnv: boolean };

const fromFlags: OptionOrigin = (key) => ({
  name: `--${key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`,
  fromEnv: false,
});

/** Runs until SIGTERM/SIGINT, then drains; resolves with the exit code. */
export async function runServe(options: ServeCommandOptions, origin: OptionOrigin = fromFlags): Promise<number> {
  const { config, propertyWarnings } = await resolveConfig(options, origin);
  if (config.models.length === 0 && config.model_repository === undefined) {
    throw new UsageError(
      'nothing to serve: pass --models name=path.mar, --model-store DIR --models all (a model store that is one archive needs no --models), or --model-repository DIR (a Triton model repository)',
    );
  }
  const server = await startServer({ config });
  if (!hasServingNodeFlags(process.execArgv)) {
    server.logger.info(
      { nodeFlags: SERVING_NODE_FLAGS },
      "serving without the server's V8 flags: Node was started without them (the batchserve bin starts it with them; docs/serving.md, The server's heap)",
    );
  }
  for (const warning of propertyWarnings)
    server.logger.warn({ file: options.tsConfig }, `config.properties: ${warning}`);
  // Listening before the block is printed: whoever reads it may signal at once. SIGHUP, which
  // would end the process, reloads the certificates instead when there are some.
  if (server.tls) process.on('SIGHUP', () => void server.reloadTls());
  const stopped = new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  const json = config.startup_format === 'json' || (config.startup_format === 'auto' && !process.stdout.isTTY);
  const startup = { batchserve: await batchserveCommand() };
  process.stdout.write(json ? renderStartupLine(server, config, startup) : renderStartupBlock(server, config, startup));
  const signal = await stopped;
  const timeoutMs = config.drain_timeout / 1000;
  server.logger.info({ signal, timeoutMs }, 'draining: readiness is false, answering admitted requests');
  const drained = await server.drain(timeoutMs);
  if (drained) {
    server.logger.info('drained; exiting');
    return 0;
  }
  server.logger.error({ timeoutMs }, 'drain timeout passed with requests unanswered');
  // The stuck handler (its worker thread, its timers) would keep the process alive past the deadline.
  process.exit(1);
}

/** Flags (and the variables commander read for them) over server.yaml over the defaults. */
async function resolveConfig(
  options: ServeCommandOptions,
  origin: OptionOrigin,
): Promise<{ config: ServerConfig; propertyWarnings: string[] }> {
  const name = (key: keyof ServeCommandOptions): string => origin(key).name;
  for (const key of Object.keys(options) as (keyof ServeCommandOptions)[]) {
    const { name: variable, fromEnv } = origin(key);
    if (fromEnv && process.env[variable]?.trim() === '') {
      throw new UsageError(`${variable} is set but empty: give it a value or unset it`);
    }
  }
  // TorchServe's config.properties (--ts-config) under server.yaml, under the flags.
  const properties = options.tsConfig ? await readTorchServeProperties(options.tsConfig) : undefined;
  const fromFile = {
    ...properties?.config,
    ...((options.config ? await readConfigFile(options.config) : {}) as Record<string, unknown>),
  };
  const flags: Record<string, unknown> = {};
  const integer = (key: keyof ServeCommandOptions, value: string): number => integerOption(value, name(key));
  const duration = (key: keyof ServeCommandOptions, value: string): number => durationOption(value, name(key));
  if (options.models) flags.models = options.models;
  if (options.modelStore) flags.model_store = options.modelStore;
  if (options.modelName) flags.model_name = options.modelName;
  if (options.workDir) flags.work_dir = options.workDir;
  if (options.host) flags.host = options.host;
  if (options.port !== undefined) flags.port = integer('port', options.port);
  if (options.managementPort !== undefined) flags.management_port = integer('managementPort', options.managementPort);
  if (options.metricsPort !== undefined) flags.metrics_port = integer('metricsPort', options.metricsPort);
  if (options.grpcPort !== undefined) flags.grpc_port = integer('grpcPort', options.grpcPort);
  if (options.grpcMaxStreams !== undefined) flags.grpc_max_streams = integer('grpcMaxStreams', options.grpcMaxStreams);
  if (options.grpcMaxMetadataSize !== undefined)
    flags.grpc_max_metadata_size = integer('grpcMaxMetadataSize', options.grpcMaxMetadataSize);
  if (options.grpcKeepaliveTime !== undefined)
    flags.grpc_keepalive_time = duration('grpcKeepaliveTime', options.grpcKeepaliveTime);
  if (options.grpcKeepaliveTimeout !== undefined)
    flags.grpc_keepalive_timeout = duration('grpcKeepaliveTimeout', options.grpcKeepaliveTimeout);
  if (options.device) flags.device = options.device;
  if (options.maxRequestSize !== undefined) flags.max_request_size = integer('maxRequestSize', options.maxRequestSize);
  if (options.headersTimeout !== undefined) flags.headers_timeout = duration('headersTimeout', options.headersTimeout);
  if (options.requestTimeout !== undefined) flags.request_timeout = duration('requestTimeout', options.requestTimeout);
  if (options.keepAliveTimeout !== undefined)
    flags.keep_alive_timeout = duration('keepAliveTimeout', options.keepAliveTimeout);
  if (options.maxConnections !== undefined) flags.max_connections = integer('maxConnections', options.maxConnections);
  if (options.maxHeaderSize !== undefined) flags.max_header_size = integer('maxHeaderSize', options.maxHeaderSize);
  if (options.drainTimeout !== undefined) flags.drain_timeout = duration('drainTimeout', options.drainTimeout);
  if (options.gpuMetricsInterval !== undefined) {
    flags.gpu_metrics_interval = duration('gpuMetricsInterval', options.gpuMetricsInterval);
  }
  if (options.logLevel) flags.log_level = options.logLevel;
  if (options.startupFormat) flags.startup_format = options.startupFormat;
  if (options.stateFile) flags.state_file = options.stateFile;
  if (options.predictionLog) flags.prediction_log = options.predictionLog;
  if (options.modelControl) flags.model_control = options.modelControl;
  if (options.modelControlMode) flags.model_control = options.modelControlMode;
  if (options.modelRepository) flags.model_repository = options.modelRepository;
  if (options.loadModel) flags.load_model = options.loadModel;
  if (options.repositoryPollSecs !== undefined) {
    const seconds = Number(options.repositoryPollSecs);
    if (options.repositoryPollSecs.trim() === '' || !Number.isFinite(seconds)) {
      throw new UsageError(
        `${name('repositoryPollSecs')}: expected a number of seconds, got "${options.repositoryPollSecs}"`,
      );
    }
    flags.repository_poll_secs = seconds;
  }
  const fileAuth = { ...(properties?.config.auth as object), ...(fromFile.auth ?? {}) } as Record<string, unknown>;
  const authEnabled = options.auth ? authFromEnv() : false;
  const auth = {
    ...fileAuth,
    ...(authEnabled === undefined ? {} : { enabled: authEnabled }),
    ...(options.keyFile ? { key_file: options.keyFile } : {}),
    ...(options.authMode ? { mode: options.authMode } : {}),
  };
  const tls = {
    ...(properties?.config.tls as object),
    ...(fromFile.tls ?? {}),
    ...(options.tlsCert ? { cert: options.tlsCert } : {}),
    ...(options.tlsKey ? { key: options.tlsKey } : {}),
    ...(options.tlsClientCa ? { client_ca: options.tlsClientCa } : {}),
    ...(options.tlsClientAuth ? { client_auth: options.tlsClientAuth } : {}),
  };
  const tracing = {
    ...(fromFile.tracing ?? {}),
    ...(options.otlpEndpoint ? { otlp_endpoint: options.otlpEndpoint } : {}),
    ...(options.traceSampleRatio !== undefined
      ? { sample_ratio: ratioOption(options.traceSampleRatio, name('traceSampleRatio')) }
      : {}),
  };
  const raw: Record<string, unknown> = {
    ...fromFile,
    ...flags,
    auth,
    ...(Object.keys(tls).length > 0 ? { tls } : {}),
    ...(Object.keys(tracing).length > 0 ? { tracing } : {}),
  };
  // A storageUri naming one archive: that archive is what there is to serve.
  const models = raw.models;
  if (
    (models === undefined || (Array.isArray(models) && models.length === 0)) &&
    typeof raw.model_store === 'string' &&
    (await isSingleArchiveStore(raw.model_store))
  ) {
    raw.models = ['all'];
  }
  return {
    config: validateServerConfig(raw, options.config ?? options.tsConfig ?? 'command line'),
    propertyWarnings: properties?.warnings ?? [],
  };
}

async function readTorchServeProperties(file: string): Promise<PropertiesReading> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new InputFileError(`--ts-config ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  return serverConfigOfProperties(parseProperties(text));
}

/** `BATCHSERVE_AUTH=false` is `--no-auth`; `true` (or unset) leaves it to the file and the default. */
function authFromEnv(): boolean | undefined {
  const value = process.env.BATCHSERVE_AUTH;
  if (value === undefined) return undefined;
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new UsageError(`BATCHSERVE_AUTH: expected true or false, got "${value}"`);
}

/**
 * How the commands the start-up block offers run batchserve again: `batchserve` where that
 * name on PATH is this bin (npm link, npm install -g, the image), else `node` and the bin's path.
 */
async function batchserveCommand(): Promise<string> {
  const bin = process.argv[1];
  const self = bin === undefined ? undefined : await realpath(bin).catch(() => undefined);
  if (self === undefined || basename(self) !== 'batchserve.js') return 'batchserve';
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    if ((await realpath(join(dir, 'batchserve')).catch(() => undefined)) === self) return 'batchserve';
  }
  return /^[\w./:-]+$/.test(self) ? `node ${self}` : `node '${self.replaceAll("'", "'\\''")}'`;
}

/** A share from 0 to 1 (the schema checks the range, naming the key). */
function ratioOption(value: string, flag: string): number {
  const ratio = Number(value);
  if (value.trim() === '' || !Number.isFinite(ratio))
    throw new UsageError(`${flag}: expected a number from 0 to 1, got "${value}"`);
  return ratio;
}
