import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import type { SubmitResult } from '../batching/batcher.js';
import type { Logger } from 'pino';
import { modelConfigSchema, type PredictionLogConfig } from '../config/model-config.js';
import { validateField } from '../config/schema-kit.js';
import {
  FeedbackInvalidError,
  FeedbackUnknownIdError,
  ModelNotFoundError,
  PredictionLogOffError,
} from '../core/errors.js';
import { quoted } from '../core/quote.js';
import { isTensors, type Tensor, type Tensors } from '../core/tensors.js';
import type { FeedbackRecord, PredictionRecord, RankedLabel, Routing } from '../experiment/log-records.js';
import { PredictionIndex, findLoggedPrediction, type PredictionRef } from '../experiment/prediction-index.js';
import { PredictionLogWriter } from '../experiment/prediction-log-writer.js';
import type { ServerMetrics } from '../metrics/server-metrics.js';
import { topClassesPerRow } from '../protocol/classification.js';
import { plainValues } from '../protocol/nested.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { ModelRepository } from '../repository/model-repository.js';
import type { FeedbackQuality } from '../traffic/canary.js';
import type { TrafficControl } from '../traffic/traffic-control.js';

/**
 * One logged request, from its admission to its outcome. Made only for requests the sample
 * takes, so requests that are not logged cost nothing here.
 */
export interface LoggedRequest {
  routing: Routing;
  stickyKey: string | undefined;
  /** The request id, as sent back in `X-Request-Id`. */
  id: string;
  rows: number;
  /** Kept when the log keeps inputs (`hash`, `full`): the body, intact, since such requests are never moved. */
  body: Buffer | undefined;
  contentType: string | undefined;
  /** Tensor requests (v2, gRPC): the decoded inputs, for `inputs: full`. */
  tensors: Tensors | undefined;
}

/** How a request to a model version ended, as the request itself saw it. */
export interface FinishedRequest {
  readonly model: LoadedModel;
  /** False for a shadow's copy: it counts in the version's statistics, not in served traffic. */
  readonly served: boolean;
  /** The HTTP status it was (or, for a shadow, would have been) answered with. */
  readonly status: number;
  /** From its headers to its answer. */
  readonly seconds: number;
  /** Set when a forward pass answered it. */
  readonly result: SubmitResult | undefined;
  /** The stable code of the error it ended with, if it did. */
  readonly errorCode: string | undefined;
}

export interface PredictionLogsOptions {
  readonly repository: ModelRepository;
  readonly traffic: TrafficControl;
  readonly metrics: ServerMetrics;
  readonly logger: Logger;
  /** `serve --prediction-log DIR`: every model logs into DIR/<model>. */
  readonly serverFolder: string | undefined;
}

/** Outputs with more elements than this are logged by shape and sha256, not element by element. */
const MAX_LOGGED_ELEMENTS = 1024;
/** One error line per this many milliseconds at most, however often a broken disk fails. */
const ERROR_LOG_INTERVAL_MS = 10_000;

/**
 * The server's prediction logs: which versions log and where, the records of answered requests
 * (and of shadows' copies), and feedback joined to them by request id. A model's versions share
 * a writer when their logs share a folder.
 */
export class PredictionLogs {
  readonly #options: PredictionLogsOptions;
  readonly #settings = new WeakMap<LoadedModel, { config: PredictionLogConfig; writer: PredictionLogWriter } | null>();
  readonly #writers = new Map<string, PredictionLogWriter>();
  readonly #indexes = new Map<string, PredictionIndex<PredictionRef & { writer: PredictionLogWriter }>>();
  #lastErrorLogged = 0;

  constructor(options: PredictionLogsOptions) {
    this.#options = options;
  }

  /** Whether to log this request of `model`: its log is on and the sample takes it. */
  sample(model: LoadedModel): boolean {
    const log = this.#logOf(model);
    return log !== undefined && (log.config.sample_rate === 1 || Math.random() < log.config.sample_rate);
  }

  /** Whether `model`'s log keeps inputs, so its requests must keep their bodies intact. */
  keepsInputs(model: LoadedModel): boolean {
    return (this.#logOf(model)?.config.inputs ?? 'none') !== 'none';
  }

  /** Whether any loaded version of the model logs, so feedback can join. */
  joins(name: string): boolean {
    return this.#options.repository.versions(name).some((model) => this.#logOf(model) !== undefined);
  }

  /** Queues the record of one finished request (or shadow copy); never throws, never waits. */
  record(outcome: FinishedRequest, request: LoggedRequest): void {
    const log = this.#logOf(outcome.model);
    if (log === undefined) return;
    const { model, served, status, seconds, result } = outcome;
    const answer = result === undefined ? {} : describeAnswer(result.response, model, log.config.top_k);
    const record: PredictionRecord = {
      type: 'prediction',
      time: new Date().toISOString(),
      id: request.id,
      model: model.name,
      version: model.version,
      routing: served ? request.routing : 'shadow',
      ...(served ? {} : { shadow: true as const }),
      ...(served && request.stickyKey !== undefined ? { sticky_key: request.stickyKey } : {}),
      status,
      ...(outcome.errorCode !== undefined ? { error_code: outcome.errorCode } : {}),
      latency_ms: Math.round(seconds * 1e6) / 1e3,
      rows: request.rows,
      ...answer,
      ...(log.config.inputs === 'none' ? {} : { inputs: describeInputs(request, log.config.inputs) }),
    };
    if (!log.writer.append(record) || !served || status >= 300) return;
    this.#indexOf(model.name).add(request.id, {
      version: model.version,
      prediction: answer.prediction,
      writer: log.writer,
    });
  }

  /**
   * Takes `POST /v2/models/{m}/feedback`: joins it to the logged prediction with its id, logs it
   * beside it and tells the canary guardrails. Unknown model: 404; a model that logs nothing:
   * 409; a malformed body: 400; an id no log file holds: 404.
   */
  async feedback(name: string, body: unknown): Promise<{ id: string; model: string; version: string }> {
    const { repository, traffic, metrics } = this.#options;
    const versions = repository.versions(name);
    if (versions.length === 0) throw new ModelNotFoundError(`unknown model ${quoted(name)}`);
    const feedback = parseFeedback(body);
    const writers = [...new Set(versions.flatMap((model) => this.#logOf(model)?.writer ?? []))];
    if (writers.length === 0) {
      throw new PredictionLogOffError(
        `model ${name} keeps no prediction log, so feedback has nothing to join: set prediction_log in its config or serve --prediction-log DIR`,
      );
    }
    const prediction = this.#indexOf(name).get(feedback.id) ?? (await this.#findOnDisk(name, writers, feedback.id));
    if (prediction === undefined) {
      throw new FeedbackUnknownIdError(
        `model ${name} has no logged prediction with id "${feedback.id}" (not answered, sampled out, dropped, or rotated away)`,
      );
    }
    const record: FeedbackRecord = {
      type: 'feedback',
      time: new Date().toISOString(),
      id: feedback.id,
      model: name,
      version: prediction.version,
      ...(feedback.value !== undefined ? { value: feedback.value } : {}),
      ...(feedback.label !== undefined ? { label: feedback.label } : {}),
      ...(feedback.reward !== undefined ? { reward: feedback.reward } : {}),
    };
    prediction.writer.append(record);
    metrics.feedbackJoined(name, prediction.version);
    const answered = repository.peek(name, prediction.version);
    if (answered !== undefined) traffic.feedbackReceived(answered, qualityOf(feedback, prediction));
    return { id: feedback.id, model: name, version: prediction.version };
  }

  /** Writes everything queued and closes the files: on drain and close. */
  async close(): Promise<void> {
    await Promise.all([...this.#writers.values()].map((writer) => writer.close()));
  }

  async #findOnDisk(
    name: string,
    writers: readonly PredictionLogWriter[],
    id: string,
  ): Promise<(PredictionRef & { writer: PredictionLogWriter }) | undefined> {
    for (const writer of writers) {
      // What is still queued is in the index already; the files hold what it forgot.
      const found = await findLoggedPrediction(writer.folder, name, id).catch(() => undefined);
      if (found) return { ...found, writer };
    }
    return undefined;
  }

  #indexOf(name: string): PredictionIndex<PredictionRef & { writer: PredictionLogWriter }> {
    let index = this.#indexes.get(name);
    if (index === undefined) {
      index = new PredictionIndex();
      this.#indexes.set(name, index);
    }
    return index;
  }

  /** The version's log settings and writer, worked out once per loaded version. */
  #logOf(model: LoadedModel): { config: PredictionLogConfig; writer: PredictionLogWriter } | undefined {
    let log = this.#settings.get(model);
    if (log === undefined) {
      log = this.#open(model);
      this.#settings.set(model, log);
    }
    return log ?? undefined;
  }

  #open(model: LoadedModel): { config: PredictionLogConfig; writer: PredictionLogWriter } | null {
    const own = model.config.prediction_log;
    const { serverFolder } = this.#options;
    if (own === undefined && serverFolder === undefined) return null;
    const config = own ?? defaultLogConfig();
    const folder = resolve(config.path ?? resolve(serverFolder ?? 'prediction-logs', model.name));
    let writer = this.#writers.get(folder);
    if (writer === undefined) {
      writer = new PredictionLogWriter({
        folder,
        maxFileSize: config.max_file_size,
        maxFiles: config.max_files,
        dropped: (records, reason) => this.#options.metrics.predictionLogDropped(model.name, reason, records),
        failed: (error) => this.#writeFailed(folder, error),
      });
      this.#writers.set(folder, writer);
    }
    return { config, writer };
  }

  #writeFailed(folder: string, error: Error): void {
    const now = Date.now();
    if (now - this.#lastErrorLogged < ERROR_LOG_INTERVAL_MS) return;
    this.#lastErrorLogged = now;
    this.#options.logger.error(
      { folder, err: error.message },
      'prediction log write failed; its records are dropped (batchserve_prediction_log_dropped_total) and serving goes on',
    );
  }
}

let defaults: PredictionLogConfig | undefined;

function defaultLogConfig(): PredictionLogConfig {
  defaults ??= validateField(modelConfigSchema.fields.prediction_log, {}, 'prediction_log', []) as PredictionLogConfig;
  return defaults;
}

interface Feedback {
  readonly id: string;
  readonly value?: number;
  readonly label?: string;
  readonly reward?: number;
}

const FEEDBACK_KEYS = ['id', 'value', 'label', 'reward'];

function parseFeedback(body: unknown): Feedback {
  const shape = 'expected {"id": "<request id>", "value": <number> | "label": "<label>" | "reward": <number>}';
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new FeedbackInvalidError(`feedback must be a JSON object: ${shape}`);
  }
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).filter((key) => !FEEDBACK_KEYS.includes(key));
  if (unknown.length > 0) throw new FeedbackInvalidError(`feedback has unknown key(s) ${unknown.join(', ')}: ${shape}`);
  const { id, value, label, reward } = fields;
  if (typeof id !== 'string' || id === '')
    throw new FeedbackInvalidError(`feedback needs "id", a non-empty string: ${shape}`);
  for (const [key, number] of [
    ['value', value],
    ['reward', reward],
  ] as const) {
    if (number !== undefined && !(typeof number === 'number' && Number.isFinite(number))) {
      throw new FeedbackInvalidError(`feedback "${key}" must be a finite number, got ${JSON.stringify(number)}`);
    }
  }
  if (label !== undefined && typeof label !== 'string') {
    throw new FeedbackInvalidError(`feedback "label" must be a string, got ${JSON.stringify(label)}`);
  }
  if (value === undefined && label === undefined && reward === undefined) {
    throw new FeedbackInvalidError(`feedback needs one of "value", "label" or "reward": ${shape}`);
  }
  return fields as unknown as Feedback;
}

/** What the canary guardrails judge: a label against a one-row prediction, or a number. */
function qualityOf(feedback: Feedback, prediction: PredictionRef): FeedbackQuality {
  const reward = feedback.reward ?? feedback.value;
  const correct =
    feedback.label !== undefined && typeof prediction.prediction === 'string'
      ? feedback.label === prediction.prediction
      : undefined;
  return { ...(correct !== undefined ? { correct } : {}), ...(reward !== undefined ? { reward } : {}) };
}

type Answer = Pick<PredictionRecord, 'prediction' | 'top_k' | 'outputs'>;

/**
 * The answer as the log keeps it. A classifier's (a model with labels whose first output holds
 * one score per label, or a handler's `[{label, score}]`) as its top labels per row; other
 * tensors as `{datatype, shape, data}`; any other answer as it is.
 */
function describeAnswer(response: unknown, model: LoadedModel, topK: number): Answer {
  if (isTensors(response)) {
    const scores = classifierScores(response, model);
    if (scores !== undefined) {
      const labels = model.labels as readonly string[];
      const top: RankedLabel[][] = topClassesPerRow(scores, topK).map((row) =>
        row.map(({ index, score }) => ({ label: labels[index] ?? String(index), score })),
      );
      return withPrediction(top);
    }
    return {
      outputs: Object.fromEntries(Object.entries(response).map(([name, tensor]) => [name, tensorEntry(tensor, true)])),
    };
  }
  if (isRankedList(response)) return withPrediction([response.slice(0, topK)]);
  if (Buffer.isBuffer(response)) return { outputs: { bytes: response.length, sha256: sha256(response) } };
  return { outputs: response ?? null };
}

function withPrediction(top: RankedLabel[][]): Answer {
  const firsts = top.map((row) => row[0]?.label ?? '');
  return { prediction: firsts.length === 1 ? firsts[0] : firsts, top_k: top };
}

function classifierScores(tensors: Tensors, model: LoadedModel): Tensor | undefined {
  const labels = model.labels;
  const first = model.config.outputs[0]?.name;
  const scores = first === undefined ? undefined : tensors[first];
  if (labels === undefined || scores === undefined) return undefined;
  const numeric = scores.datatype === 'FP32' || scores.datatype === 'FP16' || scores.datatype === 'FP64';
  return numeric && scores.dims.at(-1) === labels.length ? scores : undefined;
}

function isRankedList(value: unknown): value is RankedLabel[] {
  const isRanked = (item: unknown): boolean =>
    typeof item === 'object' &&
    item !== null &&
    typeof (item as RankedLabel).label === 'string' &&
    typeof (item as RankedLabel).score === 'number';
  return Array.isArray(value) && value.length > 0 && value.every(isRanked);
}

function tensorEntry(tensor: Tensor, capped: boolean): unknown {
  const { datatype } = tensor;
  const shape = [...tensor.dims];
  if (capped && tensor.data.length > MAX_LOGGED_ELEMENTS) {
    const data = tensor.data;
    const bytes = Array.isArray(data)
      ? Buffer.from(JSON.stringify(data))
      : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    return { datatype, shape, sha256: sha256(bytes) };
  }
  return { datatype, shape, data: plainValues(tensor) };
}

function describeInputs(request: LoggedRequest, mode: 'hash' | 'full'): unknown {
  const body = request.body ?? Buffer.alloc(0);
  if (mode === 'hash') return { sha256: sha256(body) };
  const inputs = request.tensors;
  if (inputs !== undefined) {
    return Object.fromEntries(Object.entries(inputs).map(([name, tensor]) => [name, tensorEntry(tensor, false)]));
  }
  return { content_type: request.contentType ?? null, base64: body.toString('base64') };
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}
