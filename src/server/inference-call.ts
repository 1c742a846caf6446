import { randomUUID } from 'node:crypto';
import type { QueueReservation, SubmitResult } from '../batching/batch-request.js';
import {
  BatchserveError,
  DeadlineExceededError,
  InferenceInputError,
  ModelNotReadyError,
  QueueTimeoutError,
} from '../core/errors.js';
import type { HandlerRequest } from '../core/request.js';
import type { Tensors } from '../core/tensors.js';
import { answeredTokens } from '../handlers/text-batch.js';
import type { Protocol, ServerMetrics } from '../metrics/server-metrics.js';
import { traceNow } from '../core/trace-channels.js';
import { retarget, type PreparedRequest } from '../protocol/prepared-request.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import type { GenerationRequest, GenerationResult } from '../runtime/generator.js';
import type { TrafficControl } from '../traffic/traffic-control.js';
import type { RouteChoice, StickyHeaders } from '../traffic/version-router.js';
import type { KeyRing } from './auth.js';
import { statusOf } from './http.js';
import type { FinishedRequest, LoggedRequest, PredictionLogs } from './prediction-logging.js';
import type { RequestTrace } from './request-trace.js';
import type { RequestTracing } from './request-tracing.js';

/**
 * The one inference call every front door makes, as Triton's HTTP and gRPC frontends both call
 * TRITONSERVER_ServerInferAsync: v2 REST (JSON and binary), TorchServe's /predictions, gRPC
 * (unary and streaming) and OpenAI's /v1 routes only decode a request and encode its answer
 * (a `Codec`). Admission, routing, readiness, the queue place, the prediction log, shadows,
 * the response cache (in the version's `infer`), inference, metrics and the outcome happen here,
 * once, in this order:
 *
 *  1. the inference key (TorchServe's auth mode), then the request id (the client's, or new);
 *  2. the version: the pinned one, or routed (split, canary, sticky key; OpenAI, which has no
 *     version field, is always routed); it must be ready and the server accepting;
 *  3. what the transport checks before a queue place (a declared body size, a gRPC message's);
 *  4. a queue place, held while the body arrives (a generation's admission is its engine's:
 *     `generation.max_waiting`, refused as the same 503 BS_ERR_QUEUE_FULL);
 *  5. the body, read; the version picked again if it stopped being ready meanwhile;
 *  6. the prediction log's sample, then the body decoded against the version;
 *  7. shadows (routed requests only), then inference: the version's batcher (and its response
 *     cache) or its generator;
 *  8. the answer, tokens counted, and one outcome for metrics, statistics, the canary and the
 *     prediction log, however the call ended;
 *  9. with tracing on, the request's spans (tracing.ts), from the caller's `traceparent`.
 */
export type Infer = <W extends Work>(head: CallHead, codec: Codec<W>) => Promise<void>;

/** What a transport knows of a request before its body: what admission decides on. */
export interface CallHead {
  /** The metrics' protocol label. */
  readonly protocol: Protocol;
  /**
   * The model named in the path or message; or, for OpenAI's routes, which name it in the body,
   * how to read it from the body: that body is then read before admission (no queue place is
   * held while it arrives, and a body that does not parse is refused before any version is).
   */
  readonly model: string | ((received: Received) => string);
  /** A pinned version; undefined: routed, and mirrored to the model's shadow. */
  readonly version: string | undefined;
  /** The Authorization header (or gRPC metadata). */
  readonly authorization: string | undefined;
  /** Where a `header:` sticky key is read (gRPC metadata in the same shape)… */
  readonly headers: StickyHeaders;
  /** …and a `query:` one. */
  readonly url: URL;
  /** The client's own X-Request-Id (header or metadata). */
  readonly requestId: string | undefined;
  /** Aborts when the client goes away (or its gRPC deadline passes): a queued request is dropped. */
  readonly signal: AbortSignal;
  /** A gRPC deadline (epoch ms): the request's timeout when sooner than its own. */
  readonly deadline?: number;
  /** Told what the answer carries beside its body as soon as it is known, so error answers carry it too. */
  tell(name: 'x-model-version' | 'x-request-id', value: string): void;
}

/** The request as received, for a prediction log that keeps inputs. */
export interface Received {
  readonly bytes: Buffer;
  readonly contentType: string | undefined;
}

/** How one transport reads a request and writes its answer: nothing else. */
export interface Codec<W extends Work> {
  /** Set by a codec whose work is a generation: its admission is the engine's, not a batcher's queue place. */
  readonly generates?: true;
  /** What the transport refuses before a queue place is taken (a declared body over the limit). */
  admit?(model: LoadedModel): void;
  /** The body, read while a queue place is held (REST); at hand already for gRPC and OpenAI. */
  read(): Promise<Received> | Received;
  /** The request checked against the version that answers it. */
  decode(model: LoadedModel, received: Received): W;
  /** Writes the answer; what it throws fails the request like any error. */
  answer(model: LoadedModel, work: W, results: readonly SubmitResult[]): void;
}

/** A decoded request: forward passes through the version's batcher, or a generation. */
export type Work = BatchedWork | GenerationWork;

/** One request to the version's batcher. */
export interface Submission {
  /** Not movable yet: the call decides that (no shadow, no log, one submission, buffers its own). */
  readonly request: HandlerRequest;
  readonly rows: number;
  readonly shapeKey: string;
}

export interface BatchedWork {
  readonly kind: 'batched';
  /** Usually one; several run together and may share batches (a form's parts, embeddings' chunks). */
  readonly submissions: readonly Submission[];
  /** An id the body carries (v2 `id`): the request id when it can travel in a header. */
  readonly id: string | undefined;
  readonly priority: number | undefined;
  readonly timeoutUs: number | undefined;
  /** False when a buffer may be shared (gRPC's small pooled inputs): copied into a worker, never moved. */
  readonly ownsBuffers: boolean;
  /** The tensors, for a prediction log that keeps inputs in full. */
  readonly tensors: Tensors | undefined;
  /** Submission `index` for a shadow version: tensors checked against its inputs and placed in its batches. */
  forShadow(shadow: LoadedModel, index: number): Submission;
}

/**
 * Work whose submissions any version takes as they are (bodies, texts: nothing checked against
 * a version's inputs), so a shadow gets the same ones.
 */
export function uncheckedWork(submissions: readonly Submission[], ownsBuffers: boolean): BatchedWork {
  return {
    kind: 'batched',
    submissions,
    id: undefined,
    priority: undefined,
    timeoutUs: undefined,
    ownsBuffers,
    tensors: undefined,
    forShadow: (_shadow, index) => submissions[index] as Submission,
  };
}

export interface GenerationWork {
  readonly kind: 'generation';
  readonly request: Omit<GenerationRequest, 'signal'>;
  readonly id: undefined;
  /** The same prompt for a shadow version, tokenized by its own tokenizer; no text streamed. */
  forShadow(shadow: LoadedModel): Omit<GenerationRequest, 'signal' | 'onText'>;
}

/** How one request to a model version ended, as the request itself saw it. */
export interface RequestOutcome extends FinishedRequest {
  readonly protocol: Protocol;
  /** Set when the prediction log took the request. */
  readonly logged: LoggedRequest | undefined;
}

export interface InferenceCallOptions {
  readonly repository: ModelRepository;
  readonly traffic: TrafficControl;
  readonly logs: PredictionLogs;
  readonly keys: KeyRing | undefined;
  /** False while the server drains: new requests get 503 (gRPC UNAVAILABLE). */
  readonly isAccepting: () => boolean;
  /** Called once per request that reached a version, and once per shadow copy. */
  readonly requestFinished: (outcome: RequestOutcome) => void;
  /** OpenTelemetry traces; undefined when off, and then no trace object is made. */
  readonly tracing?: RequestTracing;
}

/** Request ids that can travel in a header: printable ASCII, and not too long to log. */
export const HEADER_SAFE = /^[\x21-\x7e][\x20-\x7e]{0,255}$/;

export function inferenceCall(options: InferenceCallOptions): Infer {
  const { repository, traffic, logs, keys, isAccepting, requestFinished, tracing } = options;
  const ready = (model: LoadedModel): boolean => isAccepting() && model.state === 'ready';
  // Decided once: only TorchServe's auth mode guards inference with a key.
  const guarded = keys?.guards('inference') === true ? keys : undefined;

  /** The version that answers, pinned or routed; said in the answer before anything can fail. */
  const pick = (head: CallHead, name: string, choice: RouteChoice): LoadedModel => {
    const model =
      head.version === undefined
        ? traffic.router.route(name, head.headers, head.url, choice)
        : repository.get(name, head.version);
    head.tell('x-model-version', model.version);
    return model;
  };

  /** Readiness, checked at the door and again once the body is in (a version may start draining meanwhile). */
  const requireReady = (model: LoadedModel): void => {
    if (ready(model)) return;
    const why = model.state === 'ready' ? 'the server is shutting down' : `it is ${model.state}`;
    throw new ModelNotReadyError(`model ${model.name} version ${model.version} is not ready: ${why}`);
  };

  /** A request's (or a shadow copy's) outcome, once, however it ended. */
  const recorded = async (
    protocol: Protocol,
    served: boolean,
    modelOf: () => LoadedModel | undefined,
    loggedOf: () => LoggedRequest | undefined,
    work: () => Promise<SubmitResult | undefined>,
  ): Promise<void> => {
    const started = process.hrtime.bigint();
    let result: SubmitResult | undefined;
    let status = 200;
    let errorCode: string | undefined;
    try {
      result = await work();
    } catch (error) {
      status = statusOf(error);
      errorCode = error instanceof BatchserveError ? error.code : undefined;
      throw error;
    } finally {
      const model = modelOf();
      if (model) {
        const seconds = Number(process.hrtime.bigint() - started) / 1e9;
        requestFinished({ model, served, status, seconds, result, errorCode, logged: loggedOf(), protocol });
      }
    }
  };

  /** Mirrors `run` to the served version's shadow, if it has one; the copy's outcome is recorded as a shadow's. */
  const mirror = (
    head: CallHead,
    served: LoadedModel,
    logged: LoggedRequest | undefined,
    run: (shadow: LoadedModel) => Promise<SubmitResult>,
  ): ((answer: unknown) => void) | undefined =>
    traffic.mirror(served, (shadow) => {
      let result: SubmitResult | undefined;
      return recorded(
        head.protocol,
        false,
        () => shadow,
        () => logged,
        async () => (result = await run(shadow)),
      ).then(() => result as SubmitResult);
    });

  const runBatched = async (
    head: CallHead,
    model: LoadedModel,
    work: BatchedWork,
    reservation: QueueReservation | undefined,
    logged: LoggedRequest | undefined,
    trace: RequestTrace | undefined,
  ): Promise<SubmitResult[]> => {
    const timeoutUs = sooner(work.timeoutUs, head.deadline);
    // When the deadline set the timeout, the queue's timing out is the deadline passing.
    const byDeadline = timeoutUs !== work.timeoutUs;
    const options = {
      ...(work.priority !== undefined ? { priority: work.priority } : {}),
      ...(timeoutUs !== undefined ? { timeoutUs } : {}),
    };
    const { submissions } = work;
    const mirrored =
      head.version === undefined
        ? submissions.map((_, index) =>
            mirror(head, model, logged, (shadow) => {
              const copy = work.forShadow(shadow, index);
              return shadow.infer(copy.request, { rows: copy.rows, shapeKey: copy.shapeKey, ...options });
            }),
          )
        : [];
    // A request's buffers move into a worker only when nothing else reads them after: no shadow,
    // no log keeping inputs, no other submission sharing its body.
    const movable =
      work.ownsBuffers && submissions.length === 1 && mirrored[0] === undefined && logged?.body === undefined;
    return Promise.all(
      submissions.map(async ({ request, rows, shapeKey }, index) => {
        const traced = trace?.submission();
        const result = await model
          .infer(movable ? ({ ...request, movable: true } as HandlerRequest) : request, {
            rows,
            shapeKey,
            ...options,
            signal: head.signal,
            ...(index === 0 && reservation ? { reservation } : {}),
            trace: traced,
          })
          .catch((error: unknown) => {
            if (byDeadline && error instanceof QueueTimeoutError) throw new DeadlineExceededError('Deadline Exceeded');
            throw error;
          });
        if (traced) traced.answeredAt = traceNow();
        mirrored[index]?.(result.response);
        return result;
      }),
    );
  };

  const runGeneration = async (
    head: CallHead,
    model: LoadedModel,
    work: GenerationWork,
    logged: LoggedRequest | undefined,
    trace: RequestTrace | undefined,
  ): Promise<SubmitResult> => {
    const mirrored =
      head.version === undefined
        ? mirror(head, model, logged, (shadow) => generate(shadow, work.forShadow(shadow)))
        : undefined;
    const traced = trace?.generation();
    const result = await generate(model, { ...work.request, signal: head.signal, trace: traced });
    mirrored?.(result.response);
    return result;
  };

  return async <W extends Work>(head: CallHead, codec: Codec<W>): Promise<void> => {
    guarded?.check('inference', head.authorization);
    let id = head.requestId !== undefined && HEADER_SAFE.test(head.requestId) ? head.requestId : randomUUID();
    head.tell('x-request-id', id);
    const choice: RouteChoice = { routing: 'explicit', stickyKey: undefined };
    let model: LoadedModel | undefined;
    let logged: LoggedRequest | undefined;
    const named = head.model;
    let early: Received | undefined;
    if (typeof named !== 'string') early = await codec.read();
    const name = typeof named === 'string' ? named : named(early as Received);
    const trace = tracing?.begin(head.headers.headers);
    let results: SubmitResult[] | undefined;
    try {
      await recorded(
        head.protocol,
        true,
        () => model,
        () => logged,
        async () => {
          model = pick(head, name, choice);
          requireReady(model);
          codec.admit?.(model);
          let reservation = codec.generates ? undefined : model.reserve();
          try {
            const received = early ?? (await codec.read());
            if (!ready(model)) {
              reservation?.release();
              reservation = undefined;
              model = pick(head, name, choice);
              requireReady(model);
            }
            const answering = model;
            trace?.open(name, answering, {
              'batchserve.routing': choice.routing,
              'batchserve.protocol': head.protocol,
            });
            if (logs.sample(answering)) {
              const keeps = logs.keepsInputs(answering);
              logged = {
                routing: choice.routing,
                stickyKey: choice.stickyKey,
                id,
                rows: 1,
                body: keeps ? received.bytes : undefined,
                contentType: received.contentType,
                tensors: undefined,
              };
            }
            const work = codec.decode(answering, received);
            if (work.id !== undefined && HEADER_SAFE.test(work.id)) {
              id = work.id;
              head.tell('x-request-id', id);
            }
            if (work.kind === 'generation') {
              results = [await runGeneration(head, answering, work, logged, trace)];
            } else {
              if (logged) {
                logged.id = id;
                logged.rows = work.submissions.reduce((rows, submission) => rows + submission.rows, 0);
                if (logged.body) logged.tensors = work.tensors;
              }
              results = await runBatched(head, answering, work, reservation, logged, trace);
            }
            codec.answer(answering, work, results);
            countTokens(answering, work, results);
            return results[results.length - 1];
          } finally {
            reservation?.release();
          }
        },
      );
    } catch (error) {
      if (trace) {
        trace.open(name, model, { 'batchserve.protocol': head.protocol });
        trace.end(statusOf(error), error instanceof BatchserveError ? error.code : undefined, {
          'batchserve.request_id': id,
        });
      }
      throw error;
    }
    trace?.end(200, undefined, { 'batchserve.request_id': id }, results);
  };
}

/** A generation as the outcome sees a batch: its time in the engine is its compute. */
async function generate(model: LoadedModel, request: GenerationRequest): Promise<SubmitResult> {
  const generator = model.generator;
  if (!generator) throw new InferenceInputError(`model ${model.name} version ${model.version} does not generate`);
  const started = process.hrtime.bigint();
  const response: GenerationResult = await generator.generate(request);
  return {
    response,
    queueNs: 0,
    timings: { computeInputNs: 0, computeInferNs: Number(process.hrtime.bigint() - started), computeOutputNs: 0 },
    batchRows: 1,
    instanceId: `${model.name}:${model.version}:generator`,
  };
}

/** Tokens a text model's answers carried, for the tokens counter: a generation's both ways, a text handler's prompt. */
function countTokens(model: LoadedModel, work: Work, results: readonly SubmitResult[]): void {
  if (work.kind === 'generation') {
    const result = results[0]?.response as GenerationResult;
    model.countTokens('prompt', result.promptTokens);
    model.countTokens('completion', result.completionTokens);
    return;
  }
  // Tensors answer tensors; only a body or texts go through a text handler, which counts tokens.
  if (work.submissions[0]?.request.kind === 'tensors') return;
  let tokens: number | undefined;
  for (const { response } of results) {
    const answered = answeredTokens(response);
    if (answered !== undefined) tokens = (tokens ?? 0) + answered;
  }
  if (tokens !== undefined) model.countTokens('prompt', tokens);
}

/** The request's timeout, or what is left before the gRPC deadline when that is sooner (µs). */
function sooner(timeoutUs: number | undefined, deadline: number | undefined): number | undefined {
  if (deadline === undefined || !Number.isFinite(deadline)) return timeoutUs;
  const leftUs = Math.max(1, Math.round((deadline - Date.now()) * 1000));
  return timeoutUs !== undefined && timeoutUs <= leftUs ? timeoutUs : leftUs;
}

/** A checked v2 request (REST or gRPC) as work: one submission, its shadows' copies re-checked. */
export function tensorWork(
  prepared: PreparedRequest,
  ownsBuffers: boolean,
): BatchedWork & { prepared: PreparedRequest } {
  const submission = (checked: PreparedRequest): Submission => ({
    request: { kind: 'tensors', inputs: checked.inputs, rows: checked.rows, movable: false },
    rows: checked.rows,
    shapeKey: checked.shapeKey,
  });
  return {
    kind: 'batched',
    submissions: [submission(prepared)],
    id: prepared.id,
    priority: prepared.priority,
    timeoutUs: prepared.timeoutUs,
    ownsBuffers,
    tensors: prepared.inputs,
    forShadow: (shadow) => submission(retarget(prepared, shadow.signature)),
    prepared,
  };
}

/**
 * The one place a request's metrics and statistics are recorded: Prometheus counters and
 * histograms, the v2 statistics, the canary's judgement and the prediction log all read the
 * same outcome.
 */
export function outcomeRecorder(
  metrics: ServerMetrics,
  traffic: TrafficControl,
  logs: PredictionLogs,
): (outcome: RequestOutcome) => void {
  return (outcome) => {
    const { model, served, status, seconds, result, logged } = outcome;
    if (logged !== undefined) logs.record(outcome, logged);
    const totalNs = Math.round(seconds * 1e9);
    if (result) {
      const { timings, queueNs } = result;
      model.stats.recordSuccess({ queueNs, ...timings, totalNs });
      const computeNs = timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs;
      metrics.requestTimings(model.name, model.version, queueNs / 1e9, computeNs / 1e9);
    } else {
      model.stats.recordFailure(totalNs);
    }
    if (!served) return;
    metrics.requestFinished(model.name, model.version, status, seconds, outcome.protocol);
    if (status === 503 && outcome.errorCode !== undefined) {
      metrics.requestRefused(model.name, model.version, outcome.errorCode);
    }
    traffic.requestFinished(model, status, seconds);
  };
}
