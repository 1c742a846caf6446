import { basename, isAbsolute, join, relative, resolve } from 'node:path';
import { ForbiddenError, UsageError } from '../core/errors.js';
import { checkModelName } from '../core/model-name.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import { authenticated, type KeyRing } from './auth.js';
import { downloadArchive } from './download.js';
import { applyModelChange, checkModelChange, modelChangeOf, nonNegativeInt } from './model-change.js';
import { sendJson, type Route, type RouteHandler } from './http.js';
import { trafficRoutes } from './traffic-api.js';

export interface ManagementOptions {
  readonly repository: ModelRepository;
  readonly traffic: TrafficControl;
  /** undefined = no authentication (`--no-auth`). */
  readonly keys: KeyRing | undefined;
  readonly allowedUrls: readonly RegExp[];
  /** Archives loaded at start-up, for `loadedAtStartup`. */
  readonly startupArchives: ReadonlySet<string>;
}

const MODEL = '([^/]+)';
const VERSION = '(?:/([^/]+))?';

/**
 * TorchServe's management API: list, describe, register from the model store, scale and
 * reconfigure batching live, unregister, set the default version. Every call needs the
 * bearer token unless the server runs with --no-auth.
 */
export function managementRoutes(options: ManagementOptions): Route[] {
  const { repository } = options;
  const routes: Route[] = [
    // Before the generic /models/{m}/{version} routes, which would take "traffic" for a version.
    ...trafficRoutes(options.traffic),
    {
      method: 'GET',
      path: /^\/models\/?$/,
      handle: async (_req, res, _params, url) => {
        const limit = intParameter(url, 'limit', 1) ?? 100;
        const offset = intParameter(url, 'next_page_token', 0) ?? 0;
        const names = repository.names();
        const page = names.slice(offset, offset + limit).map((name) => {
          const model = repository.get(name);
          return { modelName: name, modelUrl: basename(model.archivePath) };
        });
        const next = offset + limit < names.length ? { nextPageToken: String(offset + limit) } : {};
        sendJson(res, 200, { models: page, ...next });
      },
    },
    {
      method: 'POST',
      path: /^\/models\/?$/,
      handle: async (_req, res, _params, url) => {
        // Checked before anything is loaded: a bad parameter costs no load and unload.
        // model_name serves the archive under that name, as TorchServe's register does.
        const name = url.searchParams.get('model_name');
        if (name) checkModelName(name, 'model_name');
        const change = modelChangeOf(url.searchParams);
        const source = url.searchParams.get('url');
        if (!source) throw new UsageError('register needs ?url= (an archive in the model store, or an allowed URL)');
        const archive = await resolveArchive(source, options);
        const model = await repository.load(archive, { keepDefault: true, ...(name ? { name } : {}) });
        try {
          // What only the loaded model can tell (a batch size for a model that does not batch).
          checkModelChange(model, change);
        } catch (error) {
          await repository.unload(model.name, model.version, { force: true });
          throw error;
        }
        await applyModelChange(model, change);
        await options.traffic.versionsChanged();
        sendJson(res, 200, {
          status: `Model "${model.name}" Version: ${model.version} registered with ${model.instances.length} initial workers`,
        });
      },
    },
    {
      method: 'PUT',
      path: new RegExp(`^/models/${MODEL}/([^/]+)/set-default$`),
      handle: async (_req, res, [name, version]) => {
        await options.traffic.setDefault(name as string, version as string);
        sendJson(res, 200, { status: `Default version successfully updated for model "${name}" to "${version}"` });
      },
    },
    {
      method: 'GET',
      path: new RegExp(`^/models/${MODEL}${VERSION}$`),
      handle: async (_req, res, [name, version]) => {
        const models =
          version === 'all' ? repository.versions(name as string) : [repository.get(name as string, version)];
        if (models.length === 0) repository.get(name as string);
        sendJson(
          res,
          200,
          models.map((model) => describe(model, options)),
        );
      },
    },
    {
      method: 'PUT',
      path: new RegExp(`^/models/${MODEL}${VERSION}$`),
      handle: async (_req, res, [name, version], url) => {
        const model = repository.get(name as string, version);
        await applyModelChange(model, modelChangeOf(url.searchParams));
        await options.traffic.versionsChanged();
        sendJson(res, 200, {
          status: `Model "${model.name}" version ${model.version} updated`,
          ...describe(model, options),
        });
      },
    },
    {
      method: 'DELETE',
      path: new RegExp(`^/models/${MODEL}${VERSION}$`),
      handle: async (_req, res, [name, version], url) => {
        const removed = await repository.unload(name as string, version, {
          force: url.searchParams.get('force') === 'true',
        });
        await options.traffic.versionsChanged();
        sendJson(res, 200, {
          status: `Model "${name}" unregistered (versions ${removed.map((model) => model.version).join(', ')})`,
        });
      },
    },
  ];
  const managed = routes.map((route) => ({
    ...route,
    handle: authenticated(options.keys, 'management', namesChecked(route.handle)),
  }));
  return [...managed, ...tokenRoutes(options.keys)];
}

/**
 * TorchServe's `GET /token?type=management|inference` (TorchServe mode only): with the API
 * key, a new key of that type, written to the key file; the answer is the file's content.
 */
function tokenRoutes(keys: KeyRing | undefined): Route[] {
  if (!keys?.guards('API')) return [];
  return [
    {
      method: 'GET',
      path: /^\/token$/,
      handle: authenticated(keys, 'API', async (_req, res, _params, url) => {
        const type = url.searchParams.get('type');
        if (type !== 'management' && type !== 'inference') {
          throw new UsageError(`token: type must be management or inference, got ${JSON.stringify(type)}`);
        }
        sendJson(res, 200, await keys.renew(type));
      }),
    },
  ];
}

/**
 * Every route's first capture is a model name: one that breaks the rule is a 400 naming the
 * rule, not a 404, so a caller sees why (and no name from a URL reaches a path or a log).
 */
function namesChecked(handle: RouteHandler): RouteHandler {
  return (req, res, params, url) => {
    if (params[0] !== undefined) checkModelName(params[0]);
    return handle(req, res, params, url);
  };
}

async function resolveArchive(source: string, options: ManagementOptions): Promise<string> {
  const store = options.repository.modelStore;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source)) {
    if (!options.allowedUrls.some((pattern) => pattern.test(source))) {
      throw new ForbiddenError(`the URL ${source} is not allowed; list it in the server config's allowed_urls`);
    }
    if (!store) throw new UsageError('downloading a model needs a model store (--model-store) to keep it in');
    return downloadArchive(source, store);
  }
  if (!store) throw new UsageError('the server has no model store (--model-store); register needs one');
  const archive = resolve(store, source);
  const inside = relative(resolve(store), archive);
  if (isAbsolute(source) || inside.startsWith('..') || inside === '') {
    throw new ForbiddenError(`${source} is outside the model store`);
  }
  return join(store, inside);
}

function describe(model: LoadedModel, options: ManagementOptions): Record<string, unknown> {
  const { config } = model;
  return {
    modelName: model.name,
    modelVersion: model.version,
    modelUrl: basename(model.archivePath),
    runtime: 'onnxruntime',
    handler: model.manifest.model.handler,
    // A converted model says so, and whether it passed its accuracy gate: one registered through
    // this API never shows the start-up warning a failed gate gets.
    ...(model.manifest.model.precision ? { precision: model.manifest.model.precision } : {}),
    ...(model.manifest.model.accuracy ? { accuracyGatePassed: model.manifest.model.accuracy.passed } : {}),
    minWorkers: model.instances.length,
    maxWorkers: model.instances.length,
    batchSize: config.max_batch_size,
    maxBatchDelay:
      config.dynamic_batching.max_queue_delay === 'auto' ? 'auto' : config.dynamic_batching.max_queue_delay / 1000,
    preferredBatchSizes: config.dynamic_batching.preferred_batch_sizes,
    maxQueueSize: config.dynamic_batching.max_queue_size,
    ...(model.adaptiveBatching
      ? {
          adaptiveBatching: {
            fixedCostMs: model.adaptiveBatching.c,
            rowCostMs: model.adaptiveBatching.m,
            r2: model.adaptiveBatching.r2,
            batchSizesSeen: model.adaptiveBatching.sizes,
            trusted: model.adaptiveBatching.trusted,
            notTrustedBecause: model.adaptiveBatching.reason ?? null,
            lastWaitMs: model.adaptiveBatching.wait_ms,
          },
        }
      : {}),
    queuedRows: model.queuedRows,
    loadedAtStartup: options.startupArchives.has(resolve(model.archivePath)),
    isDefault: options.repository.defaultVersion(model.name) === model.version,
    state: model.state,
    loadTimeSeconds: model.loadSeconds,
    busyWorkers: model.busyInstances,
    workers: model.instances.map((instance) => ({ id: instance.id, status: 'READY', device: instance.device })),
  };
}

/** An optional integer query parameter, at least `least`. */
function intParameter(url: URL, name: string, least: number): number | undefined {
  const value = url.searchParams.get(name);
  if (value === null) return undefined;
  const number = nonNegativeInt(value, name);
  if (number < least) throw new UsageError(`${name} must be at least ${least}`);
  return number;
}
