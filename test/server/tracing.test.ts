import { test } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { affine, affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { tempDir } from '../fixtures/temp.js';
import { packTextDecoder } from '../fixtures/text-archives.js';
import { tracingPlan } from '../../src/server/tracing.js';

/** A span as OTLP/JSON carries it, attributes flattened. */
interface ExportedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly start: bigint;
  readonly end: bigint;
  readonly attributes: Record<string, string | number>;
  readonly links: { traceId: string; spanId: string }[];
  readonly service: string | undefined;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes?: { key: string; value: OtlpValue }[];
  links?: { traceId: string; spanId: string }[];
}
interface OtlpRequest {
  resourceSpans: {
    resource: { attributes: { key: string; value: OtlpValue }[] };
    scopeSpans: { spans: OtlpSpan[] }[];
  }[];
}

const flat = (attributes: { key: string; value: OtlpValue }[] = []): Record<string, string | number> =>
  Object.fromEntries(
    attributes.map(({ key, value }) => [key, value.stringValue ?? Number(value.intValue ?? value.doubleValue)]),
  );

/** A local OTLP/HTTP receiver: what a collector's otlp receiver would take at /v1/traces. */
async function otlpReceiver(t: { after(fn: () => unknown): void }): Promise<{ url: string; spans: ExportedSpan[] }> {
  const spans: ExportedSpan[] = [];
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      assert.equal(req.url, '/v1/traces');
      assert.equal(req.headers['content-type'], 'application/json');
      const raw = Buffer.concat(chunks);
      const body = JSON.parse(
        (req.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw).toString('utf8'),
      ) as OtlpRequest;
      for (const resource of body.resourceSpans) {
        const service = flat(resource.resource.attributes)['service.name'] as string | undefined;
        for (const scope of resource.scopeSpans) {
          for (const span of scope.spans) {
            spans.push({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId || undefined,
              name: span.name,
              kind: span.kind,
              start: BigInt(span.startTimeUnixNano),
              end: BigInt(span.endTimeUnixNano),
              attributes: flat(span.attributes),
              links: (span.links ?? []).map(({ traceId, spanId }) => ({ traceId, spanId })),
              service,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => new Promise((done) => server.close(done)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans };
}

const TRACE_A = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACE_B = '0af7651916cd43dd8448eb211c80319c';
const TRACE_C = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const TRACE_G = '5e1c2b3a4d5e6f708192a3b4c5d6e7f8';
const PARENT = '00f067aa0ba902b7';

test('traces: a span per request under its traceparent (HTTP and gRPC), queue, batch (linked to the batch mates) and forward; the Triton trace settings route reads and sets the sampling', async (t) => {
  const dir = await tempDir(t);
  const receiver = await otlpReceiver(t);
  // Three rows make a batch at once; nothing else goes before: the three requests share one.
  const archive = await packAffine(dir, {
    config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 600s\n  preferred_batch_sizes: [3]\n',
  });
  const server = await startTestServer(t, {
    models: [`affine=${archive}`, `writer=${await packTextDecoder(dir)}`],
    tracing: { otlp_endpoint: `${receiver.url}/`, sample_ratio: 0 },
  });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  const grpc = new InferenceClient(server.urls.grpc);
  t.after(() => grpc.close());
  const traceparent = (traceId: string, flags: string): string => `00-${traceId}-${PARENT}-${flags}`;

  const answers = Promise.all([
    call(url, { body: affineRequest([[1, 2, 3, 4]]), headers: { traceparent: traceparent(TRACE_A, '01') } }),
    call(url, { body: affineRequest([[5, 6, 7, 8]]), headers: { traceparent: traceparent(TRACE_C, '00') } }),
    grpc.call(
      'ModelInfer',
      {
        model_name: 'affine',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], contents: { fp32_contents: [9, 10, 11, 12] } }],
      },
      { traceparent: traceparent(TRACE_B, '01') },
    ),
  ]);
  const [first, unsampled, overGrpc] = await answers;
  assert.deepEqual(first.body.outputs[0].data, affine([[1, 2, 3, 4]]));
  assert.equal(unsampled.status, 200);
  assert.equal(overGrpc.error, undefined);

  // The settings: sample_ratio 0 is trace_rate 0, only sampled parents followed.
  const settings = `${server.urls.inference}/v2/trace/setting`;
  const modelSettings = `${server.urls.inference}/v2/models/affine/trace/setting`;
  const authorization = { authorization: 'Bearer test-token' };
  assert.deepEqual((await call(settings)).body, {
    trace_level: ['TIMESTAMPS'],
    trace_rate: '0',
    trace_count: '-1',
    trace_mode: 'opentelemetry',
  });
  const unauthorized = await call(modelSettings, { body: JSON.stringify({ trace_rate: '1' }) });
  assert.equal(unauthorized.status, 401);
  const set = await call(modelSettings, { body: JSON.stringify({ trace_rate: '1' }), headers: authorization });
  assert.deepEqual([set.status, set.body.trace_rate, set.body.trace_level], [200, '1', ['TIMESTAMPS']]);
  assert.equal((await call(settings)).body.trace_rate, '0', 'the global rate is not the model’s');
  // Every request to affine is traced now, one without a parent too: a root span.
  const alone = await call(url, {
    body: affineRequest([
      [1, 1, 1, 1],
      [2, 2, 2, 2],
      [3, 3, 3, 3],
    ]),
  });
  assert.equal(alone.status, 200);
  const cleared = await call(modelSettings, { body: JSON.stringify({ trace_rate: null }), headers: authorization });
  assert.equal(cleared.body.trace_rate, '0', 'null gives the setting back to the global one');
  for (const [body, code] of [
    [{ trace_level: ['TENSORS'] }, 'BS_ERR_TRACE_SETTING'],
    [{ trace_file: 'trace.json' }, 'BS_ERR_TRACE_SETTING'],
    [{ trace_rate: 'often' }, 'BS_ERR_TRACE_SETTING'],
    [{ sampling: '1' }, 'BS_ERR_TRACE_SETTING'],
  ] as const) {
    const refused = await call(settings, { body: JSON.stringify(body), headers: authorization });
    assert.deepEqual([refused.status, refused.body.code], [400, code], JSON.stringify(body));
  }
  assert.equal((await call(`${server.urls.inference}/v2/models/none/trace/setting`)).status, 404);
  // gRPC's TraceSetting: the same settings; no settings reads them, a change needs the token.
  const overGrpcRead = await grpc.call('TraceSetting', { model_name: 'affine' });
  assert.deepEqual(overGrpcRead.response?.settings?.trace_rate?.value, ['0']);
  const refusedGrpc = await grpc.call('TraceSetting', {
    model_name: 'affine',
    settings: { trace_count: { value: ['5'] } },
  });
  assert.equal(refusedGrpc.error?.code, 16, 'UNAUTHENTICATED');
  const countSet = await grpc.call(
    'TraceSetting',
    { model_name: 'affine', settings: { trace_count: { value: ['5'] } } },
    authorization,
  );
  assert.deepEqual(countSet.response?.settings?.trace_count?.value, ['5']);

  const generated = await call(`${server.urls.inference}/v1/completions`, {
    body: JSON.stringify({ model: 'writer', prompt: 'the cat', max_tokens: 4 }),
    headers: { traceparent: traceparent(TRACE_G, '01') },
  });
  assert.equal(generated.status, 200, JSON.stringify(generated.body));

  // The close exports what is left before it resolves.
  await server.close();
  const { spans } = receiver;
  const requestSpan = (traceId: string): ExportedSpan => {
    const found = spans.filter((span) => span.traceId === traceId && span.name.startsWith('infer '));
    assert.equal(found.length, 1, `one request span in trace ${traceId}`);
    return found[0] as ExportedSpan;
  };
  const childrenOf = (parent: ExportedSpan): Record<string, ExportedSpan> =>
    Object.fromEntries(spans.filter((span) => span.parentSpanId === parent.spanId).map((span) => [span.name, span]));

  assert.equal(spans.filter((span) => span.traceId === TRACE_C).length, 0, 'an unsampled parent at rate 0: no span');
  const [a, b] = [requestSpan(TRACE_A), requestSpan(TRACE_B)];
  for (const [span, protocol] of [
    [a, 'rest'],
    [b, 'grpc'],
  ] as const) {
    assert.equal(span.parentSpanId, PARENT, 'the caller’s span is the parent');
    assert.equal(span.kind, 2, 'SERVER');
    assert.equal(span.service, 'batchserve');
    assert.deepEqual(
      {
        model: span.attributes['batchserve.model'],
        version: span.attributes['batchserve.model.version'],
        routing: span.attributes['batchserve.routing'],
        protocol: span.attributes['batchserve.protocol'],
        batch: span.attributes['batchserve.batch.size'],
        status: span.attributes['batchserve.status'],
      },
      { model: 'affine', version: '1', routing: 'default', protocol, batch: 3, status: 200 },
    );
    const children = childrenOf(span);
    assert.deepEqual(Object.keys(children).sort(), ['batch', 'queue']);
    const { queue, batch } = children as { queue: ExportedSpan; batch: ExportedSpan };
    const forward = childrenOf(batch).forward as ExportedSpan;
    assert.ok(forward, 'the forward pass is the batch’s child');
    assert.ok(span.start <= queue.start && queue.end <= batch.start && batch.start <= forward.start);
    assert.ok(forward.end <= batch.end && batch.end <= span.end, 'each child inside its parent');
    assert.deepEqual(
      [batch.attributes['batchserve.batch.size'], batch.attributes['batchserve.batch.traced_requests']],
      [3, 2],
    );
  }
  // Each batch span links the other traced request of the batch (the unsampled one has no span to link).
  const batchOf = (span: ExportedSpan): ExportedSpan => childrenOf(span).batch as ExportedSpan;
  assert.deepEqual(batchOf(a).links, [{ traceId: TRACE_B, spanId: b.spanId }]);
  assert.deepEqual(batchOf(b).links, [{ traceId: TRACE_A, spanId: a.spanId }]);

  // A generation: its first token's wait, the prefill that made it, and the decoding after.
  const generation = requestSpan(TRACE_G);
  assert.equal(generation.name, 'infer writer');
  const steps = childrenOf(generation);
  assert.deepEqual(Object.keys(steps).sort(), ['decode', 'prefill', 'time to first token']);
  const [prefill, decode, firstToken] = ['prefill', 'decode', 'time to first token'].map(
    (name) => steps[name] as ExportedSpan,
  ) as [ExportedSpan, ExportedSpan, ExportedSpan];
  assert.ok(generation.start === firstToken.start && prefill.start >= firstToken.start);
  assert.ok(prefill.end === firstToken.end && decode.start === prefill.end && decode.end <= generation.end);

  const root = spans.find((span) => span.name === 'infer affine' && span.parentSpanId === undefined) as ExportedSpan;
  assert.ok(![TRACE_A, TRACE_B, TRACE_C].includes(root.traceId), 'a new trace');
  assert.deepEqual(batchOf(root).links, [], 'alone in its batch');
});

test('tracing is on with an endpoint (flag, server.yaml or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT), off otherwise or when OTEL_* turns it off; the ratio from OTEL_TRACES_SAMPLER unless given', () => {
  assert.equal(tracingPlan(undefined, {}), undefined);
  assert.equal(tracingPlan({ sample_ratio: 0.5 }, {}), undefined, 'a ratio alone exports nothing');
  assert.deepEqual(tracingPlan({ otlp_endpoint: 'http://collector:4318/' }, {}), {
    url: 'http://collector:4318/v1/traces',
    ratio: 1,
  });
  assert.deepEqual(tracingPlan(undefined, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), {
    url: undefined,
    ratio: 1,
  });
  assert.deepEqual(tracingPlan(undefined, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }), {
    url: undefined,
    ratio: 1,
  });
  const endpoint = { otlp_endpoint: 'http://collector:4318' };
  assert.equal(tracingPlan(endpoint, { OTEL_SDK_DISABLED: 'true' }), undefined);
  assert.equal(tracingPlan(endpoint, { OTEL_TRACES_EXPORTER: 'none' }), undefined);
  const ratio = (env: NodeJS.ProcessEnv, given?: number): number | undefined =>
    tracingPlan({ ...endpoint, ...(given === undefined ? {} : { sample_ratio: given }) }, env)?.ratio;
  assert.equal(ratio({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }), 0.25);
  assert.equal(ratio({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '7' }), 1);
  assert.equal(ratio({ OTEL_TRACES_SAMPLER: 'always_off' }), 0);
  assert.equal(ratio({ OTEL_TRACES_SAMPLER: 'always_off' }, 0.5), 0.5, 'the option wins');
});
