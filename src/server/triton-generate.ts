import type { ServerResponse } from 'node:http';
import { BatchserveError, InferenceInputError } from '../core/errors.js';
import type { GenerationResult } from '../runtime/generator.js';
import { readBody, requireMediaType, publicMessage, type Route, type RouteHandler } from './http.js';
import { restHead, type InferenceApiOptions } from './inference-api.js';
import { commonFields, generationRequest, objectBody, type GenerationCall } from './openai-generation.js';

/** The sampling parameters generate takes, in `parameters` or beside text_input, by vLLM's backend's names. */
const PARAMETERS = new Set([
  'max_tokens',
  'temperature',
  'top_p',
  'stop',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'response_format',
  'stream',
  'exclude_input_in_output',
]);

/**
 * Triton's generate extension on a text-generation model:
 * `POST /v2/models/{m}[/versions/{v}]/generate` answers `{model_name, model_version,
 * text_output}`; `/generate_stream` sends the same object for each piece of new text as
 * server-sent events (`data: {…}`), and an error once the stream has begun as
 * `data: {"error": "…"}`. The body is `{"text_input": "…", "parameters": {…}}`, the parameters
 * vLLM's backend takes (max_tokens, temperature, top_p, stop, seed, …); a codec over the one
 * inference call, checked as a completion is.
 */
export function tritonGenerateRoutes(options: InferenceApiOptions): Route[] {
  const { infer, maxRequestSize } = options;
  const generate =
    (stream: boolean): RouteHandler =>
    async (req, res, [name, version], url) => {
      // Triton's own examples send the JSON with `curl -d`, which labels it a form.
      requireMediaType(req, ['application/json', 'application/x-www-form-urlencoded']);
      let call: GenerationCall | undefined;
      try {
        await infer(restHead(req, res, name as string, version, url), {
          generates: true,
          read: async () => ({ bytes: await readBody(req, maxRequestSize), contentType: 'application/json' }),
          decode: (model, { bytes }) => {
            call = generateCall(bytes, model.name, stream);
            const request = generationRequest(model, call);
            const head = { model_name: model.name, model_version: model.version };
            const onText = (text: string): void => {
              if (!res.headersSent) startStream(res, call as GenerationCall, head);
              res.write(`data: ${JSON.stringify({ ...head, text_output: text })}\n\n`);
            };
            return {
              kind: 'generation',
              id: undefined,
              request: stream ? { ...request, onText } : request,
              forShadow: (shadow) => generationRequest(shadow, call as GenerationCall),
            };
          },
          answer: (model, _work, [answered]) => {
            const result = answered?.response as GenerationResult;
            const head = { model_name: model.name, model_version: model.version };
            if (stream) {
              if (!res.headersSent) startStream(res, call as GenerationCall, head);
              res.end();
              return;
            }
            const prompt = call?.echo ? call.prompt : '';
            const text = JSON.stringify({ ...head, text_output: prompt + result.text });
            res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
            res.end(text);
          },
        });
      } catch (error) {
        // Once the stream has begun its status is sent: the error is its last event.
        if (res.headersSent && !res.writableEnded && !res.destroyed) {
          const code = error instanceof BatchserveError ? error.code : undefined;
          res.end(`data: ${JSON.stringify({ error: publicMessage(error), code })}\n\n`);
        }
        throw error;
      }
    };
  const path = (suffix: string): RegExp => new RegExp(`^/v2/models/([^/]+)(?:/versions/([^/]+))?/${suffix}$`);
  return [
    { method: 'POST', path: path('generate'), handle: generate(false) },
    { method: 'POST', path: path('generate_stream'), handle: generate(true) },
  ];
}

/** The stream's headers, and an echoed prompt (exclude_input_in_output false) as its first event. */
function startStream(res: ServerResponse, call: GenerationCall, head: Record<string, string>): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  if (call.echo) res.write(`data: ${JSON.stringify({ ...head, text_output: call.prompt })}\n\n`);
}

/** A generate body checked: text_input, and the parameters in `parameters` or beside it. */
function generateCall(body: Buffer, model: string, stream: boolean): GenerationCall {
  const { text_input: text, parameters = {}, ...inputs } = objectBody(body);
  if (typeof text !== 'string') throw new InferenceInputError('"text_input" must be a string');
  if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
    throw new InferenceInputError('"parameters" must be an object');
  }
  return generateParameters(text, { ...inputs, ...(parameters as Record<string, unknown>) }, model, stream);
}

/** The generate parameters, over HTTP or gRPC, checked as a completion's fields are. */
export function generateParameters(
  text: string,
  fields: Record<string, unknown>,
  model: string,
  stream: boolean,
): GenerationCall {
  for (const key of Object.keys(fields)) {
    if (!PARAMETERS.has(key)) {
      throw new InferenceInputError(
        `"${key}" is not a generate parameter here; these are: text_input, ${[...PARAMETERS].join(', ')}`,
      );
    }
  }
  if (fields.stream !== undefined && fields.stream !== stream) {
    throw new InferenceInputError(
      `"stream" ${JSON.stringify(fields.stream)} does not match the route: ${stream ? 'generate_stream streams' : 'generate answers whole; use generate_stream'}`,
    );
  }
  const exclude = fields.exclude_input_in_output ?? true;
  if (typeof exclude !== 'boolean') throw new InferenceInputError('"exclude_input_in_output" must be true or false');
  const checked: Record<string, unknown> = { ...fields, model, stream, echo: !exclude };
  delete checked.exclude_input_in_output;
  return commonFields(checked, 'completion', text);
}
