import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { QueueReservation, SubmitOptions, SubmitResult } from '../batching/batcher.js';
import {
  FeedbackInvalidError,
  ForbiddenError,
  InferenceFailedError,
  InferenceInputError,
  ModelNotReadyError,
  NotImplementedError,
  UsageError,
} from '../core/errors.js';
import { statisticsResponse } from '../metrics/model-statistics.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import { isTensorMap, type TensorMap } from '../core/tensors.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { authenticated, type KeyRing } from './auth.js';
import {
  checkDeclaredLength,
  mediaType,
  readBody,
  requireMediaType,
  sendJson,
  type Route,
  type RouteHandler,
  type RouteParams,
} from './http.js';
import { loadFromStoreWith, modelChangeOfLoadParameters } from './model-change.js';
import { tritonModelConfig } from './triton-config.js';
import { encodeInferResponse, type ResponseOutput } from '../protocol/v2-codec.js';
import { tensorToNested } from '../protocol/nested.js';
import { prepareV2Request, retarget, type PreparedRequest } from '../protocol/prepared-request.js';
import type { HandlerRequest } from '../core/request.js';
import { FORM_TYPES, uploadedRequests } from '../protocol/form-body.js';
import { responseWritten, traceNow } from '../core/trace-channels.js';
import { recordedRun, type RequestOutcome } from './request-outcome.js';
import type { LoggedRequest, PredictionLogs } from './prediction-logging.js';
import type { RouteChoice } from '../traffic/version-router.js';
import { answeredTokens } from '../handlers/text-batch.js';

export const V2_EXTENSIONS = [
  'binary_tensor_data',
  'classification',
  'statistics',
  'model_repository',
  'model_configuration',
];
export const PLATFORM = 'onnxruntime_onnx';

/** Triton's platform for a pipeline of models is `ensemble`. */
export function platformOf(model: LoadedModel): string {
  return model.config.pipeline ? 'ensemble' : PLATFORM;
}

export interface InferenceApiOptions {
  readonly repository: ModelRepository;
  readonly traffic: TrafficControl;
  readonly maxRequestSize: number;
  /** False while the server drains: readiness fails and new requests get 503. */
  readonly isAccepting: () => boolean;
  /** The keys: the management one for load and unload; in TorchServe mode, the inference one for running models. */
  readonly keys: KeyRing | undefined;
  readonly modelControl: 'explicit' | 'none' | 'poll';
  /** Called once per request that reached a model version (and once per shadow copy). */
  readonly requestFinished: (outcome: RequestOutcome) => void;
  readonly logs: PredictionLogs;
}

const MODEL = '([^/]+)';
const VERSION = '(?:/versions/([^/]+))?';
const JSON_TYPES = ['application/json'];
const V2_TYPES = ['application/json', 'application/octet-stream'];

/** KServe v2 (with Triton's extensions) and TorchServe's prediction routes, on one port. */
export function inferenceRoutes(options: InferenceApiOptions): Route[] {
  const { repository, traffic } = options;
  const ready = (model: LoadedModel): boolean => options.isAccepting() && model.state === 'ready';
  const recorded = (
    served: boolean,
    modelOf: () => LoadedModel | undefined,
    work: () => Promise<SubmitResult>,
    loggedOf: () => LoggedRequest | undefined,
  ): Promise<SubmitResult> => recordedRun(options.requestFinished, 'rest', served, modelOf, work, loggedOf);
  /**
   * A route that serves a model: admission at the door, then `work`, then one outcome for the
   * request's metrics and statistics, however it ended. Admission decides from the request
   * line and headers alone: an unknown model (404), a version not ready or a draining server
   * (503), a declared body over the limit (413) and a full queue (503) are refused before a
   * byte of the body is read, so refused requests cost the admitted ones nothing. The version
   * is picked again after the body arrives if the one held is no longer ready, so a version
   * that starts draining meanwhile is never used.
   */
  const modelRoute = (
    work: (req: IncomingMessage, res: ServerResponse, admitted: Admitted) => Promise<SubmitResult>,
    bodyAlignedAt: (req: IncomingMessage) => number = () => 0,
  ): RouteHandler =>
    authenticated(options.keys, 'inference', async (req, res, params, url) => {
      let model: LoadedModel | undefined;
      let logged: LoggedRequest | undefined;
      const choice: RouteChoice = { routing: 'explicit', stickyKey: undefined };
      res.setHeader('x-request-id', clientRequestId(req) ?? randomUUID());
      const pick = (): LoadedModel => {
        model = choose(params, req, url, choice);
        // Set before anything can fail, so error answers also say which version they came from.
        res.setHeader('x-model-version', model.version);
        requireReady(model, ready(model));
        return model;
      };
      await recorded(
        true,
        () => model,
        async () => {
          let chosen = pick();
          checkDeclaredLength(req, options.maxRequestSize);
          let reservation: QueueReservation | undefined = chosen.reserve();
          try {
            // Compressed bodies (tritonclient's request_compression) are inflated within the same limit.
            const body = await readBody(req, options.maxRequestSize, bodyAlignedAt(req), { decode: true });
            if (!ready(chosen)) {
              reservation.release();
              reservation = undefined;
              chosen = pick();
            }
            const shadows = params[1] === undefined ? traffic : undefined;
            if (options.logs.sample(chosen))
              logged = loggedRequest(req, res, choice, body, options.logs.keepsInputs(chosen));
            return await work(req, res, { model: chosen, body, shadows, reservation, logged });
          } finally {
            reservation?.release();
          }
        },
        () => logged,
      );
    });
  const choose = ([name, version]: RouteParams, req: IncomingMessage, url: URL, choice: RouteChoice): LoadedModel => {
    if (version === undefined) return traffic.router.route(name as string, req, url, choice);
    choice.routing = 'explicit';
    return repository.get(name as string, version);
  };
  /** Runs a shadow copy and records its outcome like any request's; logged when the served request is. */
  const shadowRun =
    (logged: LoggedRequest | undefined) =>
    (run: (shadow: LoadedModel) => Promise<SubmitResult>) =>
    (shadow: LoadedModel): Promise<SubmitResult> =>
      recorded(
        false,
        () => shadow,
        () => run(shadow),
        () => logged,
      );
  const feedbackRoute: RouteHandler = async (req, res, [name]) => {
    requireMediaType(req, JSON_TYPES);
    const body = await readBody(req, options.maxRequestSize);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch (error) {
      throw new FeedbackInvalidError(`the feedback body is not JSON: ${(error as Error).message}`);
    }
    sendJson(res, 200, await options.logs.feedback(name as string, parsed));
  };
  const inferV2Route = modelRoute(
    (req, res, admitted) => inferV2(req, res, admitted, shadowRun(admitted.logged)),
    // The first binary input follows the JSON header: aligned, it is read in place.
    (req) => Number(req.headers['inference-header-content-length']) || 0,
  );
  return [
    {
      method: 'GET',
      path: /^\/v2\/?$/,
      handle: async (_req, res) =>
        sendJson(res, 200, { name: 'batchserve', version: BATCHSERVE_VERSION, extensions: V2_EXTENSIONS }),
    },
    {
      method: 'GET',
      path: /^\/v2\/health\/live$/,
      handle: async (_req, res) => sendJson(res, 200, { live: true }),
    },
    {
      method: 'GET',
      path: /^\/v2\/health\/ready$/,
      handle: async (_req, res) => {
        const isReady = options.isAccepting() && repository.allReady();
        sendJson(res, isReady ? 200 : 503, { ready: isReady });
      },
    },
    {
      method: 'GET',
      path: /^\/v2\/models\/stats$/,
      handle: async (_req, res) =>
        sendJson(res, 200, statisticsResponse(repository.list().map((model) => model.stats))),
    },
    {
      method: 'GET',
      path: new RegExp(`^/v2/models/${MODEL}${VERSION}/stats$`),
      handle: async (_req, res, [name, version]) => {
        const models =
          version === undefined ? repository.versions(name as string) : [repository.get(name as string, version)];
        if (models.length === 0) repository.get(name as string);
        sendJson(res, 200, statisticsResponse(models.map((model) => model.stats)));
      },
    },
    {
      method: 'GET',
      path: new RegExp(`^/v2/models/${MODEL}${VERSION}/ready$`),
      handle: async (_req, res, [name, version]) => {
        const model = repository.get(name as string, version);
        sendJson(res, ready(model) ? 200 : 503, { name: model.name, ready: ready(model) });
      },
    },
    {
      method: 'GET',
      path: new RegExp(`^/v2/models/${MODEL}${VERSION}/config$`),
      handle: async (_req, res, [name, version]) =>
        sendJson(res, 200, tritonModelConfig(repository.get(name as string, version))),
    },
    {
      method: 'GET',
      path: new RegExp(`^/v2/models/${MODEL}${VERSION}$`),
      handle: async (_req, res, [name, version]) => {
        const model = repository.get(name as string, version);
        sendJson(res, 200, {
          name: model.name,
          versions: repository.versions(model.name).map((loaded) => loaded.version),
          platform: platformOf(model),
          inputs: model.config.inputs,
          outputs: model.config.outputs,
        });
      },
    },
    {
      method: 'POST',
      path: new RegExp(`^/v2/models/${MODEL}${VERSION}/infer$`),
      handle: (req, res, params, url) => {
        requireMediaType(req, V2_TYPES);
        return inferV2Route(req, res, params, url);
      },
    },
    {
      method: 'POST',
      path: /^\/v2\/repository\/index$/,
      handle: async (_req, res) => sendJson(res, 200, await repository.index()),
    },
    {
      method: 'POST',
      path: new RegExp(`^/v2/repository/models/${MODEL}/load$`),
      handle: modelControl(options, async (req, res, [name]) => {
        requireMediaType(req, JSON_TYPES);
        const parameters = loadParameters(await readBody(req, options.maxRequestSize));
        await loadFromStoreWith(repository, name as string, modelChangeOfLoadParameters(parameters, name as string));
        await traffic.versionsChanged();
        sendJson(res, 200, {});
      }),
    },
    {
      method: 'POST',
      path: new RegExp(`^/v2/repository/models/${MODEL}/unload$`),
      handle: modelControl(options, async (req, res, [name]) => {
        await readBody(req, options.maxRequestSize);
        await repository.unload(name as string);
        await traffic.versionsChanged();
        sendJson(res, 200, {});
      }),
    },
    {
      method: 'GET',
      path: /^\/ping$/,
      handle: async (_req, res) => {
        const healthy = options.isAccepting() && repository.allReady();
        sendJson(res, healthy ? 200 : 503, { status: healthy ? 'Healthy' : 'Unhealthy' });
      },
    },
    {
      method: 'POST',
      path: new RegExp(`^/predictions/${MODEL}(?:/([^/]+))?$`),
      handle: modelRoute((req, res, admitted) => predict(req, res, admitted, shadowRun(admitted.logged))),
    },
    {
      method: 'POST',
      path: new RegExp(`^/explanations/${MODEL}(?:/([^/]+))?$`),
      handle: async () => {
        throw new NotImplementedError(
          'explanations are not served: TorchServe computes them with Captum in its Python handlers, which batchserve does not run; use /predictions or /v2/models/{model}/infer',
        );
      },
    },
    // Triton's logging and trace extensions: answered, so a tritonclient call learns why.
    ...(['GET', 'POST'] as const).flatMap((method): Route[] => [
      {
        method,
        path: /^\/v2\/logging$/,
        handle: async () => {
          throw new NotImplementedError(
            "Triton's logging extension is not served: the log level is set at start (serve --log-level, or log_level in server.yaml); logs are JSON lines on stderr",
          );
        },
      },
      ...[/^\/v2\/trace\/setting$/, new RegExp(`^/v2/models/${MODEL}(?:/versions/([^/]+))?/trace/setting$`)].map(
        (path): Route => ({
          method,
          path,
          handle: async () => {
            throw new NotImplementedError(
              "Triton's trace extension is not served: batchserve keeps no per-request traces; each model's queue and compute times are in /v2/models/{model}/stats and the Prometheus histograms",
            );
          },
        }),
      ),
    ]),
    {
      method: 'POST',
      path: new RegExp(`^/v2/models/${MODEL}/feedback$`),
      handle: feedbackRoute,
    },
    {
      method: 'POST',
      path: new RegExp(`^/feedback/${MODEL}$`),
      handle: feedbackRoute,
    },
  ];
}

/**
 * Load and unload change what every client is served, so on the inference port, which
 * anyone who can infer can reach, they need the management token, or are off altogether.
 */
function modelControl(options: InferenceApiOptions, handle: RouteHandler): RouteHandler {
  if (options.modelControl !== 'explicit') {
    return async () => {
      throw new ForbiddenError(
        `model control is off on this server (model_control: ${options.modelControl}); load and unload models through the management API`,
      );
    };
  }
  return authenticated(options.keys, 'management', handle);
}

/** A repository load's body: empty, or `{"parameters": {…}}`. */
function loadParameters(body: Buffer): Map<string, unknown> {
  if (body.length === 0) return new Map();
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new UsageError(`the load body is not JSON: ${(error as Error).message}`);
  }
  const parameters = (parsed as { parameters?: unknown } | null)?.parameters ?? {};
  if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
    throw new UsageError("the load body's parameters must be an object");
  }
  return new Map(Object.entries(parameters));
}

export function requireReady(model: LoadedModel, isReady: boolean): void {
  if (isReady) return;
  const why = model.state === 'ready' ? 'the server is shutting down' : `it is ${model.state}`;
  throw new ModelNotReadyError(`model ${model.name} version ${model.version} is not ready: ${why}`);
}

/** Ends when the client goes away before its answer, so a queued request is dropped. */
export function disconnectSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** A request let in: its body, the version that answers it, and how to mirror it to a shadow. */
interface Admitted {
  readonly model: LoadedModel;
  readonly body: Buffer;
  /** Set for requests that named no version: only those are mirrored. */
  readonly shadows: TrafficControl | undefined;
  /** The queue place held since the headers; undefined when the version was picked again. */
  readonly reservation: QueueReservation | undefined;
  /** Set when the prediction log takes this request. */
  readonly logged: LoggedRequest | undefined;
}

type ShadowRun = (
  run: (shadow: LoadedModel) => Promise<SubmitResult>,
) => (shadow: LoadedModel) => Promise<SubmitResult>;

async function inferV2(
  req: IncomingMessage,
  res: ServerResponse,
  { model, body, shadows, reservation, logged }: Admitted,
  shadowRun: ShadowRun,
): Promise<SubmitResult> {
  const headerLength = req.headers['inference-header-content-length'];
  const prepared = prepareV2Request(
    body,
    {
      headerLength: Array.isArray(headerLength) ? headerLength.join(',') : headerLength,
      binaryBody: mediaType(req) === 'application/octet-stream',
    },
    model.signature,
  );
  if (prepared.id !== undefined && HEADER_SAFE.test(prepared.id)) res.setHeader('x-request-id', prepared.id);
  if (logged) {
    logged.id = res.getHeader('x-request-id') as string;
    logged.rows = prepared.rows;
    if (logged.body) logged.prepared = prepared;
  }
  const shadowed = shadows?.mirror(
    model,
    shadowRun((shadow) => {
      const copy = retarget(prepared, shadow.signature);
      return shadow.infer(handlerRequest(copy, false), submitOptions(copy));
    }),
  );
  // A request whose inputs the log keeps must stay whole: it is copied into the instance, not moved.
  const movable = shadowed === undefined && logged?.body === undefined;
  const result = await model.infer(handlerRequest(prepared, movable), {
    ...submitOptions(prepared),
    signal: disconnectSignal(res),
    ...(reservation ? { reservation } : {}),
  });
  shadowed?.(result.response);
  const tensors = asTensorMap(result.response, model);
  const outputs: ResponseOutput[] = prepared.outputs.map((output) => ({
    name: output.name,
    tensor: tensors[output.name] ?? missingOutput(output.name, model),
    binary: output.binary,
    ...(output.classification !== undefined ? { classification: output.classification } : {}),
    ...(model.labels ? { labels: model.labels } : {}),
  }));
  const encoded = encodeInferResponse({
    model_name: model.name,
    model_version: model.version,
    ...(prepared.id !== undefined ? { id: prepared.id } : {}),
    outputs,
  });
  res.writeHead(200, {
    'content-type': encoded.contentType,
    'content-length': encoded.body.length,
    ...(encoded.headerLength !== undefined ? { 'inference-header-content-length': encoded.headerLength } : {}),
  });
  res.end(encoded.body);
  if (responseWritten.hasSubscribers) responseWritten.publish({ at: traceNow() });
  return result;
}

/** What the handler gets: the checked tensors and their rows; `movable` when no shadow shares them. */
export function handlerRequest(prepared: PreparedRequest, movable: boolean): HandlerRequest {
  return { inputs: prepared.inputs, rows: prepared.rows, movable };
}

export function submitOptions(prepared: PreparedRequest): SubmitOptions {
  return {
    rows: prepared.rows,
    shapeKey: prepared.shapeKey,
    ...(prepared.priority !== undefined ? { priority: prepared.priority } : {}),
    ...(prepared.timeoutUs !== undefined ? { timeoutUs: prepared.timeoutUs } : {}),
  };
}

/** TorchServe's route: the body goes to the handler as it is (an image, JSON, text). */
async function predict(
  req: IncomingMessage,
  res: ServerResponse,
  { model, body, shadows, reservation, logged }: Admitted,
  shadowRun: ShadowRun,
): Promise<SubmitResult> {
  if (body.length === 0) throw new InferenceInputError('the request body is empty');
  const contentType = mediaType(req);
  const signal = disconnectSignal(res);
  const run = (request: HandlerRequest, held: QueueReservation | undefined): Promise<SubmitResult> => {
    const shapeKey = `body:${request.contentType ?? ''}`;
    const shadowed = shadows?.mirror(
      model,
      shadowRun((shadow) => shadow.infer(request, { rows: 1, shapeKey })),
    );
    const movable = shadowed === undefined && logged?.body === undefined;
    return model
      .infer(movable ? { ...request, movable: true } : request, {
        rows: 1,
        shapeKey,
        signal,
        ...(held ? { reservation: held } : {}),
      })
      .then((result) => {
        shadowed?.(result.response);
        return result;
      });
  };
  if (contentType === undefined || !FORM_TYPES.includes(contentType)) {
    const result = await run({ body, ...(contentType ? { contentType } : {}) }, reservation);
    const tokens = answeredTokens(result.response);
    if (tokens !== undefined) model.countTokens('prompt', tokens);
    sendPrediction(res, result.response);
    return result;
  }
  // A TorchServe upload (curl -F data=@kitten.jpg): each data/body field is one request, run
  // together so they can share a batch; several are answered as a JSON array, in order.
  const parts = uploadedRequests(body, req.headers['content-type'] as string);
  const results = await Promise.all(
    parts.map((part, index) =>
      run(
        { body: part.data, ...(part.contentType ? { contentType: part.contentType } : {}) },
        index === 0 ? reservation : undefined,
      ),
    ),
  );
  if (results.length === 1) sendPrediction(res, (results[0] as SubmitResult).response);
  else
    sendJson(
      res,
      200,
      results.map((result) => jsonAnswer(result.response)),
    );
  return results[results.length - 1] as SubmitResult;
}

/** One answer inside a JSON array: bytes as base64, text as a string, JSON as itself. */
function jsonAnswer(response: unknown): unknown {
  return Buffer.isBuffer(response) ? response.toString('base64') : response;
}

/** Request ids that can travel in a header: printable ASCII, and not too long to log. */
export const HEADER_SAFE = /^[\x21-\x7e][\x20-\x7e]{0,255}$/;

function clientRequestId(req: IncomingMessage): string | undefined {
  const id = req.headers['x-request-id'];
  return typeof id === 'string' && HEADER_SAFE.test(id) ? id : undefined;
}

/** A sampled request's log entry; its body is kept only when the log keeps inputs. */
function loggedRequest(
  req: IncomingMessage,
  res: ServerResponse,
  choice: RouteChoice,
  body: Buffer,
  keepsInputs: boolean,
): LoggedRequest {
  return {
    routing: choice.routing,
    stickyKey: choice.stickyKey,
    id: res.getHeader('x-request-id') as string,
    rows: 1,
    body: keepsInputs ? body : undefined,
    contentType: mediaType(req),
    prepared: undefined,
  };
}

function sendPrediction(res: ServerResponse, response: unknown): void {
  if (Buffer.isBuffer(response)) {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': response.length });
    res.end(response);
    return;
  }
  if (typeof response === 'string') {
    res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(response) });
    res.end(response);
    return;
  }
  const isTensors = isTensorMap(response);
  const body = isTensors
    ? Object.fromEntries(Object.entries(response).map(([name, tensor]) => [name, tensorToNested(tensor)]))
    : response;
  sendJson(res, 200, body ?? null);
}

export function asTensorMap(response: unknown, model: LoadedModel): TensorMap {
  if (isTensorMap(response)) return response;
  throw new InferenceFailedError(
    `the ${model.manifest.model.handler} handler's postprocess returned no tensors for a v2 request; v2 needs output tensors by name`,
  );
}

export function missingOutput(name: string, model: LoadedModel): never {
  throw new InferenceFailedError(`the ${model.manifest.model.handler} handler did not return output "${name}"`);
}
