import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { status as grpcStatus, type ClientDuplexStream } from '@grpc/grpc-js';
import { pino } from 'pino';
import { Client, request } from 'undici';
import { packArchive } from '../../src/archive/pack.js';
import type { PredictionRecord } from '../../src/experiment/log-records.js';
import { validateServerConfig } from '../../src/server/server-config.js';
import { startServer, type BatchServer } from '../../src/server/server.js';
import { InferenceClient, type GrpcAnswer, type StreamAnswer } from '../fixtures/grpc-client.js';
import { identityModel, writeModel } from '../fixtures/onnx-models.js';
import { packAffine, scrapeMetrics } from '../fixtures/server.js';
import { packTextDecoder, packTextEncoder } from '../fixtures/text-archives.js';
import { samplesOf } from '../metrics/prometheus-text.js';

/**
 * One request path, every front door: each behaviour of the inference call (rows) checked on
 * every transport (columns) against one real server, or a line saying why the transport cannot
 * have it. The table is the documentation of what differs between front doors (docs/serving.md
 * points here); a cell that fails is a transport that drifted from the call.
 */
const TRANSPORTS = [
  'v2-json',
  'v2-binary',
  'torchserve',
  'grpc',
  'grpc-stream',
  'embeddings',
  'completions',
  'generate',
  'grpc-generate',
] as const;
type Transport = (typeof TRANSPORTS)[number];

/** The transports that generate: their admission is the engine's, and nothing times them out. */
const generates = (transport: Transport): boolean =>
  transport === 'completions' || transport === 'generate' || transport === 'grpc-generate';
/** The transports whose answers come on a gRPC stream: an error is its error_message, with no status or code. */
const streams = (transport: Transport): boolean => transport === 'grpc-stream' || transport === 'grpc-generate';

type Cell = (transport: Transport) => Promise<void>;
/** A test, or why the transport cannot have the behaviour. */
type Row = Partial<Record<Transport, string>> & { readonly test: Cell };

const NO_VERSION =
  "OpenAI's API has no version field: a request is routed as a v2 request without a version is (docs/serving.md)";
const NOT_CACHED = 'a generation is not cached: its answer is sampled, and streamed as it is made';
const NO_TIMEOUT = (what: string): string =>
  `${what} has no per-request timeout field; the model's dynamic_batching.default_timeout applies`;
const NOT_TIMED = 'a generation is not timed out in its engine (its wait list is generation.max_waiting)';

/** Models each transport speaks to: the main ones (two versions each), the slow ones (one, on the simulated device). */
const MODELS: Record<Transport, { main: string; slow: string }> = {
  'v2-json': { main: 'affine', slow: 'slow' },
  'v2-binary': { main: 'affine', slow: 'slow' },
  torchserve: { main: 'affine', slow: 'slow' },
  grpc: { main: 'affine', slow: 'slow' },
  'grpc-stream': { main: 'affine', slow: 'slow' },
  embeddings: { main: 'embedder', slow: 'slow' },
  completions: { main: 'writer', slow: 'slowwriter' },
  generate: { main: 'writer', slow: 'slowwriter' },
  'grpc-generate': { main: 'writer', slow: 'slowwriter' },
};

/** One sim pass holds the slow model's only instance this long: what keeps a request queued behind it. */
const SLOW_PASS_MS = 400;

/**
 * The slow model's handler: the tensor handler for tensors and TorchServe bodies; texts (the
 * embeddings route) run as rows of zeros and are answered as embeddings, so one queue serves
 * every batched transport.
 */
const SLOW_HANDLER = `
const zeros = (count) => Buffer.from(JSON.stringify(Array.from({ length: count }, () => [0, 0, 0, 0])));
export function preprocess(requests, context) {
  return context.builtins.tensor.preprocess(
    requests.map((request) =>
      request.kind === 'texts'
        ? { kind: 'body', body: zeros(request.texts.length), contentType: 'application/json', movable: false }
        : request,
    ),
    context,
  );
}
export async function postprocess(outputs, requests, context) {
  const tensors = await context.builtins.tensor.postprocess(outputs, requests, context);
  return requests.map((request, index) =>
    request.kind === 'texts'
      ? { embeddings: request.texts.map(() => [1, 0, 0, 0]), tokens: request.texts.length }
      : tensors[index],
  );
}
`;

interface Ask {
  readonly slow?: boolean;
  /** A model no one loaded. */
  readonly unknown?: boolean;
  readonly version?: string;
  /** False: no Authorization at all. */
  readonly auth?: boolean;
  readonly headers?: Record<string, string>;
  /** Where the transport's body can carry one (v2 `id`, gRPC `id`). */
  readonly id?: string;
  /** The input's value; distinct values miss the response cache. */
  readonly value?: number;
  readonly timeoutUs?: number;
  readonly signal?: AbortSignal;
  readonly maxTokens?: number;
}

/** What a transport answered, in one shape: an HTTP status (gRPC's mapped), the stable code, the version, the request id. */
interface Outcome {
  readonly status: number;
  readonly code: string | undefined;
  readonly message: string;
  readonly version: string | undefined;
  readonly requestId: string | undefined;
}

const GRPC_AS_HTTP: Record<number, number> = {
  [grpcStatus.OK]: 200,
  [grpcStatus.INVALID_ARGUMENT]: 400,
  [grpcStatus.UNAUTHENTICATED]: 401,
  [grpcStatus.NOT_FOUND]: 404,
  [grpcStatus.CANCELLED]: 499,
  [grpcStatus.UNAVAILABLE]: 503,
  [grpcStatus.RESOURCE_EXHAUSTED]: 503,
  [grpcStatus.INTERNAL]: 500,
};

let server: BatchServer;
let grpc: InferenceClient;
let inferenceKey: string;
let managementKey: string;
let logDir: string;
let counter = 0;

const unique = (): number => ++counter;

function modelOf(transport: Transport, ask: Ask): string {
  if (ask.unknown) return 'nope';
  return MODELS[transport][ask.slow ? 'slow' : 'main'];
}

function httpHeaders(ask: Ask, json = true): Record<string, string> {
  return {
    ...(json ? { 'content-type': 'application/json' } : {}),
    ...(ask.auth === false ? {} : { authorization: `Bearer ${inferenceKey}` }),
    ...ask.headers,
  };
}

async function httpOutcome(
  url: string,
  body: string | Buffer,
  headers: Record<string, string>,
  ask: Ask,
  via?: Client,
): Promise<Outcome> {
  const options = { method: 'POST' as const, headers, body, ...(ask.signal ? { signal: ask.signal } : {}) };
  const answer = via ? await via.request({ ...options, path: new URL(url).pathname }) : await request(url, options);
  const text = Buffer.from(await answer.body.arrayBuffer()).toString('utf8');
  let code: string | undefined;
  let message = '';
  if (answer.statusCode >= 400) {
    const parsed = JSON.parse(text) as { code?: string; error?: string | { message: string } };
    code = parsed.code;
    message = typeof parsed.error === 'string' ? parsed.error : (parsed.error?.message ?? '');
  }
  const header = (name: string): string | undefined => {
    const value = answer.headers[name];
    return typeof value === 'string' ? value : undefined;
  };
  return {
    status: answer.statusCode,
    code,
    message,
    version: header('x-model-version'),
    requestId: header('x-request-id'),
  };
}

function v2Body(ask: Ask): Record<string, unknown> {
  return {
    ...(ask.id !== undefined ? { id: ask.id } : {}),
    ...(ask.timeoutUs !== undefined ? { parameters: { timeout: ask.timeoutUs } } : {}),
  };
}

function row(ask: Ask): number[] {
  const value = ask.value ?? unique();
  return [value, value, value, value];
}

function grpcMessage(transport: Transport, ask: Ask): object {
  return {
    model_name: modelOf(transport, ask),
    model_version: ask.version ?? '',
    ...(ask.id !== undefined ? { id: ask.id } : {}),
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], contents: { fp32_contents: row(ask) } }],
    ...(ask.timeoutUs !== undefined ? { parameters: { timeout: { int64_param: ask.timeoutUs } } } : {}),
  };
}

function grpcMetadata(ask: Ask): Record<string, string> {
  return { ...(ask.auth === false ? {} : { authorization: `Bearer ${inferenceKey}` }), ...ask.headers };
}

function fromGrpc(answer: GrpcAnswer): Outcome {
  const metadata = answer.error ? answer.error.metadata : answer.metadata;
  const text = (key: string): string | undefined => {
    const value = metadata[key];
    return typeof value === 'string' ? value : undefined;
  };
  return {
    status: answer.error ? (GRPC_AS_HTTP[answer.error.code] ?? answer.error.code) : 200,
    code: text('bs-error-code'),
    message: answer.error?.details ?? '',
    version: text('x-model-version'),
    requestId: text('x-request-id'),
  };
}

/** One message on a stream of its own; its answer carries the version and id in the message, and no status or code. */
function streamOutcome(ask: Ask, message: object): Promise<Outcome> {
  const stream: ClientDuplexStream<object, StreamAnswer> = grpc.stream(grpcMetadata(ask));
  return new Promise((resolve, reject) => {
    ask.signal?.addEventListener('abort', () => stream.cancel(), { once: true });
    stream.once('data', (answer: StreamAnswer) => {
      stream.end();
      resolve({
        status: answer.error_message === '' ? 200 : 0,
        code: undefined,
        message: answer.error_message,
        version: answer.infer_response?.model_version || undefined,
        requestId: answer.infer_response?.id || undefined,
      });
    });
    stream.once('error', (error: Error & { code?: number; details?: string; metadata?: { getMap(): object } }) =>
      error.code === undefined
        ? reject(error)
        : resolve({
            status: GRPC_AS_HTTP[error.code] ?? error.code,
            code: (error.metadata?.getMap() as Record<string, string> | undefined)?.['bs-error-code'],
            message: error.details ?? '',
            version: undefined,
            requestId: undefined,
          }),
    );
    stream.write(message);
  });
}

/** Each transport's request for the same behaviour. `via` sends an HTTP one on a kept connection. */
function ask(transport: Transport, given: Ask = {}, via?: Client): Promise<Outcome> {
  const base = server.urls.inference;
  const model = modelOf(transport, given);
  const versioned = given.version === undefined ? '' : `/versions/${given.version}`;
  switch (transport) {
    case 'v2-json':
      return httpOutcome(
        `${base}/v2/models/${model}${versioned}/infer`,
        JSON.stringify({
          ...v2Body(given),
          inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], data: row(given) }],
        }),
        httpHeaders(given),
        given,
        via,
      );
    case 'v2-binary': {
      const header = Buffer.from(
        JSON.stringify({
          ...v2Body(given),
          inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], parameters: { binary_data_size: 16 } }],
        }),
      );
      return httpOutcome(
        `${base}/v2/models/${model}${versioned}/infer`,
        Buffer.concat([header, Buffer.from(new Float32Array(row(given)).buffer)]),
        {
          ...httpHeaders(given, false),
          'content-type': 'application/octet-stream',
          'inference-header-content-length': String(header.length),
        },
        given,
        via,
      );
    }
    case 'torchserve':
      return httpOutcome(
        `${base}/predictions/${model}${given.version === undefined ? '' : `/${given.version}`}`,
        JSON.stringify({ x: [row(given)] }),
        httpHeaders(given),
        given,
        via,
      );
    case 'grpc':
      return grpc
        .call('ModelInfer', grpcMessage(transport, given), grpcMetadata(given), {}, given.signal)
        .then(fromGrpc);
    case 'grpc-stream':
      return streamOutcome(given, grpcMessage(transport, given));
    case 'embeddings':
      return httpOutcome(
        `${base}/v1/embeddings`,
        JSON.stringify({ model, input: [`hello ${given.value ?? unique()}`] }),
        httpHeaders(given),
        given,
        via,
      );
    case 'completions':
      return httpOutcome(
        `${base}/v1/completions`,
        JSON.stringify({ model, prompt: 'hello', max_tokens: given.maxTokens ?? 2, temperature: 0 }),
        httpHeaders(given),
        given,
        via,
      );
    case 'generate':
      return httpOutcome(
        `${base}/v2/models/${model}${versioned}/generate`,
        JSON.stringify({ text_input: 'hello', parameters: { max_tokens: given.maxTokens ?? 2, temperature: 0 } }),
        httpHeaders(given),
        given,
        via,
      );
    case 'grpc-generate':
      return streamOutcome(given, {
        model_name: model,
        model_version: given.version ?? '',
        ...(given.id !== undefined ? { id: given.id } : {}),
        inputs: [
          { name: 'text_input', datatype: 'BYTES', shape: [1], contents: { bytes_contents: [Buffer.from('hello')] } },
        ],
        parameters: { max_tokens: { int64_param: given.maxTokens ?? 2 }, temperature: { double_param: 0 } },
      });
  }
}

async function manage(path: string, method: string, body?: unknown): Promise<void> {
  const answer = await request(`${server.urls.management}${path}`, {
    method: method as 'PUT',
    headers: { authorization: `Bearer ${managementKey}`, 'content-type': 'application/json' },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const text = await answer.body.text();
  assert.ok(answer.statusCode < 300, `${method} ${path}: ${answer.statusCode} ${text}`);
}

/** Sets (or with `{}` clears) the traffic policy of every main model. */
async function traffic(policy: Record<string, unknown>): Promise<void> {
  for (const model of ['affine', 'embedder', 'writer']) await manage(`/models/${model}/traffic`, 'PUT', policy);
}

async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function metric(name: string, labels: Record<string, string>): Promise<number> {
  return samplesOf(await scrapeMetrics(server), name, labels).reduce((sum, sample) => sum + sample.value, 0);
}

const protocolOf = (transport: Transport): string => (transport.startsWith('grpc') ? 'grpc' : 'rest');

async function loggedRecords(model: string): Promise<PredictionRecord[]> {
  const folder = join(logDir, model);
  const names = (await readdir(folder).catch(() => [])).filter((name) => name.endsWith('.jsonl'));
  const text = (await Promise.all(names.map((name) => readFile(join(folder, name), 'utf8')))).join('');
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as PredictionRecord);
}

/** Starts a request whose body never ends: the call holds its queue place (the slow model's only one) meanwhile. */
async function holdTheSlowQueue(): Promise<() => Promise<void>> {
  const slow = server.repository.get('slow');
  await waitFor('the slow queue empty', () => slow.queuedRows + slow.reservedRows === 0);
  const url = new URL(`${server.urls.inference}/predictions/slow`);
  const holder = new Client(url.origin);
  const body = new PassThrough();
  const answer = holder.request({
    path: url.pathname,
    method: 'POST',
    headers: { authorization: `Bearer ${inferenceKey}`, 'content-type': 'application/json', 'content-length': '18' },
    body,
  });
  body.write('{"x": ');
  await waitFor('the held queue place', () => slow.reservedRows === 1);
  return async () => {
    body.end('[[0,0,0,0]]}');
    await (await answer).body.text();
    await holder.close();
  };
}

/** A request that runs on the slow model's only instance for SLOW_PASS_MS, so the next one queues; `done` is its answer. */
async function occupyTheSlowInstance(): Promise<{ done: Promise<unknown> }> {
  const slow = server.repository.get('slow');
  await waitFor('the slow model idle', () => slow.busyInstances === 0 && slow.queuedRows + slow.reservedRows === 0);
  const running = ask('v2-json', { slow: true });
  await waitFor('the slow instance busy', () => slow.busyInstances === 1 && slow.queuedRows === 0);
  // Wrapped: an async function returning the promise itself would wait for it.
  return { done: running };
}

/** A long generation on the slow decoder's only sequence place; the returned function ends it. */
async function occupyTheSlowWriter(): Promise<() => Promise<void>> {
  const writer = server.repository.get('slowwriter');
  const controller = new AbortController();
  const running = ask('completions', { slow: true, maxTokens: 400, signal: controller.signal }).catch(() => undefined);
  await waitFor('the slow writer generating', () => (writer.generator?.activeSequences ?? 0) === 1);
  return async () => {
    controller.abort();
    await running;
    await waitFor('the slow writer free', () => (writer.generator?.activeSequences ?? 0) === 0);
  };
}

const ROWS: Record<string, Row> = {
  'auth refused': {
    test: async (transport) => {
      const answer = await ask(transport, { auth: false });
      assert.equal(answer.status, streams(transport) ? 0 : 401, answer.message);
      if (streams(transport)) assert.match(answer.message, /Authorization: Bearer/);
      else assert.equal(answer.code, 'BS_ERR_UNAUTHORIZED');
    },
  },
  'unknown model': {
    test: async (transport) => {
      const answer = await ask(transport, { unknown: true });
      assert.equal(answer.status, streams(transport) ? 0 : 404, answer.message);
      if (streams(transport)) assert.match(answer.message, /unknown model "nope"/);
      else assert.equal(answer.code, 'BS_ERR_MODEL_NOT_FOUND');
    },
  },
  'pinned version': {
    embeddings: NO_VERSION,
    completions: NO_VERSION,
    test: async (transport) => {
      for (const version of ['2', '1']) {
        const answer = await ask(transport, { version });
        assert.deepEqual([answer.status, answer.version], [200, version], answer.message);
      }
    },
  },
  'sticky split': {
    test: async (transport) => {
      await traffic({ split: { '1': 50, '2': 50 }, sticky_key: 'header:X-User' });
      try {
        const versions = new Set<string | undefined>();
        for (const user of ['ann', 'bob', 'cai', 'dee', 'eve', 'fay']) {
          const first = await ask(transport, { headers: { 'x-user': user } });
          for (let again = 0; again < 2; again++) {
            const next = await ask(transport, { headers: { 'x-user': user } });
            assert.equal(next.version, first.version, `user ${user} stays on one version`);
          }
          versions.add(first.version);
        }
        assert.deepEqual([...versions].sort(), ['1', '2'], 'the keys spread over both versions');
      } finally {
        await traffic({});
      }
    },
  },
  'canary weights': {
    test: async (transport) => {
      const model = MODELS[transport].main;
      await manage(`/models/${model}/canary`, 'POST', { version: '2', steps: [100], interval: '60s' });
      try {
        for (let index = 0; index < 3; index++) {
          const answer = await ask(transport);
          assert.deepEqual([answer.status, answer.version], [200, '2'], 'the candidate takes its weight, 100 %');
        }
      } finally {
        await manage(`/models/${model}/canary/rollback`, 'POST');
      }
      assert.equal((await ask(transport)).version, '1', 'rolled back: the stable version again');
    },
  },
  'shadow mirrored': {
    test: async (transport) => {
      const model = MODELS[transport].main;
      await traffic({ shadow: '2' });
      try {
        const mirrored = () => metric('batchserve_shadow_requests_total', { model, version: '2' });
        const before = await mirrored();
        const answer = await ask(transport);
        assert.deepEqual([answer.status, answer.version], [200, '1']);
        await waitFor('the shadow copy compared', async () => (await mirrored()) === before + 1);
      } finally {
        await traffic({});
      }
    },
  },
  'prediction log line with its variant': {
    test: async (transport) => {
      const model = MODELS[transport].main;
      const id = `logged-${transport}-${unique()}`;
      const answer = await ask(transport, {
        version: transport === 'embeddings' || transport === 'completions' ? undefined : '2',
        id,
        headers: { 'x-request-id': id },
      });
      assert.equal(answer.status, 200, answer.message);
      let record: PredictionRecord | undefined;
      await waitFor('the record written', async () => {
        record = (await loggedRecords(model)).find((line) => line.id === id);
        return record !== undefined;
      });
      assert.equal(record?.version, answer.version);
      assert.equal(record?.routing, transport === 'embeddings' || transport === 'completions' ? 'default' : 'explicit');
      assert.equal(record?.status, 200);
    },
  },
  'cache hit': {
    completions: NOT_CACHED,
    generate: NOT_CACHED,
    'grpc-generate': NOT_CACHED,
    test: async (transport) => {
      const model = MODELS[transport].main;
      const hits = (): number => server.repository.get(model, '1').stats.toJSON().inference_stats.cache_hit.count;
      const value = unique();
      const before = hits();
      assert.equal((await ask(transport, { value })).status, 200);
      assert.equal(hits(), before, 'the first is a miss');
      assert.equal((await ask(transport, { value })).status, 200);
      assert.equal(hits(), before + 1, 'the same request again is a hit');
    },
  },
  'queue full': {
    test: async (transport) => {
      if (generates(transport)) {
        const release = await occupyTheSlowWriter();
        try {
          const answer = await ask(transport, { slow: true });
          if (streams(transport)) assert.match(answer.message, /already wait to be generated/);
          else assert.deepEqual([answer.status, answer.code], [503, 'BS_ERR_QUEUE_FULL'], answer.message);
        } finally {
          await release();
        }
        return;
      }
      const release = await holdTheSlowQueue();
      try {
        const answer = await ask(transport, { slow: true });
        if (transport === 'grpc-stream') assert.match(answer.message, /Exceeds maximum queue size/);
        else assert.deepEqual([answer.status, answer.code], [503, 'BS_ERR_QUEUE_FULL'], answer.message);
      } finally {
        await release();
      }
    },
  },
  'per-request timeout': {
    torchserve: NO_TIMEOUT("TorchServe's /predictions"),
    embeddings: NO_TIMEOUT("OpenAI's embeddings API"),
    completions: `${NO_TIMEOUT("OpenAI's completions API")}, and a generation is not timed out in its engine`,
    generate: NOT_TIMED,
    'grpc-generate': NOT_TIMED,
    test: async (transport) => {
      const running = await occupyTheSlowInstance();
      const answer = await ask(transport, { slow: true, timeoutUs: 50_000 });
      if (transport === 'grpc-stream') assert.match(answer.message, /Request timeout expired/);
      else assert.deepEqual([answer.status, answer.code], [503, 'BS_ERR_QUEUE_TIMEOUT'], answer.message);
      await running.done;
    },
  },
  'client disconnect cancels': {
    test: async (transport) => {
      const model = MODELS[transport].slow;
      const version = server.repository.get(model);
      const cancelled = () => metric('batchserve_requests_total', { model, status: '499' });
      const before = await cancelled();
      const controller = new AbortController();
      if (generates(transport)) {
        const gone = ask(transport, { slow: true, maxTokens: 400, signal: controller.signal }).catch(() => undefined);
        await waitFor('generating', () => (version.generator?.activeSequences ?? 0) === 1);
        controller.abort();
        await gone;
        await waitFor('the sequence ended', () => (version.generator?.activeSequences ?? 0) === 0);
      } else {
        const running = await occupyTheSlowInstance();
        const gone = ask(transport, { slow: true, signal: controller.signal }).catch(() => undefined);
        await waitFor('queued', () => version.queuedRows === 1);
        controller.abort();
        await gone;
        await waitFor('dropped from the queue', () => version.queuedRows === 0);
        await running.done;
      }
      await waitFor('counted as 499', async () => (await cancelled()) === before + 1);
    },
  },
  'metrics counted once': {
    test: async (transport) => {
      const model = MODELS[transport].main;
      const labels = { model, version: '1', protocol: protocolOf(transport), status: '200' };
      const before = await metric('batchserve_requests_total', labels);
      const durations = () => metric('batchserve_request_duration_seconds_count', { model, version: '1' });
      const timedBefore = await durations();
      assert.equal((await ask(transport)).status, 200);
      assert.equal(await metric('batchserve_requests_total', labels), before + 1, 'one request, counted once');
      assert.equal(await durations(), timedBefore + 1, 'and timed once');
    },
  },
  'request id echoed': {
    test: async (transport) => {
      const id = `client-${transport}-${unique()}`;
      // A stream's answers carry the id the message carries; every other transport echoes X-Request-Id.
      const answer = await ask(transport, streams(transport) ? { id } : { headers: { 'x-request-id': id } });
      assert.deepEqual([answer.status, answer.requestId], [200, id]);
    },
  },
  'drain refuses new work': {
    test: async (transport) => {
      assert.ok(draining, 'the drain started before these cells');
      const kept = keptConnections.get(transport);
      const answer = await ask(transport, {}, kept);
      assert.equal(answer.status, 503, answer.message);
      if (kept) {
        assert.equal(answer.code, 'BS_ERR_MODEL_NOT_READY');
        assert.match(answer.message, /shutting down|unloading/);
      }
    },
  },
};

let draining: Promise<boolean> | undefined;
let releaseHeldBody: (() => Promise<void>) | undefined;
const keptConnections = new Map<Transport, Client>();

describe('one request path: every behaviour on every transport', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'batchserve-parity-'));
    logDir = join(root, 'logs');
    const cached = 'max_batch_size: 8\nresponse_cache:\n  enable: true\n';
    const slowDir = join(root, 'slow');
    await mkdir(slowDir, { recursive: true });
    await writeFile(join(slowDir, 'handler.js'), SLOW_HANDLER);
    await writeFile(
      join(slowDir, 'config.yaml'),
      [
        'max_batch_size: 4',
        'instances: [{count: 1, device: sim}]',
        `simulated_device: {fixed_cost: ${SLOW_PASS_MS}ms, row_cost: 1ms}`,
        'dynamic_batching: {max_queue_size: 1}',
        '',
      ].join('\n'),
    );
    const slow = await packArchive({
      modelName: 'slow',
      serializedFile: await writeModel(slowDir, 'slow.onnx', identityModel('FP32', 4)),
      configFile: join(slowDir, 'config.yaml'),
      handler: join(slowDir, 'handler.js'),
      exportPath: join(slowDir, 'store'),
    });
    const models = [
      await packAffine(join(root, 'affine-1'), { version: '1', config: cached }),
      await packAffine(join(root, 'affine-2'), { version: '2', offset: 2, config: cached }),
      await packTextEncoder(root, { version: '1', config: 'response_cache:\n  enable: true\n' }),
      await packTextEncoder(root, { version: '2', config: 'response_cache:\n  enable: true\n' }),
      await packTextDecoder(root, { version: '1' }),
      await packTextDecoder(root, { version: '2' }),
      slow.path,
      await packTextDecoder(root, { name: 'slowwriter', active: 1, waiting: 0, maxNew: 400, context: 512, sim: true }),
    ];
    server = await startServer({
      config: validateServerConfig(
        {
          port: 0,
          management_port: 0,
          metrics_port: 0,
          grpc_port: 0,
          state_file: join(root, 'state.json'),
          work_dir: join(root, 'work'),
          auth: { mode: 'torchserve', key_file: join(root, 'keys.json') },
          prediction_log: logDir,
          models: models.map(
            (path, index) =>
              `${['affine', 'affine', 'embedder', 'embedder', 'writer', 'writer', 'slow', 'slowwriter'][index]}=${path}`,
          ),
          model_policies: Object.fromEntries(
            ['affine', 'embedder', 'writer'].map((model) => [model, { default_version: '1' }]),
          ),
        },
        'parity',
      ),
      logger: pino({ level: 'silent' }),
    });
    const keys = server.keys?.keyFile() as Record<string, { key: string }>;
    inferenceKey = (keys.inference as { key: string }).key;
    managementKey = (keys.management as { key: string }).key;
    grpc = new InferenceClient(server.urls.grpc);
  });
  after(async () => {
    grpc?.close();
    await releaseHeldBody?.();
    for (const client of keptConnections.values()) await client.close();
    await draining;
    await server?.close();
    await rm(root, { recursive: true, force: true, maxRetries: 5 });
  });

  for (const [behaviour, cells] of Object.entries(ROWS)) {
    if (behaviour === 'drain refuses new work') {
      test('(the drain starts: connections kept from before it, a request still reading its body)', async () => {
        for (const transport of TRANSPORTS) {
          if (transport.startsWith('grpc')) continue;
          const client = new Client(server.urls.inference, { keepAliveTimeout: 60_000 });
          const warm = await client.request({ path: '/v2/health/live', method: 'GET' });
          await warm.body.text();
          keptConnections.set(transport, client);
        }
        assert.equal((await ask('grpc', {})).status, 200, 'the gRPC channel is connected');
        releaseHeldBody = await holdTheSlowQueue();
        draining = server.drain(30_000);
      });
    }
    for (const transport of TRANSPORTS) {
      const why = cells[transport];
      if (why !== undefined) test(`${behaviour} × ${transport}`, { skip: why }, () => undefined);
      else test(`${behaviour} × ${transport}`, () => cells.test(transport));
    }
  }
});
