import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { createServer, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { GrpcStreamTransport } from '../../src/bench/grpc-stream-transport.js';
import { runLoad, type LoadOptions } from '../../src/bench/load-generator.js';
import { payloadFromFile, randomPayload, type ModelMetadata, type RequestPayload } from '../../src/bench/payload.js';
import type { LoadLevel } from '../../src/bench/report-types.js';
import type { Outcome, RequestSlot } from '../../src/bench/request-slot.js';
import { RemoteTarget } from '../../src/bench/targets.js';
import { inferenceProtocol } from '../../src/protocol/grpc-messages.js';
import { packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

/** Each forward pass takes ~20 ms and runs alone. */
const SLOW_HANDLER = `export async function inference(inputs, context) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  return context.builtins.tensor.inference(inputs, context);
}
`;
const SLOW_CONFIG = 'max_batch_size: 1\ndynamic_batching:\n  max_queue_delay: 0\n';
const PROTOCOLS = ['grpc', 'grpc-stream'] as const;

/** An affine model served on gRPC, and its metadata as the bench reads it there. */
async function grpcServer(
  t: TestContext,
  affine: Parameters<typeof packAffine>[1] = {},
): Promise<{ url: string; target: RemoteTarget; metadata: ModelMetadata }> {
  const archive = await packAffine(await tempDir(t), affine);
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const target = new RemoteTarget(server.urls.grpc, 'affine');
  t.after(() => target.close());
  return { url: server.urls.grpc, target, metadata: await target.metadata() };
}

function options(level: LoadLevel, extra: Partial<LoadOptions> = {}): LoadOptions {
  return {
    level,
    warmupMs: 20,
    windowMs: 100,
    minWindows: 2,
    maxWindows: 50,
    stabilityPct: 0,
    requestTimeoutMs: 10_000,
    ...extra,
  };
}

const closed = (concurrency: number): LoadLevel => ({ kind: 'concurrency', concurrency });
const open: LoadLevel = { kind: 'rate', rate: 1000, arrival: 'constant' };

test('grpc and grpc-stream, closed and open loop: every request answered and counted', async (t) => {
  // 80 KB rows: a stream's answers arrive split over several DATA frames, or several in one.
  const { url, target, metadata } = await grpcServer(t, { width: 20_000 });
  assert.deepEqual(metadata.inputs, [{ name: 'x', datatype: 'FP32', shape: [-1, 20_000] }], 'metadata over gRPC');
  const successes = async (): Promise<number> => (await target.stats())[0]?.inference_stats.success.count ?? 0;
  const before = await successes();
  for (const protocol of PROTOCOLS) {
    const payload = randomPayload(metadata, { protocol, clientBatch: 2, seed: 3 });
    const levels: LoadLevel[] = [closed(4), open];
    for (const level of levels) {
      const result = await runLoad(url, payload, options(level, { maxRequests: 40 }));
      const what = `${protocol} ${level.kind}: ${JSON.stringify(result.errors)}`;
      // An open loop's requests already sent when the 40th is measured are counted too.
      assert.ok(result.requests >= 40, what);
      assert.deepEqual([result.errorCount, result.latency.count], [0, result.requests], what);
      assert.equal(result.rows, 2 * result.requests);
      assert.ok(result.latency.p50 > 0);
      // Unary answers name their version in x-model-version, stream answers in model_version.
      assert.deepEqual(result.versions, { '1': result.requests }, what);
    }
  }
  const after = await successes();
  assert.ok(after - before >= 160, `the server answered ${after - before}`);
});

test('failures are counted by kind: a call’s gRPC status, a stream answer’s error_message, no connection', async (t) => {
  const { url, metadata } = await grpcServer(t);
  const missing = { ...metadata, name: 'missing' };
  const expected = { grpc: 'NOT_FOUND', 'grpc-stream': 'error_message' };
  for (const protocol of PROTOCOLS) {
    const payload = randomPayload(missing, { protocol, clientBatch: 1 });
    const result = await runLoad(url, payload, options(closed(2), { maxRequests: 30 }));
    assert.deepEqual(result.errors, { [expected[protocol]]: 30 }, protocol);
    assert.deepEqual([result.requests, result.latency.count, result.throughput], [30, 0, 0]);

    // Nothing listens on port 1 (see load-generator.test.ts).
    const refused = await runLoad('grpc://127.0.0.1:1', payload, options(closed(2), { maxRequests: 10 }));
    assert.deepEqual(refused.errors, { connection: 10 }, protocol);
  }
});

test('gRPC requests slower than the timeout count as "timeout"; a stream cut for one is reopened', async (t) => {
  const { url, metadata } = await grpcServer(t, { handlerSource: SLOW_HANDLER, config: SLOW_CONFIG });
  for (const protocol of PROTOCOLS) {
    const payload = randomPayload(metadata, { protocol, clientBatch: 1 });
    const level = options(closed(2), { requestTimeoutMs: 8, windowMs: 50, maxWindows: 2 });
    const result = await runLoad(url, payload, level);
    // Two slots, each timed out more than once: each was sent again (a stream reopened).
    assert.ok((result.errors.timeout ?? 0) >= 4, `${protocol}: ${JSON.stringify(result.errors)}`);
    assert.equal(result.latency.count, 0);
  }
});

test('a gRPC protocol needs a grpc:// URL, and a REST one an http:// URL', async () => {
  const metadata: ModelMetadata = { name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [1] }], outputs: [] };
  const grpc = randomPayload(metadata, { protocol: 'grpc', clientBatch: 1 });
  const rest = randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 1 });
  await assert.rejects(runLoad('http://127.0.0.1:1', grpc, options(closed(1))), { code: 'BS_ERR_USAGE' });
  await assert.rejects(runLoad('grpc://127.0.0.1:1', rest, options(closed(1))), { code: 'BS_ERR_USAGE' });
  await assert.rejects(runLoad('grpc://127.0.0.1', grpc, options(closed(1))), { code: 'BS_ERR_USAGE' });
});

/** A gRPC payload's ModelInferRequest, decoded. */
function decoded(payload: RequestPayload): {
  model_name: string;
  inputs: { name: string; shape: number[] }[];
  raw: Buffer[];
} {
  const type = inferenceProtocol().types.lookupType('inference.ModelInferRequest');
  const message = type.toObject(type.decode(payload.body), { longs: Number });
  return { model_name: message.model_name, inputs: message.inputs, raw: message.raw_input_contents };
}

test('gRPC payloads: the v2-binary tensors, a v2 JSON file’s inputs, or raw bytes, in raw_input_contents', async (t) => {
  const metadata: ModelMetadata = {
    name: 'affine',
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
    outputs: [],
  };
  const binary = randomPayload(metadata, { protocol: 'v2-binary', clientBatch: 2, seed: 7 });
  for (const protocol of PROTOCOLS) {
    const payload = randomPayload(metadata, { protocol, clientBatch: 2, seed: 7 });
    assert.equal(
      payload.path,
      `/inference.GRPCInferenceService/${protocol === 'grpc' ? 'ModelInfer' : 'ModelStreamInfer'}`,
    );
    const request = decoded(payload);
    assert.deepEqual(request.inputs, [{ name: 'x', datatype: 'FP32', shape: [2, 4] }]);
    assert.deepEqual(request.raw[0], binary.body.subarray(binary.body.length - 32), 'the same tensor bytes');
  }

  const dir = await tempDir(t);
  const json = join(dir, 'request.json');
  await writeFile(
    json,
    JSON.stringify({
      inputs: [
        {
          name: 'x',
          datatype: 'FP32',
          shape: [2, 4],
          data: [
            [1, 2, 3, 4],
            [5, 6, 7, 8],
          ],
        },
      ],
    }),
  );
  const fromJson = await payloadFromFile(json, metadata, 'grpc');
  assert.equal(fromJson.rows, 2);
  assert.deepEqual(decoded(fromJson).raw, [Buffer.from(new Float32Array([1, 2, 3, 4, 5, 6, 7, 8]).buffer)]);
  const raw = join(dir, 'rows.bin');
  await writeFile(raw, Buffer.from(new Float32Array(12).fill(0.5).buffer));
  const fromRaw = await payloadFromFile(raw, metadata, 'grpc-stream');
  assert.equal(fromRaw.rows, 3);
  assert.deepEqual(decoded(fromRaw).inputs, [{ name: 'x', datatype: 'FP32', shape: [3, 4] }]);
  const variable: ModelMetadata = { ...metadata, inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, -1] }] };
  await assert.rejects(payloadFromFile(raw, variable, 'grpc'), { code: 'BS_ERR_USAGE' }, 'no shape to send');
});

/** gRPC's length-prefixed frames of a body, joined first. */
function frames(body: Buffer): Buffer[] {
  const messages: Buffer[] = [];
  for (let at = 0; at + 5 <= body.length; at += 5 + body.readUInt32BE(at + 1)) {
    messages.push(body.subarray(at + 5, at + 5 + body.readUInt32BE(at + 1)));
  }
  return messages;
}

test('grpc-stream matches answers to requests by their ids, in any order, however the bytes are cut', async (t) => {
  const { types } = inferenceProtocol();
  const requestType = types.lookupType('inference.ModelInferRequest');
  const answerType = types.lookupType('inference.ModelStreamInferResponse');
  // A scripted server: once three requests are in, it answers the last first, the middle one
  // with an error_message, and writes the three answers a few bytes at a time.
  const server = createServer();
  server.on('stream', (stream: ServerHttp2Stream) => {
    stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
    let received = Buffer.alloc(0);
    stream.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const ids = frames(received).map((message) => (requestType.decode(message) as unknown as { id: string }).id);
      if (ids.length < 3) return;
      const answers = ids.reverse().map((id) => {
        const answer = { error_message: id === '1' ? 'boom' : '', infer_response: { model_name: 'm', id } };
        const message = answerType.encode(answerType.fromObject(answer)).finish();
        const frame = Buffer.alloc(5 + message.length);
        frame.writeUInt32BE(message.length, 1);
        frame.set(message, 5);
        return frame;
      });
      const bytes = Buffer.concat(answers);
      const writeFrom = (at: number): void => {
        if (at >= bytes.length) return;
        stream.write(bytes.subarray(at, at + 7));
        setImmediate(() => writeFrom(at + 7));
      };
      writeFrom(0);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());

  const settled: [RequestSlot, Outcome][] = [];
  let allSettled = (): void => undefined;
  const threeSettled = new Promise<void>((resolve) => (allSettled = resolve));
  const transport = new GrpcStreamTransport(
    {
      url: `grpc://127.0.0.1:${(server.address() as AddressInfo).port}`,
      path: '/inference.GRPCInferenceService/ModelStreamInfer',
      bodies: [requestType.encode(requestType.fromObject({ model_name: 'm' })).finish()],
    },
    (slot, outcome) => {
      if (settled.push([slot, outcome]) === 3) allSettled();
    },
  );
  t.after(() => transport.close());
  const slots = [transport.sharedSlot(), transport.sharedSlot(), transport.sharedSlot()];
  for (const slot of slots) slot.send();
  await threeSettled;
  assert.deepEqual(
    settled.map(([slot, outcome]) => [slots.indexOf(slot), outcome]),
    [
      [2, undefined],
      [1, 'error_message'],
      [0, undefined],
    ],
  );
});
