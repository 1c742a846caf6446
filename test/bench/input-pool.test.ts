import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { filePayloadPool, randomPayloadPool, valuesNeeded } from '../../src/bench/input-pool.js';
import type { ModelMetadata } from '../../src/bench/payload.js';
import type { PointResult, Protocol } from '../../src/bench/report-types.js';
import { renderHtml } from '../../src/bench/report-html.js';
import { renderCsv, renderTable } from '../../src/bench/report-table.js';
import { buildReport } from '../../src/bench/report.js';
import { runSweep } from '../../src/bench/sweep.js';
import { RemoteTarget } from '../../src/bench/targets.js';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const METADATA: ModelMetadata = {
  name: 'affine',
  inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
  outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
};

test('a pool of N random inputs is N distinct bodies with one set of headers', () => {
  const single = randomPayloadPool(METADATA, { protocol: 'v2-binary', clientBatch: 2, seed: 1 }, 1);
  assert.equal(single.bodies, undefined);
  const pool = randomPayloadPool(METADATA, { protocol: 'v2-binary', clientBatch: 2, seed: 1 }, 5);
  assert.equal(pool.bodies?.length, 5);
  assert.equal(new Set(pool.bodies?.map((body) => body.toString('hex'))).size, 5);
  assert.deepEqual(pool.body, single.body, 'the first is the payload without a pool');
  assert.equal(pool.rows, 2);
});

test("a file's variants change one value per bit of the variant number, as little as the datatype allows", async (t) => {
  const dir = await tempDir(t);
  const json = join(dir, 'request.json');
  await writeFile(json, affineRequest([[1, 0.5, -3, 7]]));
  const pool = await filePayloadPool(json, METADATA, 'v2-json', 4);
  const data = (pool.bodies ?? []).map(
    (body) => (JSON.parse(body.toString()) as { inputs: { data: number[]; shape: number[] }[] }).inputs[0],
  );
  assert.deepEqual(data[0]?.data, [1, 0.5, -3, 7]);
  assert.deepEqual(data[1]?.data, [0, 0.5, -3, 7]);
  assert.deepEqual(data[2]?.data, [1, 0.5 * (1 + 2 ** -9), -3, 7]);
  assert.deepEqual(data[3]?.data, [0, 0.5 * (1 + 2 ** -9), -3, 7]);
  assert.deepEqual(data[3]?.shape, [1, 4], 'shapes stay');

  const raw = join(dir, 'request.bin');
  await writeFile(raw, Buffer.from(new Float32Array([1, 2, 3, 4]).buffer));
  const rawPool = await filePayloadPool(raw, METADATA, 'v2-binary', 3);
  const floats = (rawPool.bodies ?? []).map((body) => [...new Float32Array(new Uint8Array(body).buffer)]);
  assert.deepEqual(floats[0], [1, 2, 3, 4]);
  assert.notEqual(floats[1]?.[0], 1);
  assert.ok(Math.abs((floats[1]?.[0] ?? 0) - 1) < 1e-6, 'one unit in the last place');
  assert.deepEqual(floats[1]?.slice(1), [2, 3, 4]);
  assert.deepEqual(floats[2]?.slice(0, 1), [1]);
  assert.notEqual(floats[2]?.[1], 2);

  await assert.rejects(filePayloadPool(json, METADATA, 'v2-json', 64), /needs 6 values to vary/);
  const image = join(dir, 'cat.png');
  await writeFile(image, Buffer.from([0x89, 0x50, 0x4e, 0x47]));
  await assert.rejects(filePayloadPool(image, METADATA, 'torchserve', 2), /an image cannot be varied/);
  const one = await filePayloadPool(image, METADATA, 'torchserve', 1);
  assert.deepEqual(
    [one.body, one.bodies, one.headers],
    [await readFile(image), undefined, { 'content-type': 'image/png' }],
  );
  assert.equal(valuesNeeded(1), 0);
  assert.equal(valuesNeeded(4), 2);
  assert.equal(valuesNeeded(5), 3);
});

async function cachedTarget(t: TestContext, over: 'rest' | 'grpc' = 'rest'): Promise<RemoteTarget> {
  const archive = await packAffine(await tempDir(t), {
    config: 'max_batch_size: 8\nresponse_cache:\n  enable: true\n',
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const target = new RemoteTarget(over === 'rest' ? server.urls.inference : server.urls.grpc, 'affine');
  t.after(() => target.close());
  // A request the pool never sends, so the cache is warm and the server's first-request costs are paid.
  await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[9, 9, 9, 9]]) });
  return target;
}

async function sweepWithPool(
  target: RemoteTarget,
  inputPool: number,
  protocol: Protocol = 'v2-binary',
): Promise<PointResult> {
  const { points } = await runSweep(target, {
    levels: [{ kind: 'concurrency', concurrency: protocol === 'v2-binary' ? 1 : 3 }],
    protocol,
    clientBatch: 1,
    inputPool,
    gpu: false,
    load: {
      warmupMs: 0,
      windowMs: 100,
      minWindows: 3,
      maxWindows: 100,
      stabilityPct: 0,
      maxRequests: 60,
      requestTimeoutMs: 10_000,
    },
  });
  assert.equal(points.length, 1);
  return points[0] as PointResult;
}

test('bench --input-pool against a cached model: the hit ratio is about 1 − N/requests, and 0 with a pool larger than the run', async (t) => {
  const target = await cachedTarget(t);
  const small = await sweepWithPool(target, 4);
  const lookups = small.serverSide?.requests ?? 0;
  const ratio = small.serverSide?.cacheHitRatio;
  assert.ok(lookups >= 60, `${lookups} lookups, ${small.requests} measured`);
  assert.ok(ratio !== undefined && ratio >= 1 - 4 / lookups - 1e-9 && ratio <= 1, `hit ratio ${ratio}`);

  // A server of its own: the first seeds of any pool are the same, and the first server has them cached.
  const large = await sweepWithPool(await cachedTarget(t), 1000);
  assert.equal(large.serverSide?.cacheHitRatio, 0, 'every request a new input');

  const report = buildReport({
    target: { url: target.inferenceUrl, model: 'affine', protocol: 'v2-binary' },
    points: [small, large],
    serverSamples: [],
  });
  const table = renderTable(report);
  assert.match(table, /cache hits/);
  assert.match(renderHtml(report), /<th[^>]*>cache hits<\/th>/);
  assert.match(renderCsv(report).split('\r\n')[0] ?? '', /,server_cache_hit_ratio,/);
  assert.match(table, /0\.0%/);
  assert.equal(report.points[0]?.serverSide?.cacheHitRatio, ratio, 'the JSON report carries it');
});

test('without a response cache the report has no hit ratio and no cache column', async (t) => {
  const archive = await packAffine(await tempDir(t));
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const target = new RemoteTarget(server.urls.inference, 'affine');
  t.after(() => target.close());
  const point = await sweepWithPool(target, 4);
  assert.equal(point.serverSide?.cacheHitRatio, undefined);
  const report = buildReport({
    target: { model: 'affine', protocol: 'v2-binary' },
    points: [point],
    serverSamples: [],
  });
  assert.doesNotMatch(renderTable(report), /cache hits/);
});

test('over gRPC, unary and streamed, the pool rotates across every client: each request a new input', async (t) => {
  for (const protocol of ['grpc', 'grpc-stream'] as const) {
    const point = await sweepWithPool(await cachedTarget(t, 'grpc'), 1000, protocol);
    assert.equal(point.errorCount, 0, protocol);
    assert.equal(point.serverSide?.cacheHitRatio, 0, protocol);
    const repeated = await sweepWithPool(await cachedTarget(t, 'grpc'), 2, protocol);
    assert.ok((repeated.serverSide?.cacheHitRatio ?? 0) > 0.5, `${protocol}: ${repeated.serverSide?.cacheHitRatio}`);
  }
});
