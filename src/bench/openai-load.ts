import { Agent, request, type Dispatcher } from 'undici';
import type { ClientTls } from '../core/client-tls.js';
import { mulberry32 } from '../core/random.js';

export type OpenAiApi = 'completions' | 'chat' | 'embeddings';

export interface OpenAiLoadOptions {
  /** The server's base URL (its /v1 routes are under it). */
  readonly url: string;
  readonly model: string;
  readonly api: OpenAiApi;
  readonly concurrency: readonly number[];
  /** Each request's max_tokens, drawn from this range (inclusive)… */
  readonly maxTokens: readonly [number, number];
  /** …uniformly, or log-uniformly (most answers short, a few long, as real ones are). */
  readonly distribution?: 'uniform' | 'log-uniform';
  readonly prompt: string;
  /**
   * A prefix every request shares (chat: a system message), the prompt then being each
   * request's own turn (numbered, so no two are alike): what prefix caching saves.
   */
  readonly systemPrompt?: string;
  /** OpenAI's response_format, sent with every request: what constrained decoding costs. */
  readonly responseFormat?: Readonly<Record<string, unknown>>;
  readonly warmupMs: number;
  readonly durationMs: number;
  readonly seed: number;
  /** What an https:// URL's connections trust and present. */
  readonly tls?: ClientTls;
  readonly onProgress?: (text: string) => void;
}

export interface Percentiles {
  readonly p50: number;
  readonly p99: number;
}

/** One concurrency level, measured over its window (ms figures). */
export interface OpenAiPoint {
  readonly concurrency: number;
  readonly requests: number;
  readonly errors: Readonly<Record<string, number>>;
  readonly requestsPerSecond: number;
  /** Generated tokens a second (embeddings: the inputs' tokens a second), by the answers' usage. */
  readonly tokensPerSecond: number;
  readonly latencyMs: Percentiles;
  /** Streamed APIs: time to the first chunk of text. */
  readonly timeToFirstTokenMs?: Percentiles;
  /** Streamed APIs, as GenAI-Perf counts it: (last chunk − first chunk) ÷ (tokens − 1), per request. */
  readonly interTokenMs?: Percentiles;
}

interface Finished {
  readonly endedAt: number;
  readonly latencyMs: number;
  readonly tokens: number;
  readonly firstMs?: number;
  readonly interMs?: number;
}

function percentiles(values: number[]): Percentiles {
  if (values.length === 0) return { p50: 0, p99: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] as number;
  return { p50: at(0.5), p99: at(0.99) };
}

/**
 * A closed loop of K clients on one of the OpenAI routes, level after level, the way
 * GenAI-Perf reports generation: tokens a second, time to first token and inter-token latency.
 * Completions and chat are streamed (with the usage chunk, so tokens are the server's count).
 */
export async function runOpenAiLoad(options: OpenAiLoadOptions): Promise<OpenAiPoint[]> {
  const dispatcher = new Agent({
    connections: Math.max(...options.concurrency),
    pipelining: 1,
    ...(options.tls ? { connect: options.tls } : {}),
  });
  try {
    const points: OpenAiPoint[] = [];
    for (const concurrency of options.concurrency) {
      options.onProgress?.(`openai ${options.api}: ${concurrency} in flight`);
      points.push(await runLevel(options, concurrency, dispatcher));
    }
    return points;
  } finally {
    await dispatcher.close();
  }
}

async function runLevel(options: OpenAiLoadOptions, concurrency: number, dispatcher: Agent): Promise<OpenAiPoint> {
  const started = performance.now();
  const measuredFrom = started + options.warmupMs;
  const until = measuredFrom + options.durationMs;
  const finished: Finished[] = [];
  const errors: Record<string, number> = {};
  let sent = 0;
  const client = async (index: number): Promise<void> => {
    const random = mulberry32(options.seed + index);
    const [low, high] = options.maxTokens;
    while (performance.now() < until) {
      const draw = random();
      const maxTokens =
        options.distribution === 'log-uniform'
          ? Math.min(high, Math.floor(low * (high / low + 1 / low) ** draw))
          : low + Math.floor(draw * (high - low + 1));
      try {
        const done = await oneRequest(options, maxTokens, dispatcher, sent++);
        if (done.endedAt >= measuredFrom && done.endedAt <= until) finished.push(done);
      } catch (error) {
        const kind = error instanceof Error ? error.message : String(error);
        errors[kind] = (errors[kind] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, index) => client(index)));
  const seconds = options.durationMs / 1000;
  const streamed = options.api !== 'embeddings';
  return {
    concurrency,
    requests: finished.length,
    errors,
    requestsPerSecond: finished.length / seconds,
    tokensPerSecond: finished.reduce((sum, done) => sum + done.tokens, 0) / seconds,
    latencyMs: percentiles(finished.map((done) => done.latencyMs)),
    ...(streamed
      ? {
          timeToFirstTokenMs: percentiles(
            finished.flatMap((done) => (done.firstMs === undefined ? [] : [done.firstMs])),
          ),
          interTokenMs: percentiles(finished.flatMap((done) => (done.interMs === undefined ? [] : [done.interMs]))),
        }
      : {}),
  };
}

function requestBody(options: OpenAiLoadOptions, maxTokens: number, index: number): Record<string, unknown> {
  const { systemPrompt } = options;
  const turn = systemPrompt === undefined ? options.prompt : `${options.prompt} (${index})`;
  if (options.api === 'embeddings') return { model: options.model, input: options.prompt };
  const common = {
    model: options.model,
    max_tokens: maxTokens,
    stream: true,
    stream_options: { include_usage: true },
    ...(options.responseFormat ? { response_format: options.responseFormat } : {}),
  };
  if (options.api === 'completions') {
    return { ...common, prompt: systemPrompt === undefined ? turn : `${systemPrompt}\n${turn}` };
  }
  const system = systemPrompt === undefined ? [] : [{ role: 'system', content: systemPrompt }];
  return { ...common, messages: [...system, { role: 'user', content: turn }] };
}

/** One request, its stream read as it arrives: when text first came, when it last did, the usage. */
async function oneRequest(
  options: OpenAiLoadOptions,
  maxTokens: number,
  dispatcher: Agent,
  index: number,
): Promise<Finished> {
  const sentAt = performance.now();
  const path = options.api === 'chat' ? 'chat/completions' : options.api;
  const response = await request(`${options.url.replace(/\/$/, '')}/v1/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(requestBody(options, maxTokens, index)),
    dispatcher,
  });
  if (response.statusCode !== 200) {
    throw new Error(`HTTP ${response.statusCode}: ${await refusalMessage(response.body)}`);
  }
  if (options.api === 'embeddings') {
    const answer = (await response.body.json()) as { usage?: { prompt_tokens?: number } };
    const endedAt = performance.now();
    return { endedAt, latencyMs: endedAt - sentAt, tokens: answer.usage?.prompt_tokens ?? 0 };
  }
  let firstAt: number | undefined;
  let lastAt = sentAt;
  let tokens = 0;
  let pending = '';
  for await (const chunk of response.body) {
    pending += (chunk as Buffer).toString('utf8');
    let end: number;
    while ((end = pending.indexOf('\n\n')) >= 0) {
      const event = pending.slice(0, end);
      pending = pending.slice(end + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const data = JSON.parse(event.slice(6)) as {
        error?: { message?: string };
        usage?: { completion_tokens?: number };
        choices?: { text?: string; delta?: { content?: string } }[];
      };
      if (data.error) throw new Error(`stream error: ${data.error.message ?? 'unknown'}`);
      if (data.usage) tokens = data.usage.completion_tokens ?? 0;
      const text = data.choices?.[0]?.text ?? data.choices?.[0]?.delta?.content;
      if (text) {
        const now = performance.now();
        firstAt ??= now;
        lastAt = now;
      }
    }
  }
  const endedAt = performance.now();
  return {
    endedAt,
    latencyMs: endedAt - sentAt,
    tokens,
    ...(firstAt !== undefined ? { firstMs: firstAt - sentAt } : {}),
    ...(firstAt !== undefined && tokens > 1 ? { interMs: (lastAt - firstAt) / (tokens - 1) } : {}),
  };
}

/** Why a request was refused: OpenAI's `{"error": {"message"}}`, else the start of the body. */
async function refusalMessage(body: Dispatcher.ResponseData['body']): Promise<string> {
  const text = await body.text();
  try {
    const message = (JSON.parse(text) as { error?: { message?: unknown } } | null)?.error?.message;
    if (typeof message === 'string') return message;
  } catch {
    // Not JSON: the text itself says it.
  }
  return text.trim().slice(0, 200) || 'no message';
}
