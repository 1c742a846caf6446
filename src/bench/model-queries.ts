import { request, type Dispatcher } from 'undici';
import { UsageError } from '../core/errors.js';
import type { ModelStatsJson } from '../metrics/model-statistics.js';
import { fetchModelMetadata, type ModelMetadata } from './payload.js';
import type { ServerPoint } from './report-types.js';

/** What the bench asks a server about the model it drives, over REST or gRPC. */
export interface ModelQueries {
  /** Its inputs and outputs, for the payload. */
  metadata(): Promise<ModelMetadata>;
  /** The batching it runs with now. */
  config(): Promise<ServerPoint>;
  /**
   * Its KServe v2 statistics, one entry per loaded version: which one served a point is for
   * the answers to say (served-version.ts), not the order of the list.
   */
  stats(): Promise<readonly ModelStatsJson[]>;
  close(): void;
}

/**
 * A connection closed under the request as it went out: a kept-alive one the server timed out
 * as it was reused (a loaded client's idle timer runs late), or a reset. GET and PUT are
 * idempotent, so such a request is sent once more, on a new connection.
 */
const CLOSED_UNDER_REQUEST = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET']);

/** A JSON answer, or a UsageError that says what the server said. */
export async function getJson(
  url: string,
  init: { method?: 'GET' | 'PUT'; token?: string; dispatcher?: Dispatcher } = {},
): Promise<unknown> {
  const send = (): Promise<Dispatcher.ResponseData> =>
    request(url, {
      ...(init.dispatcher ? { dispatcher: init.dispatcher } : {}),
      method: init.method ?? 'GET',
      headers: init.token ? { authorization: `Bearer ${init.token}` } : {},
    });
  let response;
  try {
    response = await send().catch((error: NodeJS.ErrnoException) => {
      if (CLOSED_UNDER_REQUEST.has(error.code ?? '')) return send();
      throw error;
    });
  } catch (error) {
    throw new UsageError(`cannot reach ${url}: ${(error as Error).message}`);
  }
  const body = (await response.body.json().catch(() => ({}))) as { error?: string };
  if (response.statusCode >= 400) {
    throw new UsageError(
      `${init.method ?? 'GET'} ${url} answered ${response.statusCode}: ${body.error ?? 'no message'}`,
    );
  }
  return body;
}

/** The statistics entries of a model, or a UsageError when the server kept none. */
export function someStatistics(entries: ModelStatsJson[], model: string): readonly ModelStatsJson[] {
  if (entries.length === 0) throw new UsageError(`the server has no statistics for ${model}`);
  return entries;
}

/** Triton's model configuration, in the fields that describe batching. */
export interface TritonBatchingConfig {
  max_batch_size: number;
  dynamic_batching?: { max_queue_delay_microseconds?: number } | null;
  instance_group?: { count: number }[];
  /** batchserve's own config beside Triton's fields: where `auto` shows as itself. */
  batchserve?: { dynamic_batching?: { max_queue_delay?: number | 'auto' } } | null;
}

export function serverPointOf(config: TritonBatchingConfig): ServerPoint {
  return {
    maxBatchSize: config.max_batch_size,
    // Triton's field reads 0 for adaptive batching; a batchserve server says `auto` beside it.
    maxQueueDelayUs:
      config.batchserve?.dynamic_batching?.max_queue_delay === 'auto'
        ? 'auto'
        : (config.dynamic_batching?.max_queue_delay_microseconds ?? 0),
    instances: (config.instance_group ?? []).reduce((total, group) => total + group.count, 0) || 1,
  };
}

/** The REST inference API's model routes: /v2/models/{model}, …/config, …/stats. */
export class RestModelQueries implements ModelQueries {
  readonly #modelUrl: string;
  readonly #init: { dispatcher?: Dispatcher };

  /** `dispatcher`: the connections to use (an https:// server's with --tls-ca), else undici's global one. */
  constructor(
    readonly inferenceUrl: string,
    readonly model: string,
    dispatcher?: Dispatcher,
  ) {
    this.#modelUrl = `${inferenceUrl}/v2/models/${encodeURIComponent(model)}`;
    this.#init = dispatcher ? { dispatcher } : {};
  }

  metadata(): Promise<ModelMetadata> {
    return fetchModelMetadata(this.inferenceUrl, this.model, this.#init.dispatcher);
  }

  async config(): Promise<ServerPoint> {
    return serverPointOf((await getJson(`${this.#modelUrl}/config`, this.#init)) as TritonBatchingConfig);
  }

  async stats(): Promise<readonly ModelStatsJson[]> {
    const body = (await getJson(`${this.#modelUrl}/stats`, this.#init)) as { model_stats: ModelStatsJson[] };
    return someStatistics(body.model_stats, this.model);
  }

  close(): void {}
}
