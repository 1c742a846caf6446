import type { ServerResponse } from 'node:http';
import type { SubmitResult } from '../batching/batcher.js';
import { InferenceFailedError, InferenceInputError } from '../core/errors.js';
import { isBuiltinHandler } from '../handlers/load.js';
import { isEmbeddingAnswer } from '../handlers/text-embedding-handler.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { RouteChoice } from '../traffic/version-router.js';
import { checkDeclaredLength, readBody, requireMediaType, sendJson, type Route, type RouteHandler } from './http.js';
import { chatCall, completionCall, generate, objectBody } from './openai-generation.js';
import { disconnectSignal, requireReady, type InferenceApiOptions } from './inference-api.js';
import { recordedRun } from './request-outcome.js';
import { authenticated } from './auth.js';

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
 * `/v1/chat/completions` for text-generation ones (streamed or whole), `GET /v1/models`. Errors come in OpenAI's
 * shape (see sendError). The model named in the body is picked like an unversioned request's
 * version: traffic splits and canaries apply.
 */
export function openAiRoutes(options: InferenceApiOptions): Route[] {
  const { repository, traffic } = options;
  const modelObject = (model: LoadedModel): Record<string, unknown> => ({
    id: model.name,
    object: 'model',
    created: Math.floor(model.loadedAt.getTime() / 1000),
    owned_by: 'batchserve',
  });
  /**
   * A route whose body names the model: read and checked once, then the version picked like an
   * unversioned request's (traffic splits and canaries apply), then `run`, its outcome recorded.
   */
  const modelInBody = <Call extends { readonly model: string }>(
    parse: (body: Buffer) => Call,
    run: (res: ServerResponse, model: LoadedModel, call: Call, signal: AbortSignal) => Promise<SubmitResult>,
  ): RouteHandler =>
    authenticated(options.keys, 'inference', async (req, res, _params, url) => {
      requireMediaType(req, ['application/json']);
      checkDeclaredLength(req, options.maxRequestSize);
      const call = parse(await readBody(req, options.maxRequestSize));
      let model: LoadedModel | undefined;
      const choice: RouteChoice = { routing: 'explicit', stickyKey: undefined };
      await recordedRun(
        options.requestFinished,
        'rest',
        true,
        () => model,
        async () => {
          model = traffic.router.route(call.model, req, url, choice);
          res.setHeader('x-model-version', model.version);
          requireReady(model, options.isAccepting() && model.state === 'ready');
          return run(res, model, call, disconnectSignal(res));
        },
        () => undefined,
      );
    });
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
    { method: 'POST', path: /^\/v1\/embeddings$/, handle: modelInBody(embeddingsRequest, embed) },
    { method: 'POST', path: /^\/v1\/completions$/, handle: modelInBody(completionCall, generate) },
    { method: 'POST', path: /^\/v1\/chat\/completions$/, handle: modelInBody(chatCall, generate) },
  ];
}

/** Runs the inputs in chunks of at most max_batch_size (each may share a batch), answers in order. */
async function embed(
  res: ServerResponse,
  model: LoadedModel,
  request: EmbeddingsRequest,
  signal: AbortSignal,
): Promise<SubmitResult> {
  const handler = model.manifest.model.handler;
  if (isBuiltinHandler(handler) && handler !== 'text-embedding') {
    throw new InferenceInputError(
      `model ${model.name} does not answer embeddings: its handler is ${handler}; pack a text encoder with --handler text-embedding`,
    );
  }
  const chunk = Math.max(model.config.max_batch_size, 1);
  const parts: string[][] = [];
  for (let start = 0; start < request.input.length; start += chunk) {
    parts.push(request.input.slice(start, start + chunk));
  }
  const results = await Promise.all(
    parts.map((texts) => model.infer({ kind: 'texts', texts }, { rows: texts.length, shapeKey: 'text', signal })),
  );
  const normalize = model.config.text?.normalize ?? true;
  let tokens = 0;
  const data: Record<string, unknown>[] = [];
  for (const result of results) {
    const answer = result.response;
    if (!isEmbeddingAnswer(answer)) {
      throw new InferenceFailedError(`the ${handler} handler of model ${model.name} answered no embeddings`);
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
  model.countTokens('prompt', tokens);
  sendJson(res, 200, {
    object: 'list',
    data,
    model: model.name,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
  });
  return results[results.length - 1] as SubmitResult;
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
