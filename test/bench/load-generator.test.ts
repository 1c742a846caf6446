import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isStable, runLoad, type LoadOptions } from '../../src/bench/load-generator.js';
import { fetchModelMetadata, randomPayload, type RequestPayload } from '../../src/bench/payload.js';
import type { LoadLevel } from '../../src/bench/report-types.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

type Context = Parameters<typeof tempDir>[0];

/** Each forward pass takes ~20 ms and runs alone: the server manages about 50 requests/s. */
const SLOW_HANDLER = `export async function inference(inputs, context) {
  await new Promise((resolve) => setTimeout(resolve, 20));
  return context.builtins.tensor.inference(inputs, context);
}
`;
const SLOW_CONFIG = 'max_batch_size: 1\ndynamic_batching:\n  max_queue_delay: 0\n';

async function affineBase(t: Context, slow = false): Promise<string> {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, slow ? { handlerSource: SLOW_HANDLER, config: SLOW_CONFIG } : {});
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  return server.urls.inference;
}

async function payloadFor(base: string, protocol: 'v2-binary' | 'v2-json', clientBatch = 1): Promise<RequestPayload> {
  return randomPayload(await fetchModelMetadata(base, 'affine'), { protocol, clientBatch, seed: 3 });
}

function options(level: LoadLevel, extra: Partial<LoadOptions> = {}): LoadOptions {
  return {
    level,
    warmupMs: 100,
    windowMs: 200,
    minWindows: 2,
    maxWindows: 3,
    stabilityPct: 0,
    requestTimeoutMs: 10_000,
    ...extra,
  };
}

const closed = (concurrency: number): LoadLevel => ({ kind: 'concurrency', concurrency });

/**
 * Nothing listens on port 1, and no server can be handed it while the tests run: port 0 only
 * ever yields ephemeral ports. (A port freed by closing a server could be taken in between.)
 */
const CLOSED_PORT_URL = 'http://127.0.0.1:1';

test('closed loop: binary and JSON payloads all answer 200, every request counted', async (t) => {
  const base = await affineBase(t);
  for (const protocol of ['v2-binary', 'v2-json'] as const) {
    const windows: number[] = [];
    const result = await runLoad(
      base,
      await payloadFor(base, protocol, 2),
      options(closed(4), { onWindow: (progress) => windows.push(progress.windows) }),
    );
    assert.equal(result.errorCount, 0, `${protocol}: ${JSON.stringify(result.errors)}`);
    assert.ok(result.requests > 20, `${protocol}: ${result.requests} requests`);
    assert.equal(result.latency.count, result.requests);
    assert.equal(result.rows, result.requests * 2);
    assert.equal(result.windows, 3, 'stabilityPct 0 never agrees: runs maxWindows');
    assert.equal(result.stable, false);
    assert.deepEqual(windows, [1, 2, 3]);
    assert.ok(Math.abs(result.durationSeconds - 0.6) < 0.2, `${result.durationSeconds} s`);
    assert.ok(Math.abs(result.throughput - result.requests / result.durationSeconds) < 1e-6);
    assert.equal(result.itemsPerSecond, result.throughput * 2);
    assert.ok(result.latency.p50 > 0 && result.latency.p50 <= result.latency.p99);
    assert.ok(result.latency.p99 <= result.latency.max);
  }
});

test('open loop: latency runs from the scheduled send, so a saturated server shows its queue', async (t) => {
  const base = await affineBase(t, true);
  const payload = await payloadFor(base, 'v2-binary');
  const run = (rate: number): ReturnType<typeof runLoad> =>
    runLoad(
      base,
      payload,
      options(
        { kind: 'rate', rate, arrival: 'constant' },
        { warmupMs: 200, windowMs: 430, minWindows: 3, maxWindows: 3, stabilityPct: 25 },
      ),
    );
  const light = await run(20);
  const heavy = await run(150);
  assert.equal(light.errorCount + heavy.errorCount, 0, JSON.stringify([light.errors, heavy.errors]));
  assert.ok(light.latency.p99 < 150, `under capacity p99 ${light.latency.p99} ms`);
  assert.ok(light.throughput > 15 && light.throughput < 25, `${light.throughput}/s offered 20/s`);
  // About 50/s served of 150/s offered: the k-th request is answered at ~k/50 s, k/75 s after
  // it was due, so the last ones answered (k ≈ 75 after 1.5 s) had waited about 1 s.
  assert.ok(heavy.throughput < 80, `${heavy.throughput}/s served`);
  assert.ok(
    heavy.latency.p99 > 5 * light.latency.p99,
    `p99 ${heavy.latency.p99} ms at 150/s vs ${light.latency.p99} ms at 20/s`,
  );
  // A client that waited for answers before sending would report ~20 ms × its concurrency.
  assert.ok(heavy.latency.max > 600, `max ${heavy.latency.max} ms`);
  assert.equal(heavy.stable, false, 'a growing queue never settles');
});

test('errors are counted by kind: an HTTP status, a refused connection', async (t) => {
  const base = await affineBase(t);
  const payload = await payloadFor(base, 'v2-json');
  // maxRequests keeps these short: errors come back as fast as the CPU allows.
  const missing = await runLoad(
    base,
    { ...payload, path: '/v2/models/missing/infer' },
    options(closed(2), { maxRequests: 100, maxWindows: 50 }),
  );
  assert.equal(missing.requests, 100);
  assert.deepEqual(missing.errors, { '404': 100 });
  assert.equal(missing.errorCount, missing.requests);
  assert.equal(missing.latency.count, 0, 'errors have no latency');
  assert.equal(missing.throughput, 0);

  const refused = await runLoad(CLOSED_PORT_URL, payload, options(closed(2), { maxRequests: 50, maxWindows: 50 }));
  assert.deepEqual(refused.errors, { connection: 50 });
  const refusedOpen = await runLoad(CLOSED_PORT_URL, payload, options({ kind: 'rate', rate: 200, arrival: 'poisson' }));
  assert.ok((refusedOpen.errors.connection ?? 0) > 0, JSON.stringify(refusedOpen.errors));
});

test('requests slower than the timeout count as "timeout", in both loops', async (t) => {
  const base = await affineBase(t, true);
  const payload = await payloadFor(base, 'v2-binary');
  for (const level of [closed(2), { kind: 'rate', rate: 40, arrival: 'constant' } as const]) {
    const result = await runLoad(base, payload, options(level, { requestTimeoutMs: 8 }));
    assert.ok((result.errors.timeout ?? 0) > 0, `${level.kind}: ${JSON.stringify(result.errors)}`);
    assert.equal(result.latency.count, 0);
  }
});

test('the stability rule: throughput and p99 of the last windows within ±pct of their mean', () => {
  const steady = [
    { throughput: 50, p99Ms: 90 },
    { throughput: 100, p99Ms: 10 },
    { throughput: 104, p99Ms: 10.5 },
    { throughput: 97, p99Ms: 9.6 },
  ];
  assert.equal(isStable(steady, 3, 10), true);
  assert.equal(isStable(steady, 4, 10), false, 'the first window is off');
  assert.equal(isStable(steady, 3, 3), false);
  assert.equal(isStable(steady.slice(0, 2), 3, 10), false, 'too few windows');
  assert.equal(isStable([...steady, { throughput: 100, p99Ms: 14 }], 3, 10), false, 'p99 drifted');
  assert.equal(isStable([...steady, { throughput: 130, p99Ms: 10 }], 3, 10), false, 'throughput drifted');
});

test('a steady load stops as soon as its windows agree; a varying one runs to maxWindows', async (t) => {
  const base = await affineBase(t, true);
  const payload = await payloadFor(base, 'v2-binary');
  // ±100%: any two windows agree, so the run stops at minWindows.
  const early = await runLoad(base, payload, options(closed(2), { maxWindows: 20, stabilityPct: 100 }));
  assert.deepEqual([early.stable, early.windows], [true, 2]);
  const never = await runLoad(base, payload, options(closed(2), { maxWindows: 4, stabilityPct: 0 }));
  assert.deepEqual([never.stable, never.windows], [false, 4]);
});

test('worker threads: each drives its share, histograms merge, maxRequests is exact', async (t) => {
  const base = await affineBase(t);
  const payload = await payloadFor(base, 'v2-binary');
  const before = (await call(`${base}/v2/models/affine/stats`)).body.model_stats[0].inference_count as number;
  const counted = await runLoad(base, payload, options(closed(4), { workers: 2, maxWindows: 50, maxRequests: 300 }));
  assert.equal(counted.requests, 300, 'each worker stops after its 150');
  assert.equal(counted.latency.count, 300);
  assert.equal(counted.errorCount, 0);
  const after = (await call(`${base}/v2/models/affine/stats`)).body.model_stats[0].inference_count as number;
  assert.ok(after - before >= 300, `the server saw ${after - before}`);

  // Two workers at 60/s each: the merged count is the whole 120/s, not one worker's share.
  const rate = await runLoad(
    base,
    payload,
    options({ kind: 'rate', rate: 120, arrival: 'constant' }, { workers: 2, windowMs: 300, minWindows: 3 }),
  );
  const expected = 120 * rate.durationSeconds;
  assert.ok(Math.abs(rate.requests - expected) < 0.25 * expected, `${rate.requests} requests, ~${expected} expected`);
  assert.equal(rate.latency.count, rate.requests);
});

test('bad options are refused before anything is sent', async () => {
  const payload: RequestPayload = { path: '/', headers: {}, body: Buffer.alloc(0), rows: 1 };
  await assert.rejects(runLoad('http://127.0.0.1:1', payload, options(closed(0))), { code: 'BS_ERR_USAGE' });
  await assert.rejects(runLoad('http://127.0.0.1:1', payload, options(closed(1), { maxWindows: 1 })), {
    code: 'BS_ERR_USAGE',
  });
});
