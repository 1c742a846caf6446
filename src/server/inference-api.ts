import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SubmitResult } from '../batching/batch-request.js';
import {
  FeedbackInvalidError,
  ForbiddenError,
  InferenceFailedError,
  InferenceInputError,
  NotImplementedError,
  TraceSettingError,
  UsageError,
} from '../core/errors.js';
import { shownError } from '../core/quote.js';
import { isTensors, type Tensors } from '../core/tensors.js';
import { statisticsResponse } from '../metrics/model-statistics.js';
import { FORM_TYPES, uploadedRequests } from '../protocol/form-body.js';
import { tensorToNested } from '../protocol/nested.js';
import { prepareV2Request, type PreparedRequest } from '../protocol/prepared-request.js';
import { encodeInferResponse, type ResponseOutput } from '../protocol/v2-codec.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import { responseWritten, traceNow } from '../core/trace-channels.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { authenticated, type KeyRing } from './auth.js';
import type { TraceSettings } from './trace-settings.js';
import {
  checkDeclaredLength,
  mediaType,
  readBody,
  requireMediaType,
  sendJson,
  type Route,
  type RouteHandler,
} from './http.js';
import { tensorWork, uncheckedWork, type CallHead, type Infer, type Submission } from './inference-call.js';
import { loadFromStoreWith, modelChangeOfLoadParameters } from './model-change.js';
import type { PredictionLogs } from './prediction-logging.js';
import { tritonModelConfig } from './triton-config.js';

export const V2_EXTENSIONS = [
  'binary_tensor_data',
  'classification',
  'statistics',
  'model_repository',
  'model_configuration',
  'trace',
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
  /** The inference call every model route makes. */
  readonly infer: Infer;
  readonly logs: PredictionLogs;
  /** Triton's trace settings: which requests are traced (none when the server exports no traces). */
  readonly traceSettings: TraceSettings;
}

const MODEL = '([^/]+)';
const VERSION = '(?:/versions/([^/]+))?';
const JSON_TYPES = ['application/json'];
const V2_TYPES = ['application/json', 'application/octet-stream'];

/** KServe v2 (with Triton's extensions) and TorchServe's prediction routes, on one port. */
export function inferenceRoutes(options: InferenceApiOptions): Route[] {
  const { repository, traffic, infer, maxRequestSize } = options;
  const ready = (model: LoadedModel): boolean => options.isAccepting() && model.state === 'ready';
  const feedbackRoute: RouteHandler = async (req, res, [name]) => {
    requireMediaType(req, JSON_TYPES);
    const body = await readBody(req, options.maxRequestSize);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body.toString('utf8'));
    } catch (error) {
      throw new FeedbackInvalidError(`the feedback body is not JSON: ${shownError(error)}`);
    }
    sendJson(res, 200, await options.logs.feedback(name as string, parsed));
  };
  /**
   * The v2 codec: the body is read once admitted, into a buffer of its own placed so that the
   * first binary input (after the JSON header) is aligned and read in place; decoded and
   * checked against the version that answers; the answer encoded as JSON or binary.
   */
  const inferV2: RouteHandler = (req, res, [name, version], url) => {
    requireMediaType(req, V2_TYPES);
    const headerLength = req.headers['inference-header-content-length'];
    const framing = {
      headerLength: Array.isArray(headerLength) ? headerLength.join(',') : headerLength,
      binaryBody: mediaType(req) === 'application/octet-stream',
    };
    return infer(restHead(req, res, name as string, version, url), {
      admit: () => checkDeclaredLength(req, maxRequestSize),
      // Compressed bodies (tritonclient's request_compression) are inflated within the same limit.
      read: async () => ({
        bytes: await readBody(req, maxRequestSize, Number(headerLength) || 0, { decode: true }),
        contentType: mediaType(req),
      }),
      decode: (model, { bytes }) => tensorWork(prepareV2Request(bytes, framing, model.signature), true),
      answer: (model, { prepared }, [result]) => writeV2Answer(res, model, prepared, (result as SubmitResult).response),
    });
  };
  /**
   * TorchServe's codec: the body goes to the handler as it is (an image, JSON, text); a form
   * upload (curl -F data=@kitten.jpg) is one request per data/body field, run together so they
   * can share a batch and answered as a JSON array when there are several. A body sent with a
   * form's content type that is not a form (curl --data-binary @kitten.jpg sends
   * application/x-www-form-urlencoded) is the raw input, as TorchServe takes it.
   */
  const predict: RouteHandler = (req, res, [name, version], url) =>
    infer(restHead(req, res, name as string, version, url), {
      admit: () => checkDeclaredLength(req, maxRequestSize),
      read: async () => ({ bytes: await readBody(req, maxRequestSize), contentType: mediaType(req) }),
      decode: (_model, { bytes, contentType }) => {
        if (bytes.length === 0) throw new InferenceInputError('the request body is empty');
        const parts = uploadedRequests(bytes, req.headers['content-type']) ?? [
          {
            data: bytes,
            contentType: contentType !== undefined && FORM_TYPES.includes(contentType) ? undefined : contentType,
          },
        ];
        const submissions: Submission[] = parts.map((part) => ({
          request: { kind: 'body', body: part.data, contentType: part.contentType, movable: false },
          rows: 1,
          shapeKey: `body:${part.contentType ?? ''}`,
        }));
        // A form's parts are views of one body: moving one would take the others with it.
        return uncheckedWork(submissions, parts.length === 1);
      },
      answer: (_model, _work, results) => {
        if (results.length === 1) sendPrediction(res, (results[0] as SubmitResult).response);
        else
          sendJson(
            res,
            200,
            results.map((result) => jsonAnswer(result.response)),
          );
      },
    });
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
      handle: inferV2,
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
    // TorchServe takes an upload as a PUT too (curl -T kitten.jpg).
    ...(['POST', 'PUT'] as const).map((method): Route => ({
      method,
      path: new RegExp(`^/predictions/${MODEL}(?:/([^/]+))?$`),
      handle: predict,
    })),
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
    ]),
    // Triton's trace extension: the sampling of the OpenTelemetry traces, global or per model.
    ...[/^\/v2\/trace\/setting$/, new RegExp(`^/v2/models/${MODEL}/trace/setting$`)].flatMap((path): Route[] => [
      {
        method: 'GET',
        path,
        handle: async (_req, res, match) => {
          sendJson(res, 200, options.traceSettings.read(traceScope(options.repository, match[0])));
        },
      },
      {
        method: 'POST',
        path,
        handle: authenticated(options.keys, 'management', async (req, res, match) => {
          const model = traceScope(options.repository, match[0]);
          const body = await readBody(req, options.maxRequestSize);
          sendJson(res, 200, options.traceSettings.update(model, traceSettingsBody(body)));
        }),
      },
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

/** The model a trace setting route names (it must be served), or undefined for the global settings. */
function traceScope(repository: ModelRepository, name: string | undefined): string | undefined {
  if (name !== undefined) repository.get(name);
  return name;
}

/** A trace settings body: a JSON object (empty: a model's settings given back to the global ones). */
function traceSettingsBody(body: Buffer): unknown {
  if (body.length === 0) return {};
  try {
    return JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new TraceSettingError(`the trace settings body is not JSON: ${shownError(error)}`);
  }
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

/** Ends when the client goes away before its answer, so a queued request is dropped. */
export function disconnectSignal(res: ServerResponse): AbortSignal {
  const controller = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** What an HTTP request tells the inference call before its body; the answer's headers are set as it learns them. */
export function restHead(
  req: IncomingMessage,
  res: ServerResponse,
  model: string,
  version: string | undefined,
  url: URL,
): CallHead {
  const id = req.headers['x-request-id'];
  return {
    protocol: 'rest',
    model,
    version,
    authorization: req.headers.authorization,
    headers: req,
    url,
    requestId: typeof id === 'string' ? id : undefined,
    signal: disconnectSignal(res),
    tell: (name, value) => res.setHeader(name, value),
  };
}

/** The v2 answer: the requested outputs (classified where asked), JSON or binary. */
function writeV2Answer(res: ServerResponse, model: LoadedModel, prepared: PreparedRequest, response: unknown): void {
  const tensors = asTensors(response, model);
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
}

/** One answer inside a JSON array: bytes as base64, text as a string, JSON as itself. */
function jsonAnswer(response: unknown): unknown {
  return Buffer.isBuffer(response) ? response.toString('base64') : response;
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
  const body = isTensors(response)
    ? Object.fromEntries(Object.entries(response).map(([name, tensor]) => [name, tensorToNested(tensor)]))
    : response;
  sendJson(res, 200, body ?? null);
}

export function asTensors(response: unknown, model: LoadedModel): Tensors {
  if (isTensors(response)) return response;
  throw new InferenceFailedError(
    `the ${model.manifest.model.handler} handler's postprocess returned no tensors for a v2 request; v2 needs output tensors by name`,
  );
}

export function missingOutput(name: string, model: LoadedModel): never {
  throw new InferenceFailedError(`the ${model.manifest.model.handler} handler did not return output "${name}"`);
}
