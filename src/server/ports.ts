import { createServer, type Server } from 'node:net';
import { PortInUseError, UsageError } from '../core/errors.js';
import type { ApiName, ServerConfig } from './server-config.js';

/** The APIs' ports, with the flag and variable that choose each. */
export interface ApiPort {
  readonly api: ApiName;
  readonly port: number;
  readonly flag: string;
}

export function apiPorts(config: ServerConfig): Record<ApiPort['api'], ApiPort> {
  return {
    inference: { api: 'inference', port: config.port, flag: '--port' },
    management: { api: 'management', port: config.management_port, flag: '--management-port' },
    metrics: { api: 'metrics', port: config.metrics_port, flag: '--metrics-port' },
    grpc: { api: 'grpc', port: config.grpc_port, flag: '--grpc-port' },
  };
}

/**
 * Binds every port at once and lets go: a port that is taken fails `serve` here, in a line
 * that names it, before a model has spent a minute loading. The ports stay closed while
 * models load, so a TCP probe (Knative's default readiness) never sees a half-started server.
 */
export async function checkPortsFree(config: ServerConfig): Promise<void> {
  const bound: Server[] = [];
  try {
    for (const port of Object.values(apiPorts(config))) {
      if (port.port === 0) continue;
      const server = createServer();
      await listen(server, port.port, config.host).catch((error: NodeJS.ErrnoException) => {
        throw bindError(error, port, config.host);
      });
      bound.push(server);
    }
  } finally {
    await Promise.all(bound.map((server) => new Promise((done) => server.close(done))));
  }
}

/** A failed listen as the error `serve` reports: the port, the API, the address and the way out. */
export function bindError(error: NodeJS.ErrnoException, { api, port, flag }: ApiPort, host: string): Error {
  const { code } = error;
  const variable = `BATCHSERVE_${flag.slice(2).toUpperCase().replaceAll('-', '_')}`;
  if (code === 'EADDRINUSE') {
    return new PortInUseError(
      `port ${port} (${api}) on ${host} is in use; stop what holds it, or choose another with ${flag} or ${variable} (0 picks a free one)`,
      { cause: error },
    );
  }
  if (code === 'EACCES' || code === 'EADDRNOTAVAIL' || code === 'ENOTFOUND' || code === 'EAFNOSUPPORT') {
    return new UsageError(`cannot listen on ${host} port ${port} (${api}): ${code}`, { cause: error });
  }
  return error;
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((ready, fail) => {
    server.once('error', fail);
    server.listen(port, host, () => {
      server.off('error', fail);
      ready();
    });
  });
}
