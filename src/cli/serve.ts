import { UsageError } from '../core/errors.js';
import { readConfigFile } from '../config/load.js';
import { validateServerConfig, type ServerConfig } from '../server/server-config.js';
import { startServer } from '../server/server.js';
import { renderStartupBlock } from '../server/startup-block.js';
import { durationOption, integerOption } from './options.js';

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
  headersTimeout?: string;
  requestTimeout?: string;
  keepAliveTimeout?: string;
  maxConnections?: string;
  maxHeaderSize?: string;
  drainTimeout?: string;
  logLevel?: string;
  auth: boolean;
  keyFile?: string;
  modelControl?: string;
}

/** Runs until SIGTERM/SIGINT, then drains; resolves with the exit code. */
export async function runServe(options: ServeCommandOptions): Promise<number> {
  const config = await resolveConfig(options);
  if (config.models.length === 0) {
    throw new UsageError('nothing to serve: pass --models name=path.mar (or --model-store DIR --models all)');
  }
  const server = await startServer({ config });
  process.stdout.write(renderStartupBlock(server, config));
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
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

async function resolveConfig(options: ServeCommandOptions): Promise<ServerConfig> {
  const fromFile = (options.config ? await readConfigFile(options.config) : {}) as Record<string, unknown>;
  const flags: Record<string, unknown> = {};
  if (options.models) flags.models = options.models;
  if (options.modelStore) flags.model_store = options.modelStore;
  if (options.host) flags.host = options.host;
  if (options.port !== undefined) flags.port = integerOption(options.port, '--port');
  if (options.managementPort !== undefined)
    flags.management_port = integerOption(options.managementPort, '--management-port');
  if (options.metricsPort !== undefined) flags.metrics_port = integerOption(options.metricsPort, '--metrics-port');
  if (options.device) flags.device = options.device;
  if (options.maxRequestSize !== undefined)
    flags.max_request_size = integerOption(options.maxRequestSize, '--max-request-size');
  if (options.headersTimeout !== undefined)
    flags.headers_timeout = durationOption(options.headersTimeout, '--headers-timeout');
  if (options.requestTimeout !== undefined)
    flags.request_timeout = durationOption(options.requestTimeout, '--request-timeout');
  if (options.keepAliveTimeout !== undefined)
    flags.keep_alive_timeout = durationOption(options.keepAliveTimeout, '--keep-alive-timeout');
  if (options.maxConnections !== undefined)
    flags.max_connections = integerOption(options.maxConnections, '--max-connections');
  if (options.maxHeaderSize !== undefined)
    flags.max_header_size = integerOption(options.maxHeaderSize, '--max-header-size');
  if (options.drainTimeout !== undefined) flags.drain_timeout = durationOption(options.drainTimeout, '--drain-timeout');
  if (options.logLevel) flags.log_level = options.logLevel;
  if (options.modelControl) flags.model_control = options.modelControl;
  const fileAuth = (fromFile.auth ?? {}) as Record<string, unknown>;
  const auth = {
    ...fileAuth,
    ...(options.auth ? {} : { enabled: false }),
    ...(options.keyFile ? { key_file: options.keyFile } : {}),
  };
  return validateServerConfig({ ...fromFile, ...flags, auth }, options.config ?? 'command line');
}
