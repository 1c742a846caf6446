import { setMaxListeners } from 'node:events';
import type { IncomingHttpHeaders } from 'node:http';
import {
  Metadata,
  status,
  type handleUnaryCall,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type ServiceError,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import type protobuf from 'protobufjs';
import { ForbiddenError, PayloadTooLargeError } from '../core/errors.js';
import { statisticsResponse } from '../metrics/model-statistics.js';
import { inferenceProtocol, peekModelTarget } from '../protocol/grpc-messages.js';
import {
  decodeGrpcInferRequest,
  encodeGrpcInferResponse,
  type ModelInferRequestMessage,
} from '../protocol/grpc-tensors.js';
import { prepareDecoded, type PreparedRequest } from '../protocol/prepared-request.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import type { StickyHeaders } from '../traffic/version-router.js';
import { BATCHSERVE_VERSION } from '../version.js';
import type { KeyRing } from './auth.js';
import { largestInferMessage } from './grpc-message-limit.js';
import { loadFromStoreWith, modelChangeOfLoadParameters } from './model-change.js';
import { grpcGenerateCodec } from './grpc-generate.js';
import { grpcError } from './grpc-status.js';
import { asTensors, missingOutput, platformOf, V2_EXTENSIONS } from './inference-api.js';
import { tensorWork, type Infer } from './inference-call.js';
import { tritonModelConfig } from './triton-config.js';
import type { TraceSettings, TraceSettingsJson } from './trace-settings.js';

export interface GrpcApiOptions {
  readonly repository: ModelRepository;
  readonly traffic: TrafficControl;
  /** The inference call ModelInfer and each ModelStreamInfer message make. */
  readonly infer: Infer;
  /** False while the server drains: readiness fails and new requests get UNAVAILABLE. */
  readonly isAccepting: () => boolean;
  /** The keys: management for repository load and unload; in TorchServe mode, inference for infer. */
  readonly keys: KeyRing | undefined;
  readonly modelControl: 'explicit' | 'none' | 'poll';
  /** ModelStreamInfer streams open at once; beyond it a new stream is refused. */
  readonly maxStreams: number;
  /** Bytes of metadata one call may carry (grpc_max_metadata_size). */
  readonly maxMetadataBytes: number;
  /** Triton's trace settings, as the REST route reads and sets them. */
  readonly traceSettings: TraceSettings;
}

/** A stream's bookkeeping: it ends once the client is done (or the server drains) and nothing is pending. */
interface OpenStream {
  readonly call: ServerDuplexStream<Buffer, object>;
  pending: number;
  clientDone: boolean;
}

/** How a drain ends a stream the client has not finished, and refuses a new one. */
const SHUTTING_DOWN: Partial<ServiceError> = {
  code: status.UNAVAILABLE,
  details: 'the server is shutting down; a request on this stream without an answer was not run',
};

const NO_QUERY = new URL('grpc://batchserve/');
const SHARED_MEMORY = 'shared memory; send tensors in the request itself (raw_input_contents)';
const UNIMPLEMENTED: Record<string, string> = {
  SystemSharedMemoryStatus: SHARED_MEMORY,
  SystemSharedMemoryRegister: SHARED_MEMORY,
  SystemSharedMemoryUnregister: SHARED_MEMORY,
  CudaSharedMemoryStatus: `CUDA ${SHARED_MEMORY}`,
  CudaSharedMemoryRegister: `CUDA ${SHARED_MEMORY}`,
  CudaSharedMemoryUnregister: `CUDA ${SHARED_MEMORY}`,
  LogSettings: 'log settings; choose them at start with --log-level',
};

/**
 * Triton's `inference.GRPCInferenceService` on the same repository, batchers, routing,
 * shadows, canaries, prediction log and metrics as the REST front end. ModelInfer and
 * ModelStreamInfer receive their messages undecoded: the model is read from the first fields,
 * the request admitted (version picked, ready, a queue place held) and only then decoded.
 */
export class GrpcInferenceApi {
  readonly #options: GrpcApiOptions;
  readonly #streams = new Set<OpenStream>();

  readonly #types: protobuf.Root;
  /** Looked up once: every ModelInfer message is decoded with it. */
  readonly #inferRequest: protobuf.Type;
  #draining = false;

  constructor(options: GrpcApiOptions) {
    this.#options = options;

    this.#types = inferenceProtocol().types;
    this.#inferRequest = this.#types.lookupType('inference.ModelInferRequest');
  }

  /** The RPC implementations, for `Server.addService`. */
  handlers(): UntypedServiceImplementation {
    const { repository } = this.#options;
    const handlers: UntypedServiceImplementation = {
      ServerLive: unary(async () => ({ live: true })),
      ServerReady: unary(async () => ({ ready: this.#options.isAccepting() && repository.allReady() })),
      ModelReady: unary(async (request: { name: string; version: string }) => {
        const model = repository.get(request.name, request.version || undefined);
        return { ready: this.#options.isAccepting() && model.state === 'ready' };
      }),
      ServerMetadata: unary(async () => ({
        name: 'batchserve',
        version: BATCHSERVE_VERSION,
        extensions: V2_EXTENSIONS,
      })),
      ModelMetadata: unary(async (request: { name: string; version: string }) => {
        const model = repository.get(request.name, request.version || undefined);
        return {
          name: model.name,
          versions: repository.versions(model.name).map((loaded) => loaded.version),
          platform: platformOf(model),
          inputs: model.config.inputs,
          outputs: model.config.outputs,
        };
      }),
      ModelConfig: unary(async (request: { name: string; version: string }) =>
        this.#message('ModelConfigResponse', {
          config: tritonModelConfig(repository.get(request.name, request.version || undefined)),
        }),
      ),
      ModelStatistics: unary(async (request: { name: string; version: string }) => {
        const models = request.name
          ? request.version
            ? [repository.get(request.name, request.version)]
            : repository.versions(request.name)
          : repository.list();
        if (request.name && models.length === 0) repository.get(request.name);
        return this.#message('ModelStatisticsResponse', statisticsResponse(models.map((model) => model.stats)));
      }),
      RepositoryIndex: unary(async () => ({ models: await repository.index() })),
      RepositoryModelLoad: unary(async (request: RepositoryModelLoadRequest, call) => {
        this.#modelControl(call.metadata);
        const parameters = new Map(
          Object.entries(request.parameters ?? {}).map(([key, value]) => [key, parameterValue(value)]),
        );
        await loadFromStoreWith(
          repository,
          request.model_name,
          modelChangeOfLoadParameters(parameters, request.model_name),
        );
        await this.#options.traffic.versionsChanged();
        return {};
      }),
      RepositoryModelUnload: unary(async (request: { model_name: string }, call) => {
        this.#modelControl(call.metadata);
        await repository.unload(request.model_name);
        await this.#options.traffic.versionsChanged();
        return {};
      }),
      ModelInfer: (
        call: ServerUnaryCall<Buffer, object>,
        callback: (error: Partial<ServiceError> | null, value?: object) => void,
      ) => {
        const trailers = new Metadata();
        this.#infer(call.request, call.metadata, call.getDeadline(), cancelSignal(call), (key, value) => {
          trailers.set(key, value);
        }).then(
          (answer) => {
            call.sendMetadata(trailers);
            callback(null, answer);
          },
          (error: unknown) => {
            const failure = grpcError(error);
            for (const [key, value] of Object.entries(trailers.getMap())) failure.metadata?.set(key, value);
            callback(failure);
          },
        );
      },
      ModelStreamInfer: (call: ServerDuplexStream<Buffer, object>) => this.#stream(call),
      // Triton's TraceSetting: no settings reads them; an empty value gives a model's setting back to the global one.
      TraceSetting: unary(
        async (request: { settings?: Record<string, { value?: string[] }>; model_name?: string }, call) => {
          const model = request.model_name || undefined;
          if (model !== undefined) repository.get(model);
          const entries = Object.entries(request.settings ?? {});
          const { traceSettings } = this.#options;
          if (entries.length === 0) return { settings: settingValues(traceSettings.read(model)) };
          this.#options.keys?.check('management', firstString(call.metadata, 'authorization'));
          const body = Object.fromEntries(
            entries.map(([name, { value = [] }]) => [name, value.length === 0 ? null : value]),
          );
          return { settings: settingValues(traceSettings.update(model, body)) };
        },
      ),
    };
    for (const [rpc, what] of Object.entries(UNIMPLEMENTED)) {
      handlers[rpc] = (_call: unknown, callback: (error: Partial<ServiceError>) => void) =>
        callback({
          code: status.UNIMPLEMENTED,
          details: `${rpc}: batchserve does not implement ${what}`,
        });
    }
    for (const [rpc, handler] of Object.entries(handlers)) {
      handlers[rpc] = metadataGuard(handler as GuardedHandler, this.#options.maxMetadataBytes) as typeof handler;
    }
    return handlers;
  }

  /**
   * Stops taking stream messages; each open stream ends once its pending answers are written,
   * with UNAVAILABLE unless the client had finished it.
   */
  drain(): void {
    this.#draining = true;
    for (const stream of this.#streams) this.#endIfIdle(stream);
  }

  /**
   * The gRPC codec: the model is read from the message's first fields (peekModelTarget), the
   * request admitted on them and only then decoded against the version that answers.
   * `tell` receives the metadata the answer carries (the version, the request id).
   */
  async #infer(
    raw: Buffer,
    metadata: Metadata,
    deadline: Date | number,
    signal: AbortSignal,
    tell: (key: string, value: string) => void,
  ): Promise<object> {
    const target = peekModelTarget(raw);
    const at = deadline instanceof Date ? deadline.getTime() : deadline;
    let answer: object | undefined;
    await this.#options.infer(
      {
        protocol: 'grpc',
        model: target.name,
        version: target.version || undefined,
        authorization: firstString(metadata, 'authorization'),
        headers: stickyHeaders(metadata),
        url: NO_QUERY,
        requestId: firstString(metadata, 'x-request-id'),
        signal,
        ...(Number.isFinite(at) ? { deadline: at } : {}),
        tell,
      },
      {
        admit: (model) => refuseOversized(raw, model),
        read: () => ({ bytes: raw, contentType: 'application/grpc' }),
        decode: (model) => {
          const message = this.#inferRequest.decode(raw) as unknown as ModelInferRequestMessage;
          const prepared = prepareDecoded(
            decodeGrpcInferRequest(message, model.signature.bytesEncoding),
            model.signature,
          );
          return tensorWork(prepared, ownsItsData(prepared));
        },
        answer: (model, { prepared }, [result]) => {
          answer = this.#encode(model, prepared, result?.response);
        },
      },
    );
    return answer as object;
  }

  #encode(model: LoadedModel, prepared: PreparedRequest, response: unknown): object {
    const tensors = asTensors(response, model);
    return encodeGrpcInferResponse({
      model_name: model.name,
      model_version: model.version,
      ...(prepared.id !== undefined ? { id: prepared.id } : {}),
      outputs: prepared.outputs.map((output) => ({
        name: output.name,
        tensor: tensors[output.name] ?? missingOutput(output.name, model),
        binary: true,
        ...(output.classification !== undefined ? { classification: output.classification } : {}),
        ...(model.labels ? { labels: model.labels } : {}),
      })),
    });
  }

  /**
   * Many requests on one stream, answered as each finishes; a failed one is answered with its
   * `error_message` and the stream goes on.
   */
  #stream(call: ServerDuplexStream<Buffer, object>): void {
    if (this.#draining) {
      call.emit('error', SHUTTING_DOWN);
      return;
    }
    if (this.#streams.size >= this.#options.maxStreams) {
      const why = `${this.#streams.size} streams are open, the most this server takes (grpc_max_streams)`;
      call.emit('error', { code: status.RESOURCE_EXHAUSTED, details: why });
      return;
    }
    const stream: OpenStream = { call, pending: 0, clientDone: false };
    this.#streams.add(stream);
    const signal = cancelSignal(call);
    // The stream's requests share its cancel signal, and each one queued or running holds one
    // abort listener on it until it settles (the batcher removes it): their count is the
    // stream's requests in flight, bounded by the queue, not a leak past Node's default of 10.
    setMaxListeners(0, signal);
    call.on('data', (raw: Buffer) => {
      // Read before the request runs: its bytes may be moved into an instance.
      const head = echo(raw);
      if (this.#draining) {
        call.write({ error_message: 'the server is shutting down; this request was not run', infer_response: {} });
        return;
      }
      stream.pending += 1;
      // Answers on a stream carry their version and id in the message, not in metadata.
      const answered = this.#generates(raw)
        ? this.#generate(raw, call, signal)
        : this.#infer(raw, call.metadata, call.getDeadline(), signal, () => undefined).then((answer) => {
            call.write({ error_message: '', infer_response: answer });
          });
      answered
        .catch((error: unknown) => call.write({ error_message: grpcError(error).details, infer_response: head }))
        .finally(() => {
          stream.pending -= 1;
          this.#endIfIdle(stream);
        });
    });
    call.on('end', () => {
      stream.clientDone = true;
      this.#endIfIdle(stream);
    });
    call.on('cancelled', () => this.#streams.delete(stream));
    call.on('error', () => this.#streams.delete(stream));
  }

  /** Whether a stream message names a model that generates text (its answers then stream, decoupled). */
  #generates(raw: Buffer): boolean {
    try {
      const { name, version } = peekModelTarget(raw);
      return this.#options.repository.get(name, version || undefined).generator !== undefined;
    } catch {
      // Unknown or unreadable: the inference call says why.
      return false;
    }
  }

  /** A generation on a stream: its text as it comes, then the final flag (grpc-generate.ts). */
  async #generate(raw: Buffer, call: ServerDuplexStream<Buffer, object>, signal: AbortSignal): Promise<void> {
    const target = peekModelTarget(raw);
    const message = this.#inferRequest.decode(raw) as unknown as ModelInferRequestMessage;
    await this.#options.infer(
      {
        protocol: 'grpc',
        model: target.name,
        version: target.version || undefined,
        authorization: firstString(call.metadata, 'authorization'),
        headers: stickyHeaders(call.metadata),
        url: NO_QUERY,
        requestId: firstString(call.metadata, 'x-request-id'),
        signal,
        tell: () => undefined,
      },
      {
        ...grpcGenerateCodec(message, (response) => call.write({ error_message: '', infer_response: response })),
        read: () => ({ bytes: raw, contentType: 'application/grpc' }),
      },
    );
  }

  #endIfIdle(stream: OpenStream): void {
    if (stream.pending > 0 || !(stream.clientDone || this.#draining) || !this.#streams.has(stream)) return;
    this.#streams.delete(stream);
    if (stream.clientDone) stream.call.end();
    // After the answers already written. OK would read as the end of a stream the client had
    // finished; UNAVAILABLE says that what it sent without an answer was not run, to send again
    // elsewhere.
    else stream.call.emit('error', SHUTTING_DOWN);
  }

  /** Load and unload on the inference port, as on REST: with the management token, unless off. */
  #modelControl(metadata: Metadata): void {
    if (this.#options.modelControl !== 'explicit') {
      throw new ForbiddenError(
        `model control is off on this server (model_control: ${this.#options.modelControl}); load and unload models through the management API`,
      );
    }
    this.#options.keys?.check('management', firstString(metadata, 'authorization'));
  }

  /** A message built with the proto's own conversion: enum names to numbers, unknown keys dropped. */
  #message(type: string, value: object): object {
    return this.#types.lookupType(`inference.${type}`).fromObject(value);
  }
}

/** Trace settings as TraceSettingResponse's map holds them: each value a list of strings. */
function settingValues(settings: TraceSettingsJson): Record<string, { value: string[] }> {
  return Object.fromEntries(
    Object.entries(settings).map(([name, value]) => [name, { value: Array.isArray(value) ? value : [value] }]),
  );
}

/** A message larger than the model's largest batch can hold is refused before it is decoded. */
function refuseOversized(raw: Buffer, model: LoadedModel): void {
  const limit = largestInferMessage(model.config);
  if (raw.length > limit) {
    throw new PayloadTooLargeError(
      `the request is ${raw.length} bytes; model ${model.name} version ${model.version} takes at most ${limit} (its largest batch, max_batch_size ${model.config.max_batch_size}, of every input)`,
    );
  }
}

/** A unary RPC from an async function; errors become gRPC statuses. */
type GuardedHandler = (
  call: { metadata: Metadata; emit(event: 'error', error: object): boolean },
  callback?: (error: Partial<ServiceError>) => void,
) => void;

/** HPACK's per-entry overhead, which HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE counts too. */
const HEADER_ENTRY_OVERHEAD = 32;

/** A call's metadata as HTTP/2 counts a header list: names, values and 32 bytes an entry. */
export function metadataBytes(metadata: Metadata): number {
  let bytes = 0;
  for (const [key, value] of Object.entries(metadata.toHttp2Headers())) {
    for (const item of Array.isArray(value) ? value : [value]) {
      bytes += key.length + String(item).length + HEADER_ENTRY_OVERHEAD;
    }
  }
  return bytes;
}

/** Refuses a call whose metadata is over the limit before the RPC sees it: RESOURCE_EXHAUSTED, naming the limit. */
function metadataGuard(handler: GuardedHandler, limit: number): GuardedHandler {
  return (call, callback) => {
    const bytes = metadataBytes(call.metadata);
    if (bytes <= limit) {
      handler(call, callback);
      return;
    }
    const error = {
      code: status.RESOURCE_EXHAUSTED,
      details: `the call's metadata is ${bytes} bytes, over the ${limit} this server takes (grpc_max_metadata_size)`,
    };
    if (callback) callback(error);
    else call.emit('error', error);
  };
}

function unary<Request, Response>(
  handle: (request: Request, call: ServerUnaryCall<Request, Response>) => Promise<Response>,
): handleUnaryCall<Request, Response> {
  return (call, callback) => {
    handle(call.request, call).then(
      (response) => callback(null, response),
      (error: unknown) => callback(grpcError(error) as ServiceError),
    );
  };
}

interface RepositoryModelLoadRequest {
  readonly model_name: string;
  readonly parameters?: Record<string, RepositoryParameter>;
}

/** A ModelRepositoryParameter as proto-loader gives it: the oneof's name says which field is set. */
interface RepositoryParameter {
  readonly parameter_choice?: string;
  readonly [field: string]: unknown;
}

function parameterValue(parameter: RepositoryParameter): unknown {
  return parameter.parameter_choice === undefined ? undefined : parameter[parameter.parameter_choice];
}

/** The call's cancellation (the client went away, or its deadline passed) as an AbortSignal. */
function cancelSignal(call: { on(event: 'cancelled', listener: () => void): unknown }): AbortSignal {
  const controller = new AbortController();
  call.on('cancelled', () => controller.abort());
  return controller.signal;
}

function stickyHeaders(metadata: Metadata): StickyHeaders {
  return {
    get headers(): IncomingHttpHeaders {
      const headers: IncomingHttpHeaders = {};
      for (const [key, value] of Object.entries(metadata.getMap())) {
        if (typeof value === 'string') headers[key] = value;
      }
      return headers;
    },
  };
}

function firstString(metadata: Metadata, key: string): string | undefined {
  const value = metadata.get(key)[0];
  return typeof value === 'string' ? value : undefined;
}

/**
 * Whether the request's tensors may be moved into a worker instance: each numeric tensor's
 * memory must belong to this request alone. Raw inputs are views of the received message,
 * which grpc-js assembles into a buffer of its own, except small ones, which Node allocates
 * from its shared pool: moving that would take the pool from everyone. Those few bytes are copied.
 */
function ownsItsData(prepared: PreparedRequest): boolean {
  for (const tensor of Object.values(prepared.inputs)) {
    const { data } = tensor;
    if (!Array.isArray(data) && data.buffer.byteLength <= POOLED_BELOW) return false;
  }
  return true;
}

/** Buffers up to half of Node's pool size may come from the pool (Buffer.allocUnsafe). */
const POOLED_BELOW = Buffer.poolSize >>> 1;

/** What a failed stream answer can say of its request: the model and id, when they can be read. */
function echo(raw: Buffer): object {
  try {
    const { name, version, id } = peekModelTarget(raw);
    return { model_name: name, model_version: version, id };
  } catch {
    return {};
  }
}
