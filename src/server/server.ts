import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import { BatchserveError, UsageError } from '../errors.js';
import { ServerMetrics } from '../metrics/server-metrics.js';
import { ModelRepository } from '../repository/model-repository.js';
import { matchRoute, sendError, type Route } from './http.js';
import { inferenceRoutes, servedModel } from './inference-api.js';
import { managementRoutes } from './management-api.js';
import type { ServerConfig } from './server-config.js';

export interface StartOptions {
  readonly config: ServerConfig;
  /** Default: JSON lines on stderr at the config's log level. */
  readonly logger?: Logger;
}

export interface ApiAddresses {
  readonly inference: string;
  readonly management: string;
  readonly metrics: string;
}

export interface BatchServer {
  readonly urls: ApiAddresses;
  readonly repository: ModelRepository;
  readonly metrics: ServerMetrics;
  readonly logger: Logger;
  /** The management token; undefined with auth disabled. */
  readonly token: string | undefined;
  /** Where a generated token was written. */
  readonly keyFile: string | undefined;
  /** Models named at start that did not load; the others serve. */
  readonly startupFailures: readonly StartupFailure[];
  /**
   * Stops taking requests (readiness turns false first), answers every admitted one, then
   * closes. Resolves true when everything finished within `timeoutMs`.
   */
  drain(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export async function startServer({ config, logger: given }: StartOptions): Promise<BatchServer> {
  const logger = given ?? pino({ level: config.log_level, base: { pid: process.pid } }, pino.destination(2));
  const metrics = new ServerMetrics();
  const workRoot = await mkdtemp(join(tmpdir(), 'batchserve-'));
  const repository = new ModelRepository({
    workRoot,
    metrics,
    ...(config.model_store ? { modelStore: resolve(config.model_store) } : {}),
    ...(config.device ? { device: config.device } : {}),
  });
  let accepting = true;
  let inFlight = 0;
  const servers: Server[] = [];
  const cleanUp = async (): Promise<void> => {
    await Promise.all(servers.map((server) => closeServer(server)));
    await repository.unloadAll();
    await rm(workRoot, { recursive: true, force: true });
  };

  try {
    const { loaded: startupArchives, failures: startupFailures } = await loadStartupModels(config, repository, logger);
    const { token, keyFile } = await managementToken(config, logger);

    const handle = (routes: readonly Route[]) => (req: IncomingMessage, res: ServerResponse) => {
      const started = process.hrtime.bigint();
      inFlight += 1;
      const url = new URL(req.url ?? '/', 'http://localhost');
      void (async () => {
        try {
          const { route, params } = matchRoute(routes, req.method ?? 'GET', url.pathname);
          await route.handle(req, res, params, url);
        } catch (error) {
          sendError(res, error);
          if (!(error instanceof BatchserveError)) logger.error({ err: error, path: url.pathname }, 'request failed');
        } finally {
          inFlight -= 1;
          const seconds = Number(process.hrtime.bigint() - started) / 1e9;
          const model = servedModel.get(res);
          if (model) metrics.requestFinished(model.name, model.version, res.statusCode, seconds);
          logger.debug(
            { method: req.method, path: url.pathname, status: res.statusCode, ms: seconds * 1e3 },
            'request',
          );
        }
      })();
    };

    const inference = inferenceRoutes({
      repository,
      maxRequestSize: config.max_request_size,
      isAccepting: () => accepting,
    });
    const management = managementRoutes({
      repository,
      token,
      allowedUrls: config.allowed_urls.map((pattern) => new RegExp(pattern)),
      startupArchives,
    });
    const metricsRoutes: Route[] = [
      {
        method: 'GET',
        path: /^\/metrics$/,
        handle: async (_req, res) => {
          const text = await metrics.text();
          res.writeHead(200, { 'content-type': metrics.contentType, 'content-length': Buffer.byteLength(text) });
          res.end(text);
        },
      },
    ];
    const listen = async (routes: Route[], port: number): Promise<string> => {
      const server = createServer({ keepAliveTimeout: 5_000 }, handle(routes));
      servers.push(server);
      await new Promise<void>((ready, fail) => {
        server.once('error', fail);
        server.listen(port, config.host, () => ready());
      });
      const address = server.address() as AddressInfo;
      const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      return `http://${host}:${address.port}`;
    };
    const urls: ApiAddresses = {
      inference: await listen(inference, config.port),
      management: await listen(management, config.management_port),
      metrics: await listen(metricsRoutes, config.metrics_port),
    };

    const drain = async (timeoutMs: number): Promise<boolean> => {
      accepting = false;
      for (const server of servers) {
        server.close();
        server.closeIdleConnections();
      }
      const deadline = Date.now() + timeoutMs;
      const settled = Promise.all(repository.list().map((model) => model.unload())).then(() =>
        waitFor(() => inFlight === 0, deadline),
      );
      const finished = await Promise.race([settled, sleep(timeoutMs).then(() => false)]);
      for (const server of servers) server.closeAllConnections();
      await cleanUp();
      return finished;
    };
    return {
      urls,
      repository,
      metrics,
      logger,
      token,
      keyFile,
      startupFailures,
      drain,
      close: async () => {
        accepting = false;
        for (const server of servers) server.closeAllConnections();
        await cleanUp();
      },
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}

export interface StartupFailure {
  readonly spec: string;
  readonly message: string;
}

/**
 * Loads the models named at start. One that fails to load (a missing GPU driver, a bad
 * archive) is logged and listed, and the others serve; only when none loads does start fail.
 */
async function loadStartupModels(
  config: ServerConfig,
  repository: ModelRepository,
  logger: Logger,
): Promise<{ loaded: Set<string>; failures: StartupFailure[] }> {
  const archives: { name?: string; path: string }[] = [];
  for (const spec of config.models) {
    if (spec === 'all') {
      if (!config.model_store) throw new UsageError('--models all needs --model-store');
      archives.push(...(await repository.storeArchives()).map((path) => ({ path })));
      continue;
    }
    const at = spec.indexOf('=');
    archives.push({ name: spec.slice(0, at), path: spec.slice(at + 1) });
  }
  const loaded = new Set<string>();
  const failures: (StartupFailure & { error: unknown })[] = [];
  for (const { name, path } of archives) {
    let model;
    try {
      model = await repository.load(path);
    } catch (error) {
      if (error instanceof UsageError || !(error instanceof BatchserveError)) throw error;
      logger.error({ archive: path, code: error.code, err: error.message }, 'model failed to load; serving the others');
      failures.push({
        spec: name === undefined ? path : `${name}=${path}`,
        message: `${error.message} [${error.code}]`,
        error,
      });
      continue;
    }
    if (name !== undefined && name !== model.name) {
      throw new UsageError(
        `--models ${name}=${path}: the archive holds model "${model.name}"; use ${model.name}=${path}`,
      );
    }
    loaded.add(resolve(path));
    for (const note of model.deviceNotes) logger.info({ model: model.name, version: model.version }, note);
    logger.info({ model: model.name, version: model.version, seconds: model.loadSeconds }, 'model loaded');
  }
  if (loaded.size === 0 && failures.length > 0) throw failures[0]?.error;
  return { loaded, failures: failures.map(({ spec, message }) => ({ spec, message })) };
}

async function managementToken(
  config: ServerConfig,
  logger: Logger,
): Promise<{ token: string | undefined; keyFile: string | undefined }> {
  if (!config.auth.enabled) {
    logger.warn('management API authentication is disabled (--no-auth): anyone who reaches its port can change models');
    return { token: undefined, keyFile: undefined };
  }
  if (config.auth.token) return { token: config.auth.token, keyFile: undefined };
  const token = randomBytes(24).toString('base64url');
  const keyFile = resolve(config.auth.key_file);
  await writeFile(keyFile, `${token}\n`, { mode: 0o600 });
  await chmod(keyFile, 0o600);
  return { token, keyFile };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((done) => {
    server.closeAllConnections();
    server.close(() => done());
  });
}

const sleep = (ms: number): Promise<void> => new Promise((done) => setTimeout(done, ms).unref());

async function waitFor(condition: () => boolean, deadline: number): Promise<boolean> {
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await sleep(5);
  }
  return true;
}
