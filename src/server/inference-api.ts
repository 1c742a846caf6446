import type { IncomingMessage, ServerResponse } from 'node:http';
import type { QueueReservation, SubmitOptions, SubmitResult } from '../batching/batcher.js';
import {
  ForbiddenError,
  InferenceFailedError,
  InferenceInputError,
  ModelNotReadyError,
  UsageError,
} from '../core/errors.js';
import { statisticsResponse } from '../metrics/model-statistics.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import { batchPlacement, checkRequestTensors, isTensorMap, type TensorMap } from '../core/tensors.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { authenticated } from './auth.js';
import {
  checkDeclaredLength,
  mediaType,
  readBody,
  requireMediaType,
  sendJson,
  type Route,
  type RouteHandler,
} from './http.js';
import { tritonModelConfig } from './triton-config.js';
import { decodeInferRequest, encodeInferResponse, type RequestedOutput, type ResponseOutput } from './v2-codec.js';
import { tensorToNested } from './nested.js';
import type { HandlerRequest } from '../core/request.js';

export const V2_EXTENSIONS = [
  'binary_tensor_data',
  'classification',
  'statistics',
  'model_repository',
  'model_configuration',
];
export const PLATFORM = 'onnxruntime_onnx';

export interface InferenceApiOptions {
  readonly repository: ModelRepository;
  readonly traffic: TrafficControl;
  readonly maxRequestSize: number;
  /** False while the server drains: readiness fails and new requests get 503. */
  readonly isAccepting: () => boolean;
  /** The management token that load and unload need; undefined = `--no-auth`. */
  readonly token: string | undefined;
  readonly modelControl: 'explicit' | 'none';
}

/** Which model a response served, so the request's metrics carry its model and version. */
export const servedModel = new WeakMap<ServerResponse, LoadedModel>();

const MODEL = '([^/]+)';
const VERSION = '(?:/versions/([^/]+))?';
const JSON_TYPES = ['application/json'];
const V2_TYPES = ['application/json', 'application/octet-stream'];

/** KServe v2 (with Triton's extensions) and TorchServe's prediction routes, on one port. */
export function inferenceRoutes(options: InferenceApiOptions): Route[] {
  const { repository, traffic } = options;
  const ready = (model: LoadedModel): boolean => options.isAccepting() && model.state === 'ready';
  /**
   * Admission at the door: from the request line and headers alone, an unknown model (404), a
   * version not ready or a draining server (503), a declared body over the limit (413) and a
   * full queue (503) are refused before a byte of the body is read, so refused requests cost
   * the admitted ones nothing. The version is picked again after the body arrives if the one
   * held is no longer ready, so a version that starts draining meanwhile is never used.
   */
  const admit = async (
    req: IncomingMessage,
    res: ServerResponse,
    [name, version]: readonly (string | undefined)[],
    url: URL,
  ): Promise<Admitted> => {
    const pick = (): LoadedModel =>
      version === undefined ? traffic.router.route(name as string, req, url) : repository.get(name as string, version);
    let model = pick();
    servedModel.set(res, model);
    // Set before anything can fail, so error answers also say which version they came from.
    res.setHeader('x-model-version', model.version);
    requireReady(model, ready(model));
    checkDeclaredLength(req, options.maxRequestSize);
    const reservation = model.reserve();
    try {
      const body = await readBody(req, options.maxRequestSize);
      if (!ready(model)) {
        reservation.release();
        model = pick();
        servedModel.set(res, model);
        res.setHeader('x-model-version', model.version);
        requireReady(model, ready(model));
        return { model, body, shadows: version === undefined ? traffic : undefined, reservation: undefined };
      }
      return { model, body, shadows: version === undefined ? traffic : undefined, reservation };
    } catch (error) {
      reservation.release();
      throw error;
    }
  };
  /** Runs a route's work on an admitted request; its queue place is given back however it ends. */
  const served = async (admitted: Admitted, work: (admitted: Admitted) => Promise<void>): Promise<void> => {
    try {
      await work(admitted);
    } finally {
      admitted.reservation?.release();
    }
  };
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
          platform: PLATFORM,
          inputs: model.config.inputs,
          outputs: model.config.outputs,
        });
      },
    },
    {
      method: 'POST',
      path: new RegExp(`^/v2/models/${MODEL}${VERSION}/infer$`),
      handle: async (req, res, params, url) => {
        requireMediaType(req, V2_TYPES);
        const admitted = await admit(req, res, params, url);
        await served(admitted, (request) => inferV2(req, res, request));
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
        await readBody(req, options.maxRequestSize);
        await repository.loadFromStore(name as string);
        sendJson(res, 200, {});
      }),
    },
    {
      method: 'POST',
      path: new RegExp(`^/v2/repository/models/${MODEL}/unload$`),
      handle: modelControl(options, async (req, res, [name]) => {
        await readBody(req, options.maxRequestSize);
        await repository.unload(name as string);
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
      handle: async (req, res, params, url) => {
        const admitted = await admit(req, res, params, url);
        await served(admitted, (request) => predict(req, res, request));
      },
    },
  ];
}

/**
 * Load and unload change what every client is served, so on the inference port, which
 * anyone who can infer can reach, they need the management token, or are off altogether.
 */
function modelControl(options: InferenceApiOptions, handle: RouteHandler): RouteHandler {
  if (options.modelControl === 'none') {
    return async () => {
      throw new ForbiddenError(
        'model control is off on this server (model_control: none); load and unload models through the management API',
      );
    };
  }
  return authenticated(options.token, handle);
}

function requireReady(model: LoadedModel, isReady: boolean): void {
  if (isReady) return;
  const why = model.state === 'ready' ? 'the server is shutting down' : `it is ${model.state}`;
  throw new ModelNotReadyError(`model ${model.name} version ${model.version} is not ready: ${why}`);
}

/** Ends when the client goes away before its answer, so a queued request is dropped. */
function disconnectSignal(res: ServerResponse): AbortSignal {
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
}

async function inferV2(
  req: IncomingMessage,
  res: ServerResponse,
  { model, body, shadows, reservation }: Admitted,
): Promise<void> {
  const headerValue = req.headers['inference-header-content-length'];
  const headerLength = headerValue === undefined ? undefined : Number(headerValue);
  if (
    headerLength !== undefined &&
    (!Number.isSafeInteger(headerLength) || headerLength < 0 || headerLength > body.length)
  ) {
    throw new InferenceInputError(
      `Inference-Header-Content-Length ${String(headerValue)} is not a length within the ${body.length}-byte body`,
    );
  }
  if (headerLength === undefined && mediaType(req) === 'application/octet-stream') {
    throw new InferenceInputError('a binary body needs the Inference-Header-Content-Length header');
  }
  const { config } = model;
  const decoded = decodeInferRequest(body, headerLength, config.inputs);
  checkRequestTensors(decoded.inputs, config.inputs);
  const requested: RequestedOutput[] =
    decoded.outputs ?? config.outputs.map((spec) => ({ name: spec.name, binary: decoded.binaryDataOutput }));
  for (const output of requested) {
    if (!config.outputs.some((spec) => spec.name === output.name)) {
      throw new InferenceInputError(
        `unknown output "${output.name}" (the model has ${config.outputs.map((spec) => spec.name).join(', ')})`,
      );
    }
  }
  const controls = requestControls(decoded.parameters);
  const shadowed = shadows?.mirror(model, async (shadow) => {
    checkRequestTensors(decoded.inputs, shadow.config.inputs);
    const placement = batchPlacement(decoded.inputs, shadow.config.inputs, shadow.config.max_batch_size > 0);
    return shadow.infer({ inputs: decoded.inputs }, { ...placement, ...controls });
  });
  const result = await model.infer(
    { inputs: decoded.inputs },
    {
      ...batchPlacement(decoded.inputs, config.inputs, config.max_batch_size > 0),
      ...controls,
      signal: disconnectSignal(res),
      ...(reservation ? { reservation } : {}),
    },
  );
  shadowed?.(result.response);
  const tensors = asTensorMap(result.response, model);
  const outputs: ResponseOutput[] = requested.map((output) => ({
    name: output.name,
    tensor: tensors[output.name] ?? missingOutput(output.name, model),
    binary: output.binary,
    ...(output.classification !== undefined ? { classification: output.classification } : {}),
    ...(model.labels ? { labels: model.labels } : {}),
  }));
  const encoded = encodeInferResponse({
    model_name: model.name,
    model_version: model.version,
    ...(decoded.id !== undefined ? { id: decoded.id } : {}),
    outputs,
  });
  res.writeHead(200, {
    'content-type': encoded.contentType,
    'content-length': encoded.body.length,
    ...(encoded.headerLength !== undefined ? { 'inference-header-content-length': encoded.headerLength } : {}),
  });
  res.end(encoded.body);
}

/** TorchServe's route: the body goes to the handler as it is (an image, JSON, text). */
async function predict(
  req: IncomingMessage,
  res: ServerResponse,
  { model, body, shadows, reservation }: Admitted,
): Promise<void> {
  if (body.length === 0) throw new InferenceInputError('the request body is empty');
  const contentType = mediaType(req);
  const request: HandlerRequest = { body, ...(contentType ? { contentType } : {}) };
  const shapeKey = `body:${contentType ?? ''}`;
  const shadowed = shadows?.mirror(model, async (shadow) => shadow.infer(request, { rows: 1, shapeKey }));
  const result: SubmitResult = await model.infer(request, {
    rows: 1,
    shapeKey,
    signal: disconnectSignal(res),
    ...(reservation ? { reservation } : {}),
  });
  shadowed?.(result.response);
  sendPrediction(res, result.response);
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

/** Triton's request parameters: `timeout` in microseconds (may only shorten), `priority` from 1. */
function requestControls(parameters: Record<string, unknown>): Pick<SubmitOptions, 'timeoutUs' | 'priority'> {
  const { timeout, priority } = parameters;
  for (const [key, value] of [
    ['timeout', timeout],
    ['priority', priority],
  ] as const) {
    if (value !== undefined && (!Number.isSafeInteger(value) || (value as number) < 0)) {
      throw new UsageError(`parameter "${key}" must be a non-negative integer, got ${JSON.stringify(value)}`);
    }
  }
  return {
    ...(typeof timeout === 'number' && timeout > 0 ? { timeoutUs: timeout } : {}),
    ...(typeof priority === 'number' && priority > 0 ? { priority } : {}),
  };
}

function asTensorMap(response: unknown, model: LoadedModel): TensorMap {
  if (isTensorMap(response)) return response;
  throw new InferenceFailedError(
    `the ${model.manifest.model.handler} handler's postprocess returned no tensors for a v2 request; v2 needs output tensors by name`,
  );
}

function missingOutput(name: string, model: LoadedModel): never {
  throw new InferenceFailedError(`the ${model.manifest.model.handler} handler did not return output "${name}"`);
}
