import type { ServerResponse } from 'node:http';
import type { SubmitResult } from '../batching/batch-request.js';
import { InferenceFailedError, InferenceInputError } from '../core/errors.js';
import { isBuiltinHandler } from '../handlers/load.js';
import { isEmbeddingAnswer } from '../handlers/text-embedding-handler.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import { BatchserveError } from '../core/errors.js';
import {
  openAiError,
  publicMessage,
  readBody,
  requireMediaType,
  sendJson,
  statusOf,
  type Route,
  type RouteHandler,
} from './http.js';
import { restHead, type InferenceApiOptions } from './inference-api.js';
import {
  uncheckedWork,
  type BatchedWork,
  type Codec,
  type Received,
  type Submission,
  type Work,
} from './inference-call.js';
import { chatCall, completionCall, generationCodec, objectBody } from './openai-generation.js';

/** OpenAI's own limit on the inputs of one embeddings request. */
const MAX_EMBEDDING_INPUTS = 2048;

interface EmbeddingsRequest {
  readonly model: string;
  readonly input: readonly string[];
  readonly encodingFormat: 'float' | 'base64';
  readonly dimensions: number | undefined;
}

/**
 * The OpenAI-compatible routes on the inference port (what the `openai` clients call):
 * `POST /v1/embeddings` for text-embedding models, `POST /v1/completions` and
 * `/v1/chat/completions` for text-generation ones (streamed or whole), `GET /v1/models`. Errors
 * come in OpenAI's shape (see sendError). Each model route is a codec over the inference call:
 * OpenAI has no version field, so the call routes the model named in the body as a v2 request
 * without a version is routed (splits, canaries and stickiness apply, shadows are mirrored).
 */
export function openAiRoutes(options: InferenceApiOptions): Route[] {
  const { repository, infer, maxRequestSize } = options;
  const modelObject = (model: LoadedModel): Record<string, unknown> => ({
    id: model.name,
    object: 'model',
    created: Math.floor(model.loadedAt.getTime() / 1000),
    owned_by: 'batchserve',
  });
  /**
   * A route whose body names the model: the call reads the body first, parsed and checked once
   * here, and takes the model from it. An error once a stream has begun is sent as its last
   * event, `data: {"error": …}`, since the status is gone.
   */
  const modelInBody =
    <Call extends { readonly model: string }, W extends Work>(
      parse: (body: Buffer) => Call,
      codecOf: (res: ServerResponse, call: () => Call) => Omit<Codec<W>, 'read'>,
    ): RouteHandler =>
    async (req, res, _params, url) => {
      requireMediaType(req, ['application/json']);
      let call: Call | undefined;
      try {
        await infer(
          {
            ...restHead(req, res, '', undefined, url),
            model: (received: Received) => (call = parse(received.bytes)).model,
          },
          {
            ...codecOf(res, () => call as Call),
            read: async () => ({ bytes: await readBody(req, maxRequestSize), contentType: 'application/json' }),
          },
        );
      } catch (error) {
        // A client that went away has nothing left to read; one still there reads why the stream ends.
        if (res.headersSent && !res.writableEnded && !res.destroyed) {
          const code = error instanceof BatchserveError ? error.code : undefined;
          res.end(`data: ${JSON.stringify(openAiError(publicMessage(error), statusOf(error), code))}\n\n`);
        }
        throw error;
      }
    };
  return [
    {
      method: 'GET',
      path: /^\/v1\/models$/,
      handle: async (_req, res) => {
        const byName = new Map(repository.list().map((model) => [model.name, model]));
        sendJson(res, 200, { object: 'list', data: [...byName.values()].map(modelObject) });
      },
    },
    {
      method: 'GET',
      path: /^\/v1\/models\/([^/]+)$/,
      handle: async (_req, res, [name]) => sendJson(res, 200, modelObject(repository.get(name as string))),
    },
    { method: 'POST', path: /^\/v1\/embeddings$/, handle: modelInBody(embeddingsRequest, embeddingsCodec) },
    { method: 'POST', path: /^\/v1\/completions$/, handle: modelInBody(completionCall, generationCodec) },
    { method: 'POST', path: /^\/v1\/chat\/completions$/, handle: modelInBody(chatCall, generationCodec) },
  ];
}

/**
 * The embeddings codec: the texts in chunks of at most max_batch_size (each may share a batch),
 * handed to the handler as texts; the vectors answered in order, shortened to `dimensions`.
 */
function embeddingsCodec(res: ServerResponse, requestOf: () => EmbeddingsRequest): Omit<Codec<BatchedWork>, 'read'> {
  return {
    decode(model) {
      const handler = model.manifest.model.handler;
      if (isBuiltinHandler(handler) && handler !== 'text-embedding') {
        throw new InferenceInputError(
          `model ${model.name} does not answer embeddings: its handler is ${handler}; pack a text encoder with --handler text-embedding`,
        );
      }
      const { input } = requestOf();
      const chunk = Math.max(model.config.max_batch_size, 1);
      const submissions: Submission[] = [];
      for (let start = 0; start < input.length; start += chunk) {
        const texts = input.slice(start, start + chunk);
        submissions.push({ request: { kind: 'texts', texts }, rows: texts.length, shapeKey: 'text' });
      }
      return uncheckedWork(submissions, false);
    },
    answer(model, _work, results) {
      sendJson(res, 200, embeddingsAnswer(model, requestOf(), results));
    },
  };
}

/** OpenAI's embeddings list from the handler's answers, in order. */
function embeddingsAnswer(
  model: LoadedModel,
  request: EmbeddingsRequest,
  results: readonly SubmitResult[],
): Record<string, unknown> {
  const normalize = model.config.text?.normalize ?? true;
  let tokens = 0;
  const data: Record<string, unknown>[] = [];
  for (const result of results) {
    const answer = result.response;
    if (!isEmbeddingAnswer(answer)) {
      throw new InferenceFailedError(
        `the ${model.manifest.model.handler} handler of model ${model.name} answered no embeddings`,
      );
    }
    tokens += answer.tokens;
    for (const vector of answer.embeddings) {
      const shaped = shorten(vector, request.dimensions, normalize, model.name);
      data.push({
        object: 'embedding',
        index: data.length,
        embedding:
          request.encodingFormat === 'base64'
            ? Buffer.from(Float32Array.from(shaped).buffer).toString('base64')
            : shaped,
      });
    }
  }
  return { object: 'list', data, model: model.name, usage: { prompt_tokens: tokens, total_tokens: tokens } };
}

/** `dimensions`: the first n of each vector, scaled back to unit length when the model normalizes. */
function shorten(vector: number[], dimensions: number | undefined, normalize: boolean, name: string): number[] {
  if (dimensions === undefined || dimensions === vector.length) return vector;
  if (dimensions > vector.length) {
    throw new InferenceInputError(`dimensions ${dimensions} is more than model ${name}'s ${vector.length}`);
  }
  const kept = vector.slice(0, dimensions);
  if (!normalize) return kept;
  const norm = Math.sqrt(kept.reduce((sum, value) => sum + value * value, 0));
  return norm > 0 ? kept.map((value) => Math.fround(value / norm)) : kept;
}

/** Checks an embeddings body once: OpenAI's fields, each a 400 naming it when wrong. */
function embeddingsRequest(body: Buffer): EmbeddingsRequest {
  const fields = objectBody(body);
  const { model, input, encoding_format: format = 'float', dimensions } = fields;
  if (typeof model !== 'string' || model === '') throw new InferenceInputError('"model" must name a served model');
  const texts = typeof input === 'string' ? [input] : input;
  if (!Array.isArray(texts) || texts.length === 0) {
    throw new InferenceInputError('"input" must be a string or a non-empty array of strings');
  }
  if (texts.length > MAX_EMBEDDING_INPUTS) {
    throw new InferenceInputError(
      `"input" has ${texts.length} items, over the ${MAX_EMBEDDING_INPUTS} a request may carry`,
    );
  }
  if (!texts.every((item) => typeof item === 'string')) {
    throw new InferenceInputError(
      typeof texts[0] === 'number' || Array.isArray(texts[0])
        ? '"input" as token ids is not served: send the texts, the model tokenizes them'
        : '"input" must be a string or a non-empty array of strings',
    );
  }
  if (format !== 'float' && format !== 'base64') {
    throw new InferenceInputError(`"encoding_format" must be float or base64, got ${JSON.stringify(format)}`);
  }
  if (dimensions !== undefined && (!Number.isInteger(dimensions) || (dimensions as number) < 1)) {
    throw new InferenceInputError(`"dimensions" must be a positive integer, got ${JSON.stringify(dimensions)}`);
  }
  return { model, input: texts, encodingFormat: format, dimensions: dimensions as number | undefined };
}
