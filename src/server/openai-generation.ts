import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { InferenceInputError } from '../core/errors.js';
import { shownError } from '../core/quote.js';
import type { ChatMessage } from '../handlers/chat-template.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type {
  ChoiceResult,
  Generator,
  GenerationRequest,
  GenerationResult,
  TokenLogprobs,
} from '../runtime/generator.js';
import { unservedKeyword, type ResponseFormat } from '../runtime/grammar.js';
import type { TextTokenizer } from '../handlers/text-tokens.js';
import type { Codec, GenerationWork } from './inference-call.js';

/** OpenAI's own limits: stop strings, answers a request, alternatives a token (completions, chat). */
const MAX_STOPS = 4;
const MAX_CHOICES = 128;
const MAX_LOGPROBS = 5;
const MAX_TOP_LOGPROBS = 20;
/** Biased tokens a request may name: each is added to every step's logits. */
const MAX_BIASED = 300;

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
  /** Answers to the prompt (n). */
  readonly choices: number;
  /** Alternatives reported beside each token (completions' logprobs, chat's top_logprobs); undefined: no logprobs. */
  readonly logprobs: number | undefined;
  /** A completion's prompt goes before its answer. */
  readonly echo: boolean;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  readonly logitBias: readonly (readonly [number, number])[];
  readonly responseFormat: ResponseFormat | undefined;
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

function integerField(fields: Fields, name: string, fallback: number, min: number, max: number): number {
  const value = fields[name] ?? fallback;
  if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) {
    throw new InferenceInputError(`"${name}" must be an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
  }
  return value as number;
}

/** logit_bias: {"token id": bias}, each bias from −100 to 100. */
function logitBiasOf(value: unknown): [number, number][] {
  if (value === undefined || value === null) return [];
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new InferenceInputError('"logit_bias" must be an object of token ids to biases from -100 to 100');
  }
  const entries = Object.entries(value as Fields);
  if (entries.length > MAX_BIASED) {
    throw new InferenceInputError(`"logit_bias" names ${entries.length} tokens, over the ${MAX_BIASED} a request may`);
  }
  return entries.map(([key, bias]) => {
    const id = Number(key);
    if (!/^\d+$/.test(key) || !Number.isSafeInteger(id)) {
      throw new InferenceInputError(`"logit_bias": ${JSON.stringify(key)} is not a token id`);
    }
    if (typeof bias !== 'number' || !Number.isFinite(bias) || bias < -100 || bias > 100) {
      throw new InferenceInputError(
        `"logit_bias"[${key}] must be a number from -100 to 100, got ${JSON.stringify(bias)}`,
      );
    }
    return [id, bias];
  });
}

/** response_format: text (free), json_object, or json_schema with its schema checked against what a grammar can say. */
function responseFormatOf(value: unknown): ResponseFormat | undefined {
  if (value === undefined || value === null) return undefined;
  const { type, json_schema: named } = (typeof value === 'object' ? value : {}) as Fields;
  if (type === 'text') return undefined;
  if (type === 'json_object') return { type: 'json_object' };
  if (type !== 'json_schema') {
    throw new InferenceInputError(
      `"response_format.type" must be text, json_object or json_schema, got ${JSON.stringify(type)}`,
    );
  }
  const { name, schema } = (typeof named === 'object' && named !== null ? named : {}) as Fields;
  if (typeof name !== 'string' || name === '') {
    throw new InferenceInputError('"response_format.json_schema.name" must name the schema');
  }
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    throw new InferenceInputError('"response_format.json_schema.schema" must be a JSON schema object');
  }
  const refused = unservedKeyword(schema as Fields);
  if (refused) {
    throw new InferenceInputError(
      `"response_format": the schema keyword ${JSON.stringify(refused.keyword)} at ${refused.path} cannot be made a grammar`,
    );
  }
  return { type: 'json_schema', schema: schema as Fields };
}

/** The fields both routes (and Triton's generate) share; those this server does not do are refused, not ignored. */
export function commonFields(
  fields: Fields,
  kind: GenerationCall['kind'],
  prompt: string,
  messages: readonly ChatMessage[] = [],
): GenerationCall {
  const { model, stop = [], seed, stream = false } = fields;
  if (typeof model !== 'string' || model === '') throw new InferenceInputError('"model" must name a served model');
  const refused = kind === 'chat' ? ['tools', 'functions', 'echo', 'suffix'] : ['tools', 'suffix'];
  for (const name of refused) {
    const value = fields[name];
    if (value !== undefined && value !== null && value !== false) {
      throw new InferenceInputError(`"${name}" is not served`);
    }
  }
  const choices = integerField(fields, 'n', 1, 1, MAX_CHOICES);
  if (fields.best_of !== undefined && fields.best_of !== null && fields.best_of !== choices) {
    throw new InferenceInputError('"best_of" is not served: each answer drawn is sent (best_of must equal n)');
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
  const echo = kind === 'completion' && fields.echo === true;
  if (kind === 'completion' && fields.echo !== undefined && fields.echo !== null && typeof fields.echo !== 'boolean') {
    throw new InferenceInputError('"echo" must be true or false');
  }
  const logprobs = kind === 'chat' ? chatLogprobs(fields) : completionLogprobs(fields);
  if (echo && logprobs !== undefined) {
    // The engine keeps the logits of the prompt's last token only: its other tokens' are not at hand.
    throw new InferenceInputError('"echo" with "logprobs" is not served: the prompt\'s log probabilities are not kept');
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
    choices,
    logprobs,
    echo,
    presencePenalty: numberField(fields, 'presence_penalty', 0, -2, 2),
    frequencyPenalty: numberField(fields, 'frequency_penalty', 0, -2, 2),
    logitBias: logitBiasOf(fields.logit_bias),
    responseFormat: responseFormatOf(fields.response_format),
  };
}

/** Completions: logprobs is the count of alternatives, 0 to 5. */
function completionLogprobs(fields: Fields): number | undefined {
  if (fields.logprobs === undefined || fields.logprobs === null) return undefined;
  return integerField(fields, 'logprobs', 0, 0, MAX_LOGPROBS);
}

/** Chat: logprobs is a switch, top_logprobs (0 to 20) the count of alternatives, which needs it. */
function chatLogprobs(fields: Fields): number | undefined {
  const { logprobs, top_logprobs: top } = fields;
  if (logprobs !== undefined && logprobs !== null && typeof logprobs !== 'boolean') {
    throw new InferenceInputError('"logprobs" must be true or false');
  }
  if (top !== undefined && top !== null && logprobs !== true) {
    throw new InferenceInputError('"top_logprobs" needs "logprobs": true');
  }
  return logprobs === true ? integerField(fields, 'top_logprobs', 0, 0, MAX_TOP_LOGPROBS) : undefined;
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
export function generationRequest(
  model: LoadedModel,
  call: GenerationCall,
): Omit<GenerationRequest, 'signal' | 'onText'> {
  const generator = generatorOf(model);
  const { options, chat } = generator;
  if (call.maxTokens !== undefined && call.maxTokens > options.max_new_tokens) {
    throw new InferenceInputError(
      `"max_tokens" ${call.maxTokens} is over this model's max_new_tokens of ${options.max_new_tokens}`,
    );
  }
  const vocab = model.config.outputs.find((output) => output.name === generator.layout.logits)?.shape[2] ?? -1;
  const outside = vocab > 0 ? call.logitBias.find(([id]) => id >= vocab) : undefined;
  if (outside) {
    throw new InferenceInputError(`"logit_bias" names token ${outside[0]}; this model's ids run to ${vocab - 1}`);
  }
  const promptIds =
    call.kind === 'chat'
      ? generator.tokenizer.encode(chat.render(call.messages), { add_special_tokens: chat.addSpecialTokens }).ids
      : generator.tokenizer.encode(call.prompt).ids;
  // Unasked, an answer may take what the context leaves (OpenAI's default for chat; 16 for completions).
  const room = Math.max(options.max_context - promptIds.length, 1);
  const maxTokens =
    call.maxTokens ?? Math.min(call.kind === 'completion' ? 16 : options.max_new_tokens, options.max_new_tokens, room);
  return {
    promptIds,
    maxTokens,
    temperature: call.temperature,
    topP: call.topP,
    stop: call.stop,
    seed: call.seed,
    presencePenalty: call.presencePenalty,
    frequencyPenalty: call.frequencyPenalty,
    logitBias: call.logitBias,
    ...(call.logprobs !== undefined ? { logprobs: call.logprobs } : {}),
    ...(call.responseFormat ? { responseFormat: call.responseFormat } : {}),
    choices: call.choices,
  };
}

/**
 * Tokens' log probabilities as OpenAI reports them: a completion's as parallel lists (tokens,
 * token_logprobs, top_logprobs, text_offset into the answer, the echoed prompt included), a
 * chat's as content entries with each token's UTF-8 bytes. A token is shown as the tokenizer
 * decodes it alone.
 */
class LogprobFormat {
  /** Each answer's text so far, in UTF-16 units: where its next token's text_offset starts. */
  readonly #offsets: number[];

  constructor(
    private readonly call: GenerationCall,
    private readonly tokenizer: TextTokenizer,
  ) {
    this.#offsets = new Array<number>(call.choices).fill(call.echo ? call.prompt.length : 0);
  }

  of(choice: number, tokens: readonly TokenLogprobs[]): Fields | null {
    if (this.call.logprobs === undefined) return null;
    if (this.call.kind === 'chat') {
      const entry = (id: number, logprob: number): Fields => {
        const token = this.#show(id);
        return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
      };
      return {
        content: tokens.map(({ token, logprob, top }) => ({
          ...entry(token, logprob),
          top_logprobs: top.map(([id, value]) => entry(id, value)),
        })),
        refusal: null,
      };
    }
    const shown = tokens.map(({ token }) => this.#show(token));
    const offsets = shown.map((text) => {
      const at = this.#offsets[choice] as number;
      this.#offsets[choice] = at + text.length;
      return at;
    });
    return {
      tokens: shown,
      token_logprobs: tokens.map(({ logprob }) => logprob),
      top_logprobs: tokens.map(({ top }) => Object.fromEntries(top.map(([id, value]) => [this.#show(id), value]))),
      text_offset: offsets,
    };
  }

  #show(id: number): string {
    return this.tokenizer.decode([id], { skip_special_tokens: false });
  }
}

/**
 * The completions codec: the prompt tokenized by the version that answers; the answer sent
 * whole, or as server-sent events (`data: {…}` chunks of new text as the generator hands them
 * over, each choice's with its index, then each finish reason, the usage when asked, and
 * `data: [DONE]`).
 */
export function generationCodec(
  res: ServerResponse,
  callOf: () => GenerationCall,
): Omit<Codec<GenerationWork>, 'read'> {
  let head: Fields = {};
  let format: LogprobFormat | undefined;
  const send = (fields: Fields): void => {
    res.write(`data: ${JSON.stringify(fields)}\n\n`);
  };
  const chunk = (call: GenerationCall, index: number, text: string, logprobs: Fields | null, finish: string | null) =>
    call.kind === 'chat'
      ? { index, delta: text === '' ? {} : { content: text }, logprobs, finish_reason: finish }
      : { index, text, logprobs, finish_reason: finish };
  const start = (call: GenerationCall): void => {
    if (res.headersSent) return;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    for (let index = 0; index < call.choices; index++) {
      // A chat's first chunk names the role; an echoed prompt comes before the answer.
      if (call.kind === 'chat') {
        send({ ...head, choices: [{ index, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
      } else if (call.echo) {
        send({ ...head, choices: [chunk(call, index, call.prompt, null, null)] });
      }
    }
  };
  return {
    generates: true,
    decode(model) {
      const call = callOf();
      const request = generationRequest(model, call);
      const id = `${call.kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomUUID()}`;
      head = envelope(call, model, id, Math.floor(Date.now() / 1000));
      format = new LogprobFormat(call, generatorOf(model).tokenizer);
      const onText = (text: string, index: number, tokens: readonly TokenLogprobs[]): void => {
        start(call);
        send({ ...head, choices: [chunk(call, index, text, format?.of(index, tokens) ?? null, null)] });
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
        start(call);
        result.choices.forEach((each, index) => {
          send({ ...head, choices: [chunk(call, index, '', null, each.finishReason)] });
        });
        if (call.includeUsage) send({ ...head, choices: [], usage: usageOf(result) });
        res.end('data: [DONE]\n\n');
        return;
      }
      const choices = result.choices.map((each, index) => wholeChoice(call, format, each, index));
      const text = JSON.stringify({ ...head, choices, usage: usageOf(result) });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
      res.end(text);
    },
  };
}

function wholeChoice(
  call: GenerationCall,
  format: LogprobFormat | undefined,
  each: ChoiceResult,
  index: number,
): Fields {
  const logprobs = format?.of(index, each.tokens ?? []) ?? null;
  return call.kind === 'chat'
    ? { index, message: { role: 'assistant', content: each.text }, logprobs, finish_reason: each.finishReason }
    : {
        index,
        text: call.echo ? call.prompt + each.text : each.text,
        logprobs,
        finish_reason: each.finishReason,
      };
}
