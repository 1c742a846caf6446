import type { IncomingMessage, Server, ServerOptions, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { pino, type Logger } from 'pino';
import {
  BatchserveError,
  InputFileError,
  ModelNotFoundError,
  PipelineInvalidError,
  UsageError,
} from '../core/errors.js';
import { checkModelName } from '../core/model-name.js';
import { ServerMetrics } from '../metrics/server-metrics.js';
import { ModelRepository, type TritonPollReport } from '../repository/model-repository.js';
import { RepositoryPoll } from '../repository/repository-poll.js';
import { readArchiveIdentity, readStoreCatalog, type ArchiveIdentity } from '../repository/store-catalog.js';
import { describeVersionPolicy } from '../repository/version-policy.js';
import { matchRoute, sendError, type Route } from './http.js';
import { KeyRing } from './auth.js';
import { withApiDescription } from './api-description.js';
import { clientWentAway } from './client-gone.js';
import { inferenceRoutes, type InferenceApiOptions } from './inference-api.js';
import { openAiRoutes } from './openai-api.js';
import { tritonGenerateRoutes } from './triton-generate.js';
import { inferenceCall, outcomeRecorder } from './inference-call.js';
import { openTracing, settingsWithoutTracing, tracingPlan } from './tracing.js';
import { PredictionLogs } from './prediction-logging.js';
import { GrpcInferenceApi } from './grpc-api.js';
import { startGrpcServer, type GrpcEndpoint } from './grpc-server.js';
import { HttpConnections } from './http-connections.js';
import { managementRoutes } from './management-api.js';
import { apiPorts, bindError, checkPortsFree, type ApiPort } from './ports.js';
import type { ServerConfig } from './server-config.js';
import { createApiServer, reloadTls, ServerTls } from './tls.js';
import { createWorkFolder, removeWorkFolder } from './work-dir.js';
import { RoutingStateFile } from '../traffic/routing-state.js';
import { TrafficControl } from '../traffic/traffic-control.js';

export interface StartOptions {
  readonly config: ServerConfig;
  /** Default: JSON lines on stderr at the config's log level. */
  readonly logger?: Logger;
}

export interface ApiAddresses {
  readonly inference: string;
  readonly management: string;
  readonly metrics: string;
  /** `grpc://host:port`, or `grpcs://host:port` with TLS. */
  readonly grpc: string;
}

export interface BatchServer {
  readonly urls: ApiAddresses;
  readonly repository: ModelRepository;
  readonly metrics: ServerMetrics;
  readonly traffic: TrafficControl;
  readonly logger: Logger;
  /** The certificates every port serves; undefined without TLS. */
  readonly tls: ServerTls | undefined;
  /**
   * Reads the TLS files again (SIGHUP): new connections get the new certificates, open ones
   * keep theirs. Logs the outcome; false when there is no TLS or the files did not check.
   */
  reloadTls(): Promise<boolean>;
  /** The management token (key) at start; undefined with auth disabled. */
  readonly token: string | undefined;
  /** Where a generated token (or TorchServe's keys) was written. */
  readonly keyFile: string | undefined;
  /** Every key the server checks; undefined with auth disabled. */
  readonly keys: KeyRing | undefined;
  /** Models named at start that did not load; the others serve. */
  readonly startupFailures: readonly StartupFailure[];
  /** This server's own folder under `work_dir`, where archives are extracted; removed at close. */
  readonly workDir: string;
  /** With model_control: poll, reads the model repository now rather than at the next interval. */
  pollRepository(): Promise<TritonPollReport>;
  /**
   * Stops taking requests (readiness turns false first), answers every admitted one, then
   * closes. Resolves true when everything finished within `timeoutMs`.
   */
  drain(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}

export async function startServer({ config, logger: given }: StartOptions): Promise<BatchServer> {
  const logger = given ?? pino({ level: config.log_level, base: { pid: process.pid } }, pino.destination(2));
  const workRoot = resolve(config.work_dir ?? tmpdir());
  refuseWritesIntoStore(config, workRoot);
  const tls = config.tls ? await ServerTls.open(config.tls) : undefined;
  const tracePlan = tracingPlan(config.tracing);
  const tracing = tracePlan ? await openTracing(tracePlan) : undefined;
  // Before anything is loaded or created: a taken port fails at once.
  await checkPortsFree(config);
  const metrics = new ServerMetrics({
    gpu: { intervalMs: config.gpu_metrics_interval / 1000, log: (message) => logger.info(message) },
  });
  const workFolder = await createWorkFolder(workRoot);
  for (const folder of workFolder.removed) {
    logger.info({ folder }, 'removed the work folder of a batchserve process that is gone');
  }
  const repository = new ModelRepository({
    workRoot: workFolder.path,
    metrics,
    logger,
    ...(config.model_store ? { modelStore: resolve(config.model_store) } : {}),
    ...(config.model_name ? { storeModelName: config.model_name } : {}),
    ...(config.device ? { device: config.device } : {}),
    ...(config.model_policies ? { policies: config.model_policies } : {}),
    ...(config.model_repository ? { tritonRepository: resolve(config.model_repository) } : {}),
  });
  const modelControl = config.model_control;
  let poll: RepositoryPoll | undefined;
  let accepting = true;
  let inFlight = 0;
  const servers: Server[] = [];
  const connections: HttpConnections[] = [];
  let traffic: TrafficControl | undefined;
  let logs: PredictionLogs | undefined;
  let grpc: GrpcEndpoint | undefined;
  const cleanUp = async (): Promise<void> => {
    await poll?.stop();
    traffic?.close();
    grpc?.close();
    // After the servers stop answering, so the last answers' records are in it.
    await logs?.close();
    await Promise.all(servers.map((server) => closeServer(server)));
    await repository.unloadAll();
    // After the last answers: their spans go out with the rest.
    await tracing?.shutdown();
    metrics.close();
    await removeWorkFolder(workFolder.path);
  };

  try {
    const stateFile = new RoutingStateFile(resolve(config.state_file));
    const saved = await stateFile.read();
    const { loaded: startupArchives, failures: startupFailures } = await loadStartupModels(config, repository, logger);
    const keys = await serverKeys(config, logger);
    const token = keys?.management;
    const keyFile = keys?.file;
    const control = TrafficControl.open({
      repository,
      metrics,
      logger,
      policies: config.model_policies ?? {},
      stateFile,
      saved,
      // Asked only when a canary starts, by then the logs below exist: feedback tells canaries,
      // canaries ask whether feedback joins.
      feedbackJoins: (model) => predictionLogs.joins(model),
    });
    traffic = control;
    const predictionLogs = new PredictionLogs({
      repository,
      traffic: control,
      metrics,
      logger,
      serverFolder: config.prediction_log === undefined ? undefined : resolve(config.prediction_log),
    });
    logs = predictionLogs;

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
          if (clientWentAway(req, error)) logger.debug({ path: url.pathname, err: String(error) }, 'client went away');
          else if (!(error instanceof BatchserveError))
            logger.error({ err: error, path: url.pathname }, 'request failed');
        } finally {
          inFlight -= 1;
          const seconds = Number(process.hrtime.bigint() - started) / 1e9;
          logger.debug(
            { method: req.method, path: url.pathname, status: res.statusCode, ms: seconds * 1e3 },
            'request',
          );
        }
      })();
    };

    // The one inference call under every front door: v2 REST, TorchServe, gRPC and OpenAI.
    const infer = inferenceCall({
      repository,
      traffic: control,
      logs: predictionLogs,
      keys,
      isAccepting: () => accepting,
      requestFinished: outcomeRecorder(metrics, control, predictionLogs),
      ...(tracing ? { tracing } : {}),
    });
    const inferenceOptions: InferenceApiOptions = {
      repository,
      traffic: control,
      maxRequestSize: config.max_request_size,
      isAccepting: () => accepting,
      keys,
      modelControl,
      infer,
      logs: predictionLogs,
      traceSettings: tracing?.settings ?? settingsWithoutTracing(),
    };
    const inference = [
      ...inferenceRoutes(inferenceOptions),
      ...tritonGenerateRoutes(inferenceOptions),
      ...openAiRoutes(inferenceOptions),
    ];
    const management = managementRoutes({
      repository,
      traffic: control,
      keys,
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
    const ports = apiPorts(config);
    const listen = async (routes: Route[], port: ApiPort): Promise<string> => {
      const server = createApiServer(port.api, tls, httpLimits(config), handle(routes));
      server.maxConnections = config.max_connections;
      servers.push(server);
      connections.push(new HttpConnections(server));
      await new Promise<void>((ready, fail) => {
        // Taken since the check at start: reported the same way.
        server.once('error', (error) => fail(bindError(error, port, config.host)));
        server.listen(port.port, config.host, () => ready());
      });
      const address = server.address() as AddressInfo;
      const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      return `${tls ? 'https' : 'http'}://${host}:${address.port}`;
    };
    const grpcApi = new GrpcInferenceApi({
      repository,
      traffic: control,
      infer,
      isAccepting: () => accepting,
      keys,
      modelControl,
      maxStreams: config.grpc_max_streams,
      maxMetadataBytes: config.grpc_max_metadata_size,
      traceSettings: inferenceOptions.traceSettings,
    });
    const urls: ApiAddresses = {
      inference: await listen(withApiDescription(inference, 'batchserve inference API'), ports.inference),
      management: await listen(withApiDescription(management, 'batchserve management API'), ports.management),
      metrics: await listen(metricsRoutes, ports.metrics),
      grpc: (grpc = await startGrpcServer(config, grpcApi, ports.grpc, tls)).url,
    };

    if (modelControl === 'poll') {
      poll = new RepositoryPoll(repository, config.repository_poll_secs * 1000, (report) => {
        // Loads and unloads are logged by the repository, as every other one is.
        for (const { name, message } of report.failed)
          logger.error({ model: name, err: message }, 'poll: model failed');
      });
      poll.start();
    }

    const drain = async (timeoutMs: number): Promise<boolean> => {
      accepting = false;
      await poll?.stop();
      // Canaries stop judging first: versions draining away for shutdown are not a failed candidate.
      control.close();
      const closed = Promise.all(connections.map((port) => port.drain()));
      const deadline = Date.now() + timeoutMs;
      const settled = Promise.all([...repository.list().map((model) => model.unload()), grpc?.drain()]).then(() =>
        waitFor(() => inFlight === 0, deadline),
      );
      const finished = await Promise.race([settled, sleep(timeoutMs).then(() => false)]);
      // A connection still idle at the deadline loses nothing when it is cut; one still answering does.
      await Promise.race([closed, sleep(deadline - Date.now())]);
      for (const port of connections) port.closeAll();
      if (finished) await cleanUp();
      // Past the deadline a batch stuck in a handler would hold the unload for as long as it is
      // stuck: cleaning up goes on without being awaited, and the caller decides whether to exit.
      else void cleanUp().catch((error: unknown) => logger.error({ err: error }, 'clean-up after a drain timeout'));
      return finished;
    };
    return {
      urls,
      repository,
      metrics,
      traffic: control,
      logger,
      tls,
      reloadTls: () => reloadTls(tls, logger),
      token,
      keyFile,
      keys,
      startupFailures,
      workDir: workFolder.path,
      pollRepository: () => {
        if (!poll) throw new UsageError('the model repository is polled only with model_control: poll');
        return poll.pollNow();
      },
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

/**
 * The HTTP limits of every port, from the config. Node checks the header and request timeouts
 * only every `connectionsCheckingInterval` (30 s by default), so the check runs often enough
 * for a slow client to be cut close to its timeout.
 */
function httpLimits(config: ServerConfig): ServerOptions {
  const headersTimeout = config.headers_timeout / 1000;
  return {
    headersTimeout,
    requestTimeout: config.request_timeout / 1000,
    keepAliveTimeout: config.keep_alive_timeout / 1000,
    maxHeaderSize: config.max_header_size,
    connectionsCheckingInterval: Math.min(1000, Math.max(50, headersTimeout / 4)),
  };
}

export interface StartupFailure {
  readonly spec: string;
  readonly message: string;
}

/**
 * Loads the models named at start. Manifests are read first so that each model's version
 * policy sees every version offered; the versions it excludes are skipped. One that fails to
 * load (a missing GPU driver, a bad archive) is logged and listed, and the others serve; only
 * when none loads does start fail.
 */
async function loadStartupModels(
  config: ServerConfig,
  repository: ModelRepository,
  logger: Logger,
): Promise<{ loaded: Set<string>; failures: StartupFailure[] }> {
  const offered: (ArchiveIdentity & { spec: string; fromStore?: boolean })[] = [];
  const failures: (StartupFailure & { error: unknown })[] = [];
  const fail = (spec: string, path: string, error: BatchserveError): void => {
    logger.error({ archive: path, code: error.code, err: error.message }, 'model failed to load; serving the others');
    failures.push({ spec, message: `${error.message} [${error.code}]`, error });
  };
  if (config.model_repository !== undefined) {
    const wanted = config.model_control === 'explicit' ? config.load_model : ['*'];
    const all = wanted.includes('*');
    const { archives, unreadable } = await repository.storeCatalog();
    offered.push(
      ...archives
        .filter((version) => all || wanted.includes(version.name))
        .map((version) => ({ ...version, spec: version.path, fromStore: true })),
    );
    for (const { path, error } of unreadable) {
      if (all || wanted.includes(basename(path))) fail(path, path, error);
    }
    for (const name of all ? [] : wanted) {
      if (
        !archives.some((version) => version.name === name) &&
        !unreadable.some(({ path }) => basename(path) === name)
      ) {
        const error = new ModelNotFoundError(
          `--load-model ${name}: no model folder ${name} in ${config.model_repository}`,
        );
        fail(name, join(config.model_repository, name), error);
      }
    }
  }
  for (const spec of config.models) {
    if (spec === 'all') {
      if (!config.model_store) throw new UsageError('--models all needs --model-store');
      if (config.model_name !== undefined) await checkOneStoreModel(config.model_store, config.model_name);
      const { archives, unreadable } = await repository.storeCatalog();
      offered.push(...archives.map((archive) => ({ ...archive, spec: archive.path, fromStore: true })));
      for (const { path, error } of unreadable) fail(path, path, error);
      continue;
    }
    const at = spec.indexOf('=');
    const name = checkModelName(spec.slice(0, at), `--models ${spec}: the name`);
    const path = spec.slice(at + 1);
    let identity;
    try {
      identity = await readArchiveIdentity(path);
    } catch (error) {
      fail(spec, path, error as BatchserveError);
      continue;
    }
    if (identity.name !== name) {
      throw new UsageError(
        `--models ${spec}: the archive holds model "${identity.name}"; use ${identity.name}=${path}`,
      );
    }
    offered.push({ ...identity, spec });
  }

  const excluded = new Set<ArchiveIdentity>();
  for (const name of new Set(offered.map((archive) => archive.name))) {
    const policy = describeVersionPolicy(repository.versionPolicy(name));
    const selection = repository.selectOffered(
      name,
      offered.filter((archive) => archive.name === name),
    );
    for (const archive of selection.excluded) {
      excluded.add(archive);
      logger.info(
        { model: name, version: archive.version, archive: archive.path, policy },
        'skipped by version policy',
      );
    }
  }

  const loaded = new Set<string>();
  // A pipeline named before its step models is tried again once they have loaded; rounds go
  // on while any pipeline loads (pipelines of pipelines), and what never loads fails then.
  let pending = offered.filter((candidate) => !excluded.has(candidate));
  while (pending.length > 0) {
    const waiting: { archive: (typeof pending)[number]; error: PipelineInvalidError }[] = [];
    for (const archive of pending) {
      let model;
      try {
        model = await (archive.fromStore ? repository.loadStoreArchive(archive.path) : repository.load(archive.path));
      } catch (error) {
        if (error instanceof PipelineInvalidError) {
          waiting.push({ archive, error });
          continue;
        }
        if (error instanceof UsageError || !(error instanceof BatchserveError)) throw error;
        fail(archive.spec, archive.path, error);
        continue;
      }
      loaded.add(resolve(archive.path));
      for (const note of model.deviceNotes) logger.info({ model: model.name, version: model.version }, note);
      if (model.manifest.model.accuracy?.passed === false) {
        const { precision } = model.manifest.model;
        logger.warn(
          { model: model.name, version: model.version, precision },
          `serving a ${precision} conversion that failed its accuracy gate (packed with --accept-accuracy-loss; model-archive inspect shows the figures)`,
        );
      }
    }
    if (waiting.length === pending.length) {
      for (const { archive, error } of waiting) fail(archive.spec, archive.path, error);
      break;
    }
    pending = waiting.map(({ archive }) => archive);
  }
  if (loaded.size === 0 && failures.length > 0) throw failures[0]?.error;
  if (loaded.size === 0) {
    // TorchServe's habit (start on an empty store, register later) works; readiness says there is nothing yet.
    logger.warn('serving no models: not ready until one is loaded (POST /models on the management API)');
  }
  return { loaded, failures: failures.map(({ spec, message }) => ({ spec, message })) };
}

/**
 * `--model-name` serves the store's archives, all of one model, under the name KServe routes
 * by (`/v2/models/<isvc>/infer`). A store of several models cannot be served under one name,
 * and an empty one (a storageUri that named nothing) has nothing to serve under it.
 */
async function checkOneStoreModel(store: string, modelName: string): Promise<void> {
  const { archives, unreadable } = await readStoreCatalog(store);
  if (archives.length === 0 && unreadable.length === 0) {
    throw new InputFileError(
      `--model-name ${modelName}: the model store ${store} holds no archive (a .mar file or an archive folder)`,
    );
  }
  const names = [...new Set(archives.map((archive) => archive.name))];
  if (names.length > 1) {
    throw new UsageError(
      `--model-name ${modelName}: the model store ${store} holds ${names.length} models (${names.join(', ')}); --model-name serves one model, with all its versions, under another name`,
    );
  }
}

/** Nothing `serve` writes may land in the model store, which KServe mounts read-only. */
function refuseWritesIntoStore(config: ServerConfig, workRoot: string): void {
  const folder = config.model_store ?? config.model_repository;
  if (folder === undefined) return;
  const store = resolve(folder);
  const writes: [string, string][] = [
    ['work_dir', workRoot],
    ['state_file', config.state_file],
  ];
  if (config.auth.enabled && config.auth.token === undefined) writes.push(['auth.key_file', config.auth.key_file]);
  if (config.prediction_log !== undefined) writes.push(['prediction_log', config.prediction_log]);
  for (const [key, path] of writes) {
    const inside = relative(store, resolve(path));
    if (inside === '' || (inside !== '..' && !inside.startsWith(`..${sep}`) && !isAbsolute(inside))) {
      throw new UsageError(
        `${key} ${path} is inside the model store ${store}, and nothing is written there: choose a path outside it`,
      );
    }
  }
}

async function serverKeys(config: ServerConfig, logger: Logger): Promise<KeyRing | undefined> {
  if (!config.auth.enabled) {
    logger.warn('management API authentication is disabled (--no-auth): anyone who reaches its port can change models');
    return undefined;
  }
  const file = resolve(config.auth.key_file);
  if (config.auth.mode === 'torchserve') {
    const expiration = config.auth.key_expiration;
    return KeyRing.torchserve(file, expiration > 0 ? expiration / 1000 : undefined);
  }
  return KeyRing.single(config.auth.token, file);
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
