import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { InferenceInputError } from '../core/errors.js';
import { shownError } from '../core/quote.js';
import type { ChatMessage } from '../handlers/chat-template.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { Generator, GenerationRequest, GenerationResult } from '../runtime/generator.js';
import type { Codec, GenerationWork } from './inference-call.js';

/** OpenAI's own limit on stop strings. */
const MAX_STOPS = 4;

/** A completion or chat request, checked once: what the generator needs, and how to answer. */
export interface GenerationCall {
  readonly model: string;
  readonly kind: 'completion' | 'chat';
  /** A completion's prompt (a chat's is rendered by the model's template when it runs). */
  readonly prompt: string;
  /** A chat's messages. */
  readonly messages: readonly ChatMessage[];
  readonly maxTokens: number | undefined;
  readonly temperature: number;
  readonly topP: number;
  readonly stop: readonly string[];
  readonly seed: number | undefined;
  readonly stream: boolean;
  readonly includeUsage: boolean;
}

type Fields = Record<string, unknown>;

/** A JSON object body, or a 400 saying what it is instead. */
export function objectBody(body: Buffer): Fields {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new InferenceInputError(`the body is not JSON: ${shownError(error)}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new InferenceInputError('the body must be a JSON object');
  }
  return parsed as Fields;
}

function numberField(fields: Fields, name: string, fallback: number, min: number, max: number): number {
  const value = fields[name] ?? fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
    throw new InferenceInputError(`"${name}" must be a number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** The fields both routes share; those this server does not do are refused, not ignored. */
function commonFields(
  fields: Fields,
  kind: GenerationCall['kind'],
  prompt: string,
  messages: readonly ChatMessage[] = [],
): GenerationCall {
  const { model, stop = [], seed, stream = false, n = 1 } = fields;
  if (typeof model !== 'string' || model === '') throw new InferenceInputError('"model" must name a served model');
  if (n !== 1) throw new InferenceInputError('"n" must be 1: one choice a request');
  for (const name of ['logprobs', 'top_logprobs', 'echo', 'best_of', 'suffix', 'tools', 'response_format']) {
    const value = fields[name];
    if (value !== undefined && value !== null && value !== false && !(name === 'best_of' && value === 1)) {
      throw new InferenceInputError(`"${name}" is not served`);
    }
  }
  const stops: unknown = stop === null ? [] : typeof stop === 'string' ? [stop] : stop;
  if (
    !Array.isArray(stops) ||
    stops.length > MAX_STOPS ||
    !stops.every((item) => typeof item === 'string' && item !== '')
  ) {
    throw new InferenceInputError(`"stop" must be a string or up to ${MAX_STOPS} non-empty strings`);
  }
  if (seed !== undefined && seed !== null && !Number.isSafeInteger(seed)) {
    throw new InferenceInputError(`"seed" must be an integer, got ${JSON.stringify(seed)}`);
  }
  if (typeof stream !== 'boolean') throw new InferenceInputError('"stream" must be true or false');
  const maxTokens = fields.max_completion_tokens ?? fields.max_tokens;
  if (
    maxTokens !== undefined &&
    maxTokens !== null &&
    (!Number.isSafeInteger(maxTokens) || (maxTokens as number) < 1)
  ) {
    throw new InferenceInputError(`"max_tokens" must be a positive integer, got ${JSON.stringify(maxTokens)}`);
  }
  const options = fields.stream_options as { include_usage?: unknown } | null | undefined;
  return {
    model,
    kind,
    prompt,
    messages,
    maxTokens: (maxTokens ?? undefined) as number | undefined,
    temperature: numberField(fields, 'temperature', 1, 0, 2),
    topP: numberField(fields, 'top_p', 1, Number.MIN_VALUE, 1),
    stop: stops as string[],
    seed: (seed ?? undefined) as number | undefined,
    stream,
    includeUsage: options?.include_usage === true,
  };
}

export function completionCall(body: Buffer): GenerationCall {
  const fields = objectBody(body);
  const { prompt } = fields;
  const text: unknown = Array.isArray(prompt) && prompt.length === 1 ? (prompt as unknown[])[0] : prompt;
  if (typeof text !== 'string') {
    throw new InferenceInputError('"prompt" must be a string (one prompt a request; token ids are not served)');
  }
  return commonFields(fields, 'completion', text);
}

/** A chat's messages, checked: text content only (a string, or text parts joined). */
export function chatCall(body: Buffer): GenerationCall {
  const fields = objectBody(body);
  const { messages } = fields;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new InferenceInputError('"messages" must be a non-empty array of {role, content}');
  }
  const checked = messages.map((message: unknown, index): ChatMessage => {
    const { role, content } = (message ?? {}) as { role?: unknown; content?: unknown };
    if (typeof role !== 'string' || !['system', 'developer', 'user', 'assistant'].includes(role)) {
      throw new InferenceInputError(`messages[${index}].role must be system, developer, user or assistant`);
    }
    const text = Array.isArray(content)
      ? content.map((part: unknown) => {
          const { type, text: partText } = (part ?? {}) as { type?: unknown; text?: unknown };
          if (type !== 'text' || typeof partText !== 'string') {
            throw new InferenceInputError(`messages[${index}].content: only text parts are served`);
          }
          return partText;
        })
      : [content];
    if (!text.every((item) => typeof item === 'string')) {
      throw new InferenceInputError(`messages[${index}].content must be a string or text parts`);
    }
    return { role, content: text.join('') };
  });
  return commonFields(fields, 'chat', '', checked);
}

function generatorOf(model: LoadedModel): Generator {
  const { generator } = model;
  if (generator) return generator;
  throw new InferenceInputError(
    `model ${model.name} does not generate: its handler is ${model.manifest.model.handler}; pack a decoder with --handler text-generation`,
  );
}

/** The answer's envelope, the same in every chunk of a stream. */
function envelope(call: GenerationCall, model: LoadedModel, id: string, created: number): Fields {
  return {
    id,
    object: call.kind === 'chat' ? (call.stream ? 'chat.completion.chunk' : 'chat.completion') : 'text_completion',
    created,
    model: model.name,
  };
}

function usageOf(result: GenerationResult): Fields {
  return {
    prompt_tokens: result.promptTokens,
    completion_tokens: result.completionTokens,
    total_tokens: result.promptTokens + result.completionTokens,
  };
}

/** The prompt as `model` tokenizes it, and the tokens it may answer with, checked against its limits. */
function generationRequest(model: LoadedModel, call: GenerationCall): Omit<GenerationRequest, 'signal' | 'onText'> {
  const generator = generatorOf(model);
  const { options, chat } = generator;
  if (call.maxTokens !== undefined && call.maxTokens > options.max_new_tokens) {
    throw new InferenceInputError(
      `"max_tokens" ${call.maxTokens} is over this model's max_new_tokens of ${options.max_new_tokens}`,
    );
  }
  const promptIds =
    call.kind === 'chat'
      ? generator.tokenizer.encode(chat.render(call.messages), { add_special_tokens: chat.addSpecialTokens }).ids
      : generator.tokenizer.encode(call.prompt).ids;
  // Unasked, an answer may take what the context leaves (OpenAI's default for chat; 16 for completions).
  const room = Math.max(options.max_context - promptIds.length, 1);
  const maxTokens =
    call.maxTokens ?? Math.min(call.kind === 'completion' ? 16 : options.max_new_tokens, options.max_new_tokens, room);
  return { promptIds, maxTokens, temperature: call.temperature, topP: call.topP, stop: call.stop, seed: call.seed };
}

/**
 * The completions codec: the prompt tokenized by the version that answers; the answer sent
 * whole, or as server-sent events (`data: {…}` chunks of new text as the generator hands them
 * over, then the finish reason, the usage when asked, and `data: [DONE]`).
 */
export function generationCodec(
  res: ServerResponse,
  callOf: () => GenerationCall,
): Omit<Codec<GenerationWork>, 'read'> {
  let head: Fields = {};
  const send = (fields: Fields): void => {
    res.write(`data: ${JSON.stringify(fields)}\n\n`);
  };
  const choice = (call: GenerationCall, text: string, finish: string | null): Fields =>
    call.kind === 'chat'
      ? { index: 0, delta: text === '' ? {} : { content: text }, finish_reason: finish, logprobs: null }
      : { index: 0, text, finish_reason: finish, logprobs: null };
  return {
    generates: true,
    decode(model) {
      const call = callOf();
      const request = generationRequest(model, call);
      const id = `${call.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID()}`;
      head = envelope(call, model, id, Math.floor(Date.now() / 1000));
      const onText = (text: string): void => {
        if (!res.headersSent) startStream(res, call, head, send);
        send({ ...head, choices: [choice(call, text, null)] });
      };
      return {
        kind: 'generation',
        id: undefined,
        request: call.stream ? { ...request, onText } : request,
        forShadow: (shadow) => generationRequest(shadow, call),
      };
    },
    answer(_model, _work, [answered]) {
      const call = callOf();
      const result = answered?.response as GenerationResult;
      if (call.stream) {
        if (!res.headersSent) startStream(res, call, head, send);
        send({ ...head, choices: [choice(call, '', result.finishReason)] });
        if (call.includeUsage) send({ ...head, choices: [], usage: usageOf(result) });
        res.end('data: [DONE]\n\n');
        return;
      }
      const answer =
        call.kind === 'chat'
          ? {
              index: 0,
              message: { role: 'assistant', content: result.text },
              finish_reason: result.finishReason,
              logprobs: null,
            }
          : { index: 0, text: result.text, finish_reason: result.finishReason, logprobs: null };
      const text = JSON.stringify({ ...head, choices: [answer], usage: usageOf(result) });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
  };
}

/** The stream's headers, and for a chat the first chunk that names the role. */
function startStream(res: ServerResponse, call: GenerationCall, head: Fields, send: (fields: Fields) => void): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  if (call.kind === 'chat') {
    send({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  }
}
