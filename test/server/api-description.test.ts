import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

interface OpenApi {
  openapi: string;
  info: { title: string; version: string };
  paths: Record<string, Record<string, { parameters?: { name: string; in: string; required: boolean }[] }>>;
}

/** Every {param} of a path is declared as a required path parameter, as OpenAPI demands. */
function assertParametersDeclared(document: OpenApi): void {
  for (const [path, operations] of Object.entries(document.paths)) {
    const named = [...path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => name);
    for (const [method, operation] of Object.entries(operations)) {
      assert.deepEqual(
        (operation.parameters ?? [])
          .filter((parameter) => parameter.in === 'path' && parameter.required)
          .map((p) => p.name),
        named,
        `${method} ${path}`,
      );
    }
  }
}

test("TorchServe's API description: OPTIONS / and GET /api-description answer the port's routes as OpenAPI 3.0.1", async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  const described = await call(`${server.urls.inference}/`, { method: 'OPTIONS' });
  assert.equal(described.status, 200, JSON.stringify(described.body));
  const inference = described.body as OpenApi;
  assert.equal(inference.openapi, '3.0.1');
  assert.equal(inference.info.title, 'batchserve inference API');
  for (const [path, method] of [
    ['/v2/models/{model_name}/infer', 'post'],
    ['/v2/models/{model_name}/versions/{model_version}/infer', 'post'],
    ['/v2/health/ready', 'get'],
    ['/predictions/{model_name}', 'post'],
    ['/predictions/{model_name}/{model_version}', 'post'],
    ['/ping', 'get'],
    ['/api-description', 'get'],
    ['/', 'options'],
  ] as const) {
    assert.ok(inference.paths[path]?.[method], `${method} ${path} in ${Object.keys(inference.paths).join(' ')}`);
  }
  assertParametersDeclared(inference);
  assert.deepEqual((await call(`${server.urls.inference}/api-description`)).body, inference);

  // The management port describes its own routes, without the token (the paths are no secret).
  const management = (await call(`${server.urls.management}/`, { method: 'OPTIONS' })).body as OpenApi;
  assert.equal(management.info.title, 'batchserve management API');
  assert.ok(management.paths['/models/{model_name}/{model_version}/set-default']?.put);
  assert.ok(management.paths['/models']?.post);
  assert.equal(management.paths['/v2/models/{model_name}/infer'], undefined, 'only its own routes');
  assertParametersDeclared(management);
});

test('explanations are a 501 BS_ERR_NOT_IMPLEMENTED that says why, not a 404', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  for (const path of ['/explanations/affine', '/explanations/affine/1']) {
    const answer = await call(`${server.urls.inference}${path}`, { body: Buffer.from('x') });
    assert.equal(answer.status, 501, JSON.stringify(answer.body));
    const { code, error } = answer.body as { code: string; error: string };
    assert.equal(code, 'BS_ERR_NOT_IMPLEMENTED');
    assert.match(error, /explanations are not served: TorchServe computes them with Captum/);
  }
});

test("Triton's /v2/logging is a 501 BS_ERR_NOT_IMPLEMENTED naming what to use, GET and POST; trace settings on a server that exports no traces say OFF and refuse changes", async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  for (const body of [undefined, '{"log_info": false}']) {
    const answer = await call(`${server.urls.inference}/v2/logging`, body === undefined ? {} : { body });
    assert.equal(answer.status, 501, JSON.stringify(answer.body));
    assert.deepEqual(Object.keys(answer.body), ['error', 'code']);
    assert.equal(answer.body.code, 'BS_ERR_NOT_IMPLEMENTED');
    assert.match(answer.body.error, /serve --log-level/);
  }
  for (const path of ['/v2/trace/setting', '/v2/models/affine/trace/setting']) {
    const read = await call(`${server.urls.inference}${path}`);
    assert.deepEqual([read.status, read.body.trace_level], [200, ['OFF']], path);
    const set = await call(`${server.urls.inference}${path}`, {
      body: '{"trace_level": ["TIMESTAMPS"]}',
      headers: { authorization: 'Bearer test-token' },
    });
    assert.deepEqual([set.status, set.body.code], [409, 'BS_ERR_TRACING_OFF'], path);
    assert.match(set.body.error, /--otlp-endpoint/);
  }
});
