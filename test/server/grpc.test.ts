import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { status } from '@grpc/grpc-js';
import { packArchive } from '../../src/archive/pack.js';
import type { BatchServer } from '../../src/server/server.js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { affineModel, identityModel, writeModel, ONNX_ELEMENT_TYPE } from '../fixtures/onnx-models.js';
import { affineRequest, call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { samplesOf } from '../metrics/prometheus-text.js';
import { GATED_CONFIG, GATED_HANDLER, installGate, waitUntil } from './handler-gate.js';

const ROW = [1, 2, 3, 4];
const TOKEN = { authorization: 'Bearer test-token' };

const f32 = (values: number[]): Buffer => Buffer.from(new Float32Array(values).buffer);
const affineInfer = (extra: Record<string, unknown> = {}, rows: number[][] = [ROW]) => ({
  model_name: 'affine',
  inputs: [{ name: 'x', datatype: 'FP32', shape: [rows.length, 4] }],
  raw_input_contents: [f32(rows.flat())],
  ...extra,
});
const floats = (bytes: Uint8Array): number[] =>
  Array.from(new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength)));

function client(t: TestContext, server: BatchServer): InferenceClient {
  const grpc = new InferenceClient(server.urls.grpc);
  t.after(() => grpc.close());
  return grpc;
}

async function affineServer(t: TestContext, config: Record<string, unknown> = {}): Promise<BatchServer> {
  const archive = await packAffine(join(await tempDir(t), 'v1'));
  return startTestServer(t, { models: [`affine=${archive}`], ...config });
}

test('the health, metadata, config, statistics and repository RPCs answer as Triton’s', async (t) => {
  const server = await affineServer(t);
  const grpc = client(t, server);
  assert.deepEqual((await grpc.call('ServerLive', {})).response.live, true);
  assert.deepEqual((await grpc.call('ServerReady', {})).response.ready, true);
  assert.equal((await grpc.call('ModelReady', { name: 'affine' })).response.ready, true);
  assert.equal((await grpc.call('ModelReady', { name: 'affine', version: '7' })).error?.code, status.NOT_FOUND);
  const metadata = (await grpc.call('ServerMetadata', {})).response;
  assert.equal(metadata.name, 'batchserve');
  assert.ok(metadata.extensions.includes('binary_tensor_data'));
  const model = (await grpc.call('ModelMetadata', { name: 'affine' })).response;
  assert.deepEqual(
    { name: model.name, versions: model.versions, platform: model.platform },
    { name: 'affine', versions: ['1'], platform: 'onnxruntime_onnx' },
  );
  assert.deepEqual(
    model.inputs.map((input: { name: string; datatype: string; shape: unknown[] }) => [
      input.name,
      input.datatype,
      input.shape.map(Number),
    ]),
    [['x', 'FP32', [-1, 4]]],
  );
  const config = (await grpc.call('ModelConfig', { name: 'affine' })).response.config;
  assert.equal(config.max_batch_size, 8);
  assert.equal(config.input[0].data_type, ONNX_TYPE_FP32_IN_TRITON);
  assert.deepEqual(config.input[0].dims.map(Number), [4]);

  await grpc.call('ModelInfer', affineInfer());
  const stats = (await grpc.call('ModelStatistics', { name: 'affine' })).response.model_stats[0];
  assert.equal(Number(stats.inference_count), 1, 'gRPC requests count in the v2 statistics');
  assert.equal(Number(stats.inference_stats.success.count), 1);
  const index = (await grpc.call('RepositoryIndex', {})).response.models;
  assert.deepEqual(
    index.map((entry: { name: string; version: string; state: string }) => [entry.name, entry.version, entry.state]),
    [['affine', '1', 'READY']],
  );
});

/** Triton's DataType enum value of TYPE_FP32 (model_config.proto). */
const ONNX_TYPE_FP32_IN_TRITON = 11;

test('repository load and unload need the management token as authorization metadata', async (t) => {
  const server = await affineServer(t);
  const grpc = client(t, server);
  const unauthenticated = await grpc.call('RepositoryModelUnload', { model_name: 'affine' });
  assert.equal(unauthenticated.error?.code, status.UNAUTHENTICATED);
  assert.equal(unauthenticated.error?.metadata['bs-error-code'], 'BS_ERR_UNAUTHORIZED');
  const wrong = await grpc.call('RepositoryModelUnload', { model_name: 'affine' }, { authorization: 'Bearer nope' });
  assert.equal(wrong.error?.code, status.UNAUTHENTICATED);
  assert.equal((await grpc.call('RepositoryModelUnload', { model_name: 'affine' }, TOKEN)).error, undefined);
  assert.equal((await grpc.call('ModelReady', { name: 'affine' })).error?.code, status.NOT_FOUND);

  const closed = await affineServer(t, { model_control: 'none' });
  const refused = await client(t, closed).call('RepositoryModelLoad', { model_name: 'affine' }, TOKEN);
  assert.equal(refused.error?.code, status.PERMISSION_DENIED);
});

test('shared memory and log settings answer UNIMPLEMENTED with a message', async (t) => {
  const grpc = client(t, await affineServer(t));
  for (const rpc of ['SystemSharedMemoryStatus', 'CudaSharedMemoryRegister', 'LogSettings']) {
    const answer = await grpc.call(rpc, {});
    assert.equal(answer.error?.code, status.UNIMPLEMENTED, rpc);
    assert.match(answer.error?.details ?? '', /batchserve does not implement/);
  }
});

/** One row of three values per datatype, with their raw (binary) and typed forms. */
const VALUES = {
  BOOL: { values: [true, false, true], typed: 'bool_contents' },
  UINT8: { values: [0, 7, 255], typed: 'uint_contents' },
  UINT16: { values: [0, 7, 65535], typed: 'uint_contents' },
  UINT32: { values: [0, 7, 4294967295], typed: 'uint_contents' },
  UINT64: { values: [0, 7, 2 ** 53], typed: 'uint64_contents' },
  INT8: { values: [-128, 0, 127], typed: 'int_contents' },
  INT16: { values: [-32768, 0, 32767], typed: 'int_contents' },
  INT32: { values: [-2147483648, 0, 2147483647], typed: 'int_contents' },
  INT64: { values: [-(2 ** 53), 0, 2 ** 53], typed: 'int64_contents' },
  FP16: { values: [1.5, -2, 0.25], typed: undefined },
  FP32: { values: [1.5, -2.25, 3.1415927410125732], typed: 'fp32_contents' },
  FP64: { values: [Math.PI, -1e300, 5e-324], typed: 'fp64_contents' },
  BYTES: { values: ['a', '', 'héllo'], typed: 'bytes_contents' },
} as const;

type Datatype = keyof typeof VALUES;

function rawBytes(datatype: Datatype, values: readonly (number | boolean | string)[]): Buffer {
  const numbers = values as number[];
  switch (datatype) {
    case 'BOOL':
      return Buffer.from((values as boolean[]).map((value) => (value ? 1 : 0)));
    case 'BYTES':
      return Buffer.concat(
        (values as string[]).flatMap((value) => {
          const bytes = Buffer.from(value);
          const length = Buffer.alloc(4);
          length.writeUInt32LE(bytes.length);
          return [length, bytes];
        }),
      );
    case 'FP16':
      return Buffer.from(new Uint16Array([0x3e00, 0xc000, 0x3400]).buffer);
    case 'UINT64':
      return Buffer.from(new BigUint64Array(numbers.map(BigInt)).buffer);
    case 'INT64':
      return Buffer.from(new BigInt64Array(numbers.map(BigInt)).buffer);
    default: {
      const Typed = {
        UINT8: Uint8Array,
        UINT16: Uint16Array,
        UINT32: Uint32Array,
        INT8: Int8Array,
        INT16: Int16Array,
        INT32: Int32Array,
        FP32: Float32Array,
        FP64: Float64Array,
      }[datatype];
      return Buffer.from(new Typed(numbers).buffer);
    }
  }
}

test('every datatype, typed and raw: gRPC answers are bit-identical to REST binary answers', async (t) => {
  const root = await tempDir(t);
  const models: string[] = [];
  for (const datatype of Object.keys(ONNX_ELEMENT_TYPE) as Datatype[]) {
    const dir = join(root, datatype);
    await mkdir(dir, { recursive: true });
    const name = `id-${datatype.toLowerCase()}`;
    const packed = await packArchive({
      modelName: name,
      version: '1',
      serializedFile: await writeModel(dir, `${name}.onnx`, identityModel(datatype)),
      exportPath: join(dir, 'store'),
    });
    models.push(`${name}=${packed.path}`);
  }
  const server = await startTestServer(t, { models });
  const grpc = client(t, server);
  for (const [datatype, { values, typed }] of Object.entries(VALUES) as [Datatype, (typeof VALUES)[Datatype]][]) {
    const name = `id-${datatype.toLowerCase()}`;
    const input = { name: 'x', datatype, shape: [1, 3] };
    const raw = await grpc.call('ModelInfer', {
      model_name: name,
      inputs: [input],
      raw_input_contents: [rawBytes(datatype, values)],
    });
    assert.equal(raw.error, undefined, `${datatype} raw: ${raw.error?.details}`);
    const answer = raw.response.raw_output_contents[0] as Buffer;
    assert.deepEqual(
      Buffer.from(answer),
      rawBytes(datatype, values),
      `${datatype}: the identity model answers its input`,
    );
    assert.deepEqual(raw.response.outputs[0].datatype, datatype);

    if (typed === undefined) {
      const refused = await grpc.call('ModelInfer', {
        model_name: name,
        inputs: [{ ...input, contents: { fp32_contents: values } }],
      });
      assert.equal(refused.error?.code, status.INVALID_ARGUMENT, `${datatype} has no typed contents`);
    } else {
      const contents = datatype === 'BYTES' ? (values as readonly string[]).map((value) => Buffer.from(value)) : values;
      const viaTyped = await grpc.call('ModelInfer', {
        model_name: name,
        inputs: [{ ...input, contents: { [typed]: contents } }],
      });
      assert.equal(viaTyped.error, undefined, `${datatype} typed: ${viaTyped.error?.details}`);
      assert.deepEqual(Buffer.from(viaTyped.response.raw_output_contents[0]), Buffer.from(answer), `${datatype} typed`);
    }

    const rest = await call(`${server.urls.inference}/v2/models/${name}/infer`, {
      body: JSON.stringify({
        inputs: [{ ...input, data: datatype === 'FP16' ? [...values] : values }],
        parameters: { binary_data_output: true },
      }),
    });
    assert.equal(rest.status, 200, `${datatype} REST: ${String(rest.body)}`);
    const headerLength = Number(rest.headers['inference-header-content-length']);
    assert.deepEqual((rest.body as Buffer).subarray(headerLength), Buffer.from(answer), `${datatype}: REST = gRPC`);
  }
});

test('ModelInfer: the answer, its version and id in metadata, classification, and Triton’s status codes', async (t) => {
  const server = await affineServer(t);
  const grpc = client(t, server);
  const answer = await grpc.call('ModelInfer', affineInfer({ id: 'req-1' }, [ROW, [0, 0, 0, 1]]));
  assert.equal(answer.error, undefined);
  assert.deepEqual(floats(answer.response.raw_output_contents[0]), [3, 5, 7, 9, 1, 1, 1, 3]);
  assert.deepEqual(
    [answer.response.model_name, answer.response.model_version, answer.response.id],
    ['affine', '1', 'req-1'],
  );
  assert.deepEqual([answer.metadata['x-model-version'], answer.metadata['x-request-id']], ['1', 'req-1']);
  const classified = await grpc.call(
    'ModelInfer',
    affineInfer({ outputs: [{ name: 'y', parameters: { classification: { int64_param: 2 } } }] }),
  );
  assert.equal(classified.error, undefined, classified.error?.details);
  assert.equal(classified.response.outputs[0].datatype, 'BYTES');
  assert.deepEqual(classified.response.outputs[0].shape.map(Number), [1, 2]);

  const refused = async (request: object, code: status, errorCode: string, details: RegExp) => {
    const failed = await grpc.call('ModelInfer', request);
    assert.equal(failed.error?.code, code, JSON.stringify(failed.error));
    assert.equal(failed.error?.metadata['bs-error-code'], errorCode);
    assert.match(failed.error?.details ?? '', details);
  };
  await refused({ ...affineInfer(), model_name: 'nope' }, status.NOT_FOUND, 'BS_ERR_MODEL_NOT_FOUND', /unknown model/);
  await refused({ ...affineInfer(), model_version: '9' }, status.NOT_FOUND, 'BS_ERR_MODEL_NOT_FOUND', /no version "9"/);
  await refused(
    { ...affineInfer(), inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3] }] },
    status.INVALID_ARGUMENT,
    'BS_ERR_INFERENCE_INPUT',
    /needs 12 bytes/,
  );
  await refused(
    { ...affineInfer(), inputs: [{ name: 'z', datatype: 'FP32', shape: [1, 4] }] },
    status.INVALID_ARGUMENT,
    'BS_ERR_INFERENCE_INPUT',
    /input "x" is missing|unknown input "z"/,
  );
});

test('a full queue is UNAVAILABLE "Exceeds maximum queue size"; a queued timeout "Request timeout expired"; a deadline drops the queued request', async (t) => {
  const gate = installGate(t);
  const dir = await tempDir(t);
  const archive = await packAffine(dir, {
    config: `max_batch_size: 1\ndynamic_batching:\n  max_queue_size: 1\n${GATED_CONFIG}`,
    handlerSource: GATED_HANDLER,
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const grpc = client(t, server);
  gate.hold();
  const running = grpc.call('ModelInfer', affineInfer({}, [[1, 0, 0, 0]]));
  await gate.reached(1);
  const queued = grpc.call('ModelInfer', affineInfer({}, [[2, 0, 0, 0]]));
  await waitUntil(() => server.repository.get('affine').queuedRows === 1, 'the second request queued');
  const full = await grpc.call('ModelInfer', affineInfer({}, [[3, 0, 0, 0]]));
  assert.equal(full.error?.code, status.UNAVAILABLE);
  assert.equal(full.error?.details, 'Exceeds maximum queue size');
  assert.equal(full.error?.metadata['grpc-retry-pushback-ms'], '1000', 'server pushback, as Retry-After: 1');
  gate.release();
  gate.release();
  assert.equal((await running).error, undefined);
  assert.equal((await queued).error, undefined);

  const blocker = grpc.call('ModelInfer', affineInfer({}, [[4, 0, 0, 0]]));
  await gate.reached(3);
  const timedOut = grpc.call(
    'ModelInfer',
    affineInfer({ parameters: { timeout: { int64_param: 20_000 } } }, [[5, 0, 0, 0]]),
  );
  const expired = await timedOut;
  assert.equal(expired.error?.code, status.UNAVAILABLE);
  assert.equal(expired.error?.details, 'Request timeout expired');
  assert.equal(expired.error?.metadata['grpc-retry-pushback-ms'], undefined, 'a timeout sheds no load: no pushback');
  const late = await grpc.call('ModelInfer', affineInfer({}, [[6, 0, 0, 0]]), {}, { deadline: Date.now() + 50 });
  assert.equal(late.error?.code, status.DEADLINE_EXCEEDED);
  // The server's deadline runs from when the call arrived, a moment after the client's.
  await waitUntil(() => server.repository.get('affine').queuedRows === 0, 'the late request left the queue');
  gate.release();
  assert.equal((await blocker).error, undefined);
  assert.deepEqual(
    gate.entered.map((values) => values[0]),
    [1, 2, 4],
    'the expired and the late request never ran',
  );
});

test('RepositoryModelLoad applies the config parameter, and refuses a key it cannot set with INVALID_ARGUMENT', async (t) => {
  const server = await affineServer(t);
  const grpc = client(t, server);
  const load = (config: string) =>
    grpc.call('RepositoryModelLoad', { model_name: 'affine', parameters: { config: { string_param: config } } }, TOKEN);
  const applied = await load('{"max_batch_size": 3, "instance_group": [{"count": 2}]}');
  assert.equal(applied.error, undefined);
  const config = (await grpc.call('ModelConfig', { name: 'affine' })).response.config;
  assert.equal(config.max_batch_size, 3);
  assert.equal(config.instance_group[0].count, 2);
  const refused = await load('{"max_batch_size": 5, "backend": "tensorrt"}');
  assert.equal(refused.error?.code, status.INVALID_ARGUMENT);
  assert.match(refused.error?.details ?? '', /backend cannot be set by a load here/);
  assert.equal((await grpc.call('ModelConfig', { name: 'affine' })).response.config.max_batch_size, 3, 'unchanged');
});

test('ModelStreamInfer answers many requests on one stream as they finish; a bad one gets its error_message and the stream goes on', async (t) => {
  const server = await affineServer(t);
  const stream = client(t, server).stream();
  const answers: { error: string; id: string; values: number[] }[] = [];
  stream.on('data', (message) => {
    const response = message.infer_response;
    answers.push({
      error: message.error_message,
      id: response?.id ?? '',
      values: response?.raw_output_contents?.[0] ? floats(response.raw_output_contents[0]) : [],
    });
  });
  const ended = new Promise((done) => stream.on('end', done));
  for (let index = 0; index < 6; index++) {
    const good = index % 2 === 0;
    stream.write(
      good
        ? affineInfer({ id: `s${index}` }, [[index, 0, 0, 0]])
        : { ...affineInfer({ id: `s${index}` }), inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 5] }] },
    );
  }
  stream.end();
  await ended;
  const byId = new Map(answers.map((answer) => [answer.id, answer]));
  assert.equal(answers.length, 6);
  for (let index = 0; index < 6; index++) {
    const answer = byId.get(`s${index}`);
    if (index % 2 === 0) assert.deepEqual(answer, { error: '', id: `s${index}`, values: [index * 2 + 1, 1, 1, 1] });
    else assert.match(answer?.error ?? '', /shape \[1, 5\]/, `s${index}`);
  }
});

test('ModelStreamInfer with 50 requests in flight on one stream emits no MaxListenersExceededWarning', async (t) => {
  const gate = installGate(t);
  const archive = await packAffine(join(await tempDir(t), 'v1'), {
    config: `max_batch_size: 1\n${GATED_CONFIG}`,
    handlerSource: GATED_HANDLER,
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const warnings: Error[] = [];
  const onWarning = (warning: Error): number => warnings.push(warning);
  process.on('warning', onWarning);
  t.after(() => process.off('warning', onWarning));
  const stream = client(t, server).stream();
  let answered = 0;
  stream.on('data', (message) => {
    assert.equal(message.error_message, '');
    answered += 1;
  });
  const ended = new Promise((done) => stream.on('end', done));
  gate.hold();
  for (let index = 0; index < 50; index++) stream.write(affineInfer({ id: `s${index}` }, [[index, 0, 0, 0]]));
  stream.end();
  // One running, 49 queued: all 50 are in flight on the stream at once.
  await waitUntil(() => server.repository.get('affine').queuedRows === 49, 'the stream’s requests queued');
  gate.openAll();
  await ended;
  assert.equal(answered, 50);
  // A warning is emitted on the next tick after the listener that passed the limit.
  await new Promise((done) => setImmediate(done));
  assert.deepEqual(
    warnings.map((warning) => `${warning.name}: ${warning.message}`),
    [],
  );
});

test('versions, sticky splits from metadata, shadows, metrics with a protocol label and the prediction log treat gRPC as REST', async (t) => {
  const root = await tempDir(t);
  const v1 = await packAffine(join(root, 'v1'), { version: '1' });
  const v2 = await packAffine(join(root, 'v2'), { version: '2', offset: 2 });
  const logs = join(root, 'logs');
  const server = await startTestServer(t, {
    models: [`affine=${v1}`, `affine=${v2}`],
    prediction_log: logs,
    model_policies: {
      affine: { traffic: { split: { '1': 50, '2': 50 }, sticky_key: 'header:X-User', shadow: '2' } },
    },
  });
  const grpc = client(t, server);
  const versions = new Map<string, string>();
  for (let user = 0; user < 12; user++) {
    for (let again = 0; again < 2; again++) {
      const answer = await grpc.call('ModelInfer', affineInfer(), { 'x-user': `user-${user}` });
      const version = answer.response.model_version as string;
      assert.equal(answer.metadata['x-model-version'], version);
      assert.deepEqual(floats(answer.response.raw_output_contents[0]), version === '1' ? [3, 5, 7, 9] : [4, 6, 8, 10]);
      const before = versions.get(`user-${user}`);
      assert.ok(before === undefined || before === version, `user-${user} stays on version ${before}`);
      versions.set(`user-${user}`, version);
    }
  }
  assert.equal(new Set(versions.values()).size, 2, 'the split uses both versions');
  const explicit = await grpc.call('ModelInfer', affineInfer({ model_version: '2' }));
  assert.equal(explicit.response.model_version, '2');

  const families = await scrapeMetrics(server);
  const grpcRequests = samplesOf(families, 'batchserve_requests_total', { protocol: 'grpc', status: '200' });
  assert.equal(
    grpcRequests.reduce((sum, sample) => sum + sample.value, 0),
    25,
  );
  const rest = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([ROW]) });
  assert.equal(rest.status, 200);
  const after = await scrapeMetrics(server);
  assert.equal(samplesOf(after, 'batchserve_requests_total', { protocol: 'rest' }).length, 1);
  await waitUntil(
    async () =>
      samplesOf(await scrapeMetrics(server), 'batchserve_shadow_requests_total', { version: '2' }).reduce(
        (sum, sample) => sum + sample.value,
        0,
      ) > 0,
    'the shadow compared gRPC requests served by version 1',
  );
});

test('the standard health service and server reflection are served beside the inference service', async (t) => {
  const server = await affineServer(t);
  const { loadSync } = await import('@grpc/proto-loader');
  const { credentials, loadPackageDefinition } = await import('@grpc/grpc-js');
  const { protoPath } = await import('grpc-health-check');
  const address = server.urls.grpc.replace('grpc://', '');
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- generated client stubs
  const health = loadPackageDefinition(loadSync(protoPath, { keepCase: true, enums: String })) as any;
  const healthClient = new health.grpc.health.v1.Health(address, credentials.createInsecure());
  t.after(() => healthClient.close());
  const check = (service: string) =>
    new Promise<string>((done, fail) =>
      healthClient.Check({ service }, (error: Error | null, answer: { status: string }) =>
        error ? fail(error) : done(answer.status),
      ),
    );
  assert.equal(await check(''), 'SERVING');
  assert.equal(await check('inference.GRPCInferenceService'), 'SERVING');

  const reflectionProto = new URL(
    '../../../node_modules/@grpc/reflection/build/proto/grpc/reflection/v1alpha/reflection.proto',
    import.meta.url,
  ).pathname;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- generated client stubs
  const reflection = loadPackageDefinition(loadSync(reflectionProto, { keepCase: true })) as any;
  const reflectionClient = new reflection.grpc.reflection.v1alpha.ServerReflection(
    address,
    credentials.createInsecure(),
  );
  t.after(() => reflectionClient.close());
  const stream = reflectionClient.ServerReflectionInfo();
  const listed = new Promise<string[]>((done) =>
    stream.on('data', (answer: { list_services_response?: { service: { name: string }[] } }) =>
      done(answer.list_services_response?.service.map((service) => service.name) ?? []),
    ),
  );
  stream.write({ list_services: '' });
  const services = await listed;
  stream.end();
  assert.ok(services.includes('inference.GRPCInferenceService'), services.join(', '));
  assert.ok(services.includes('grpc.health.v1.Health'), services.join(', '));
});

test('large raw inputs move into the worker instance and small ones are copied; every answer is its own', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, {
    width: 2048,
    config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 0\n',
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const grpc = client(t, server);
  const ask = async (value: number) => {
    const answer = await grpc.call('ModelInfer', {
      model_name: 'affine',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2048] }],
      raw_input_contents: [f32(new Array<number>(2048).fill(value))],
    });
    assert.equal(answer.error, undefined, answer.error?.details);
    const values = floats(answer.response.raw_output_contents[0]);
    assert.ok(
      values.every((y) => y === value * 2 + 1),
      `request ${value} got its own answer`,
    );
  };
  // 8 KiB messages: views of buffers grpc-js made for each message, moved into the worker.
  await Promise.all(Array.from({ length: 16 }, (_, value) => ask(value)));
  const small = await grpc.call('ModelInfer', affineInfer());
  assert.equal(small.error?.code, status.INVALID_ARGUMENT, 'the width is 2048 here');
});

test('grpc_max_streams caps the streams open at once: one more is refused with RESOURCE_EXHAUSTED', async (t) => {
  const server = await affineServer(t, { grpc_max_streams: 1 });
  const grpc = client(t, server);
  const first = grpc.stream();
  const answered = new Promise((done) => first.once('data', done));
  first.write(affineInfer({ id: 'a' }));
  await answered;
  const second = grpc.stream();
  const refused = await new Promise<{ code: number; details: string }>((done) => second.on('error', done));
  assert.equal(refused.code, status.RESOURCE_EXHAUSTED);
  assert.match(refused.details, /1 streams are open, the most this server takes \(grpc_max_streams\)/);
  first.end();
});

test('a message larger than the model’s largest batch is refused with RESOURCE_EXHAUSTED before it is decoded', async (t) => {
  const server = await affineServer(t);
  const grpc = client(t, server);
  // affine: max_batch_size 8 × 4 FP32 = 128 bytes of tensor, 64 KiB of room for the rest.
  const oversized = await grpc.call('ModelInfer', affineInfer({ id: 'x'.repeat(70_000) }));
  assert.equal(oversized.error?.code, status.RESOURCE_EXHAUSTED);
  assert.equal(oversized.error?.metadata['bs-error-code'], 'BS_ERR_PAYLOAD_TOO_LARGE');
  assert.match(oversized.error?.details ?? '', /takes at most 65664 \(its largest batch, max_batch_size 8/);
  assert.equal((await grpc.call('ModelInfer', affineInfer({ id: 'x'.repeat(60_000) }))).error, undefined);
});

test('metadata over grpc_max_metadata_size is refused with RESOURCE_EXHAUSTED naming the limit, unary and streamed', async (t) => {
  const server = await affineServer(t);
  const grpc = client(t, server);
  assert.equal((await grpc.call('ModelInfer', affineInfer(), { 'x-note': 'a'.repeat(8_000) })).error, undefined);
  const refused = await grpc.call('ModelInfer', affineInfer(), { 'x-note': 'a'.repeat(60 * 1024) });
  assert.equal(refused.error?.code, status.RESOURCE_EXHAUSTED, refused.error?.details);
  assert.match(refused.error?.details ?? '', /over the 16384 this server takes \(grpc_max_metadata_size\)/);
  // Past ~64 KiB, Node's HTTP/2 (nghttp2) refuses the header block itself, before any code of
  // ours or grpc-js runs: the call fails, and the server goes on serving.
  const huge = await grpc.call('ModelInfer', affineInfer(), { 'x-note': 'a'.repeat(1024 ** 2) });
  assert.notEqual(huge.error, undefined);
  const stream = grpc.stream({ 'x-note': 'a'.repeat(60 * 1024) });
  const streamed = await new Promise<{ code: number; details: string }>((done) => stream.on('error', done));
  assert.equal(streamed.code, status.RESOURCE_EXHAUSTED);
  assert.equal((await grpc.call('ServerLive', {})).response.live, true, 'the connection still serves');
});

test('bad names and shapes get INVALID_ARGUMENT or NOT_FOUND with short, escaped messages', async (t) => {
  const server = await affineServer(t);
  const grpc = client(t, server);
  const renamed = await grpc.call('ModelInfer', {
    ...affineInfer(),
    inputs: [{ name: 'y', datatype: 'FP32', shape: [1, 4] }],
  });
  assert.equal(renamed.error?.code, status.INVALID_ARGUMENT);
  assert.match(renamed.error?.details ?? '', /^unknown input "y"/, 'the name sent is reported, not the one missing');

  const nul = await grpc.call('ModelInfer', affineInfer({ model_name: 'aff\0ine' }));
  assert.equal(nul.error?.code, status.NOT_FOUND);
  assert.ok(nul.error?.details.includes('"aff\\u0000ine"'), nul.error?.details);
  assert.ok(!nul.error?.details.includes('\0'), 'no raw NUL in the answer');

  const longName = await grpc.call(
    'ModelInfer',
    affineInfer({ model_name: 'm'.repeat(140_000) }),
    {},
    {
      deadline: Date.now() + 10_000,
    },
  );
  assert.equal(longName.error?.code, status.NOT_FOUND, longName.error?.details);
  assert.ok((longName.error?.details.length ?? Infinity) < 400, 'the name is cut in the answer');

  for (const shape of [
    [1, 0],
    [0, 4],
  ]) {
    const empty = await grpc.call('ModelInfer', {
      ...affineInfer(),
      inputs: [{ name: 'x', datatype: 'FP32', shape }],
      raw_input_contents: [Buffer.alloc(0)],
    });
    assert.equal(empty.error?.code, status.INVALID_ARGUMENT, `[${shape.join(', ')}]: ${empty.error?.details}`);
  }
  const wide = await grpc.call(
    'ModelInfer',
    { ...affineInfer(), inputs: [{ name: 'x', datatype: 'FP32', shape: Array.from({ length: 20_000 }, () => 1) }] },
    {},
    { deadline: Date.now() + 10_000 },
  );
  assert.equal(wide.error?.code, status.INVALID_ARGUMENT, wide.error?.details);
  assert.ok((wide.error?.details.length ?? Infinity) < 400, wide.error?.details.slice(0, 200));
});

test('errors that echo a large input arrive at once, short, and the same connection then serves a good call', async (t) => {
  // A variable width: no message limit from the model, so each 140 KB request is decoded and
  // its error built; only max_request_size bounds it.
  const archive = await packAffine(join(await tempDir(t), 'wide'), { width: 'w' });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const grpc = client(t, server);
  const big = 'm'.repeat(140_000);
  const x = (fields: Record<string, unknown>) => ({
    ...affineInfer(),
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4], ...fields }],
  });
  const hostile: [string, object, number][] = [
    ['a 140 KB model name', affineInfer({ model_name: big }), status.NOT_FOUND],
    ['a 140 KB model version', affineInfer({ model_version: big }), status.NOT_FOUND],
    ['a 20,000-dimension shape', x({ shape: Array.from({ length: 20_000 }, () => 1) }), status.INVALID_ARGUMENT],
    ['a 140 KB input name', x({ name: big }), status.INVALID_ARGUMENT],
    ['a 140 KB input name with contents', x({ name: big, contents: { fp32_contents: ROW } }), status.INVALID_ARGUMENT],
    ['a 140 KB datatype', x({ datatype: big }), status.INVALID_ARGUMENT],
    ['a 140 KB output name', affineInfer({ outputs: [{ name: big }] }), status.INVALID_ARGUMENT],
    ['a 140 KB output name twice', affineInfer({ outputs: [{ name: big }, { name: big }] }), status.INVALID_ARGUMENT],
    [
      'a 140 KB classified output name',
      affineInfer({ outputs: [{ name: big, parameters: { classification: { string_param: '1' } } }] }),
      status.INVALID_ARGUMENT,
    ],
    ['a 140 KB priority', affineInfer({ parameters: { priority: { string_param: big } } }), status.INVALID_ARGUMENT],
    ['a 140 KB parameter name', affineInfer({ parameters: { [big]: {} } }), status.INVALID_ARGUMENT],
  ];
  for (const [what, request, code] of hostile) {
    const started = Date.now();
    const refused = await grpc.call('ModelInfer', request, {}, { deadline: Date.now() + 5_000 });
    assert.equal(refused.error?.code, code, `${what}: ${refused.error?.details.slice(0, 200)}`);
    assert.ok(Date.now() - started < 2_000, `${what}: answered at once, not at the deadline`);
    assert.ok((refused.error?.details.length ?? Infinity) < 400, `${what}: the echo is cut`);
    const next = await grpc.call('ModelInfer', affineInfer(), {}, { deadline: Date.now() + 5_000 });
    assert.equal(next.error, undefined, `after ${what}, the same connection serves`);
  }
});

test('a zero-size dimension of an image-shaped input, the batch one too, is a 400 over REST and INVALID_ARGUMENT over gRPC', async (t) => {
  const dir = await tempDir(t);
  const serializedFile = await writeModel(dir, 'image.onnx', affineModel([3, 'height', 'width']));
  await writeFile(join(dir, 'image-config.yaml'), 'max_batch_size: 8\n');
  const { path } = await packArchive({
    modelName: 'image',
    serializedFile,
    configFile: join(dir, 'image-config.yaml'),
    exportPath: join(dir, 'store'),
  });
  const server = await startTestServer(t, { models: [`image=${path}`] });
  const grpc = client(t, server);
  const url = `${server.urls.inference}/v2/models/image/infer`;
  const input = (shape: number[]) => ({ name: 'x', datatype: 'FP32', shape });
  const elements = (shape: number[]) => shape.reduce((a, b) => a * b, 1);
  for (const shape of [
    [1, 3, 0, 192],
    [1, 3, 192, 0],
    [0, 3, 8, 8],
  ]) {
    const rest = await call(url, { body: JSON.stringify({ inputs: [{ ...input(shape), data: [] }] }) });
    assert.equal(rest.status, 400, JSON.stringify(rest.body));
    assert.deepEqual(Object.keys(rest.body), ['error', 'code']);
    assert.equal(rest.body.code, 'BS_ERR_INFERENCE_INPUT');
    const refused = await grpc.call('ModelInfer', {
      model_name: 'image',
      inputs: [input(shape)],
      raw_input_contents: [Buffer.alloc(0)],
    });
    assert.equal(refused.error?.code, status.INVALID_ARGUMENT, `[${shape.join(', ')}]: ${refused.error?.details}`);
    assert.equal(refused.error?.metadata['bs-error-code'], 'BS_ERR_INFERENCE_INPUT');
  }
  const shape = [1, 3, 2, 2];
  const served = await grpc.call('ModelInfer', {
    model_name: 'image',
    inputs: [input(shape)],
    raw_input_contents: [f32(Array.from({ length: elements(shape) }, () => 1))],
  });
  assert.equal(served.error, undefined, 'a non-empty image is served');
  assert.deepEqual(
    floats(served.response.raw_output_contents[0]),
    Array.from({ length: elements(shape) }, () => 3),
  );
});
