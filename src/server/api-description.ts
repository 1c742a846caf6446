import { BATCHSERVE_VERSION } from '../version.js';
import { sendJson, type Route } from './http.js';

/** What each capture group of a route's path is, in order: every route names a model first. */
const PARAMETER_NAMES = ['model_name', 'model_version'] as const;
const CAPTURE = '([^/]+)';

/**
 * The OpenAPI paths one route's pattern stands for: `^/v2/models/([^/]+)(?:/versions/([^/]+))?/infer$`
 * is `/v2/models/{model_name}/infer` and `/v2/models/{model_name}/versions/{model_version}/infer`.
 * Read from the patterns the router matches, so the description cannot drift from the routes.
 */
export function pathTemplates(pattern: RegExp): string[] {
  let source = pattern.source.replace(/^\^/, '').replace(/\$$/, '').replaceAll('\\/', '/');
  source = source.replace(/\/\?$/, '');
  const optional = /\(\?:([^()]*(?:\([^()]*\)[^()]*)*)\)\?/.exec(source);
  const expanded = optional
    ? [
        source.slice(0, optional.index) + (optional[1] as string) + source.slice(optional.index + optional[0].length),
        source.slice(0, optional.index) + source.slice(optional.index + optional[0].length),
      ]
    : [source];
  return expanded.map((path) => {
    let index = 0;
    const named = path.replaceAll(CAPTURE, () => `{${PARAMETER_NAMES[index++] ?? `param${index}`}}`);
    return named === '' ? '/' : named;
  });
}

/** An OpenAPI 3.0.1 document of these routes, as TorchServe's `OPTIONS /` answers with. */
export function openApiDocument(routes: readonly Route[], title: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    for (const template of pathTemplates(route.path)) {
      const parameters = [...template.matchAll(/\{([^}]+)\}/g)].map(([, name]) => ({
        name,
        in: 'path',
        required: true,
        schema: { type: 'string' },
      }));
      (paths[template] ??= {})[route.method.toLowerCase()] = {
        operationId: `${route.method.toLowerCase()} ${template}`,
        ...(parameters.length > 0 ? { parameters } : {}),
        responses: {
          '200': { description: 'OK' },
          default: {
            description: 'An error: {"error": message, "code": BS_ERR_…} (docs/errors.md)',
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['error', 'code'],
                  properties: { error: { type: 'string' }, code: { type: 'string' } },
                },
              },
            },
          },
        },
      };
    }
  }
  return { openapi: '3.0.1', info: { title, version: BATCHSERVE_VERSION }, paths };
}

/** The routes plus TorchServe's two ways of asking for their description: `OPTIONS /` and `GET /api-description`. */
export function withApiDescription(routes: readonly Route[], title: string): Route[] {
  const described: Route[] = [
    ...routes,
    { method: 'OPTIONS', path: /^\/$/, handle: async (_req, res) => sendJson(res, 200, document()) },
    { method: 'GET', path: /^\/api-description$/, handle: async (_req, res) => sendJson(res, 200, document()) },
  ];
  let cached: Record<string, unknown> | undefined;
  const document = (): Record<string, unknown> => (cached ??= openApiDocument(described, title));
  return described;
}
