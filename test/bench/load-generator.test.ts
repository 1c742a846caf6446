import { test } from 'node:test';
import assert from 'node:assert/strict';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { once } from 'node:events';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import FakeTimers from '@sinonjs/fake-timers';
import { decodeFromCompressedBase64 } from 'hdr-histogram-js';
import { retryAfterMs } from '../../src/bench/http-transport.js';
import { runLoad, type LoadOptions } from '../../src/bench/load-generator.js';
import { fetchModelMetadata, randomPayload, type RequestPayload } from '../../src/bench/payload.js';
import { isStable } from '../../src/bench/stability.js';
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
    warmupMs: 50,
    windowMs: 100,
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
    let measureStartAt = 0;
    let lastWindowAt = 0;
    const result = await runLoad(
      base,
      await payloadFor(base, protocol, 2),
      options(closed(4), {
        onMeasureStart: async () => {
          measureStartAt = performance.now();
        },
        onWindow: (progress) => {
          windows.push(progress.windows);
          lastWindowAt = performance.now();
        },
      }),
    );
    assert.equal(result.errorCount, 0, `${protocol}: ${JSON.stringify(result.errors)}`);
    assert.ok(result.requests > 20, `${protocol}: ${result.requests} requests`);
    assert.equal(result.latency.count, result.requests);
    assert.equal(result.rows, result.requests * 2);
    assert.equal(result.windows, 3, 'stabilityPct 0 never agrees: runs maxWindows');
    assert.equal(result.stable, false);
    assert.deepEqual(windows, [1, 2, 3]);
    // The warm-up is not measured: the measured time lies between the end of the warm-up and
    // the last window's report (exact figures: the fake-clock test below).
    const spanSeconds = (lastWindowAt - measureStartAt) / 1000;
    assert.ok(result.durationSeconds > 0 && result.durationSeconds <= spanSeconds, `${result.durationSeconds} s`);
    assert.ok(Math.abs(result.throughput - result.requests / result.durationSeconds) < 1e-6);
    assert.equal(result.itemsPerSecond, result.throughput * 2);
    assert.ok(result.latency.p50 > 0);
  }
});

/**
 * A plain HTTP server on a free port, closed after the test: `answer` gets each request's
 * response once its body has arrived. Returns its URL.
 */
async function plainServer(t: Context, answer: (response: ServerResponse) => void): Promise<string> {
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => answer(response));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(async () => {
    server.closeAllConnections();
    server.close();
    await once(server, 'close');
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * A plain HTTP server that answers only when the test says so, and a count of the answers the
 * load generator has read (undici publishes each completion just before handing it to the
 * generator's handler). With the clock faked as well, every latency recorded is known.
 */
async function heldServer(t: Context): Promise<{
  url: string;
  received: (count: number) => Promise<void>;
  answerHeld: () => Promise<void>;
}> {
  const held: ServerResponse[] = [];
  let received = 0;
  let completed = 0;
  const checks = new Set<() => void>();
  const until = (done: () => boolean): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (!done()) return;
        checks.delete(check);
        resolve();
      };
      checks.add(check);
      check();
    });
  const changed = (): void => [...checks].forEach((check) => check());
  const url = await plainServer(t, (response) => {
    received += 1;
    held.push(response);
    changed();
  });
  const onComplete = (): void => {
    completed += 1;
    changed();
  };
  subscribe('undici:request:trailers', onComplete);
  t.after(() => unsubscribe('undici:request:trailers', onComplete));
  return {
    url,
    /** Until `count` requests have arrived in all. */
    received: (count) => until(() => received >= count),
    /** Answers every held request, then waits until the client has read each answer. */
    answerHeld: async () => {
      const target = completed + held.length;
      for (const response of held.splice(0)) response.end('ok');
      await until(() => completed >= target);
    },
  };
}

test(
  'open loop on a fake clock: latency runs from the scheduled send, exact percentiles',
  { timeout: 20_000 },
  async (t) => {
    const server = await heldServer(t);
    const clock = FakeTimers.install({
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'],
    });
    t.after(() => clock.uninstall());
    const at = (): number => Math.round(performance.now());
    const payload: RequestPayload = { protocol: 'v2-json', path: '/', headers: {}, body: Buffer.from('{}'), rows: 1 };
    // 125/s: a request due every 8 ms, whole milliseconds the fake clock reaches exactly.
    const running = runLoad(
      server.url,
      payload,
      options(
        { kind: 'rate', rate: 125, arrival: 'constant' },
        { warmupMs: 16, windowMs: 80, minWindows: 1, maxWindows: 1 },
      ),
    );
    // Warm-up: the requests due at 0 and 8 ms are answered at once, and not measured.
    await server.received(1);
    await server.answerHeld();
    await clock.tickAsync(8);
    await server.received(2);
    await server.answerHeld();
    // Measuring from 16 ms. The server stalls: the request due at 16 ms waits unanswered...
    await clock.tickAsync(8);
    await server.received(3);
    assert.equal(at(), 16);
    // ...and the client stalls too (as in a GC pause): at 48 ms it sends the four due since 24 ms.
    clock.jump(32);
    await server.received(7);
    await clock.tickAsync(16);
    await server.received(9);
    // At 64 ms the server answers all seven (due at 16, 24, …, 64 ms); then each at once.
    await server.answerHeld();
    for (const count of [10, 11, 12]) {
      await clock.tickAsync(8);
      await server.received(count);
      await server.answerHeld();
    }
    await clock.tickAsync(8);
    assert.equal(at(), 96);
    const result = await running;

    // Ten requests due in the 80 ms window, at the 125/s offered.
    assert.equal(result.durationSeconds, 0.08);
    assert.equal(result.requests, 10);
    assert.equal(result.throughput, 125);
    assert.deepEqual([result.errorCount, result.stable, result.windows], [0, true, 1]);
    // Latencies in ms: 48, 40, 32, 24, 16, 8, then four answered at once (recorded as 1 µs).
    // Timed from the actual send, the four sent late at 48 ms would read 16 ms each (p90 16).
    const { count, p50, p90, p99, max, mean } = result.latency;
    assert.equal(count, 10);
    const near = (actual: number, expected: number): boolean => Math.abs(actual - expected) <= expected * 0.001;
    assert.ok(near(p50, 8) && near(p90, 40) && near(p99, 48) && near(max, 48), JSON.stringify(result.latency));
    assert.ok(near(mean, 16.8004), `mean ${mean}`);
  },
);

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

test('a closed-loop client refused with Retry-After waits that long; one refused without it asks again at once', async (t) => {
  const refusingServer = async (headers: Record<string, string>): Promise<{ url: string; received: () => number }> => {
    let received = 0;
    const url = await plainServer(t, (response) => {
      received += 1;
      response.writeHead(503, { 'content-type': 'application/json', ...headers });
      response.end('{"error":"busy","code":"BS_ERR_LATENCY_BUDGET"}');
    });
    return { url, received: () => received };
  };
  const payload: RequestPayload = {
    protocol: 'http-json',
    path: '/v2/models/any/infer',
    headers: { 'content-type': 'application/json' },
    body: Buffer.from('{}'),
    rows: 1,
  };
  const told = await refusingServer({ 'retry-after': '1' });
  const result = await runLoad(told.url, payload, options(closed(2)));
  // 50 ms of warm-up and 300 ms of windows: each client's first refusal says come back in 1 s.
  assert.equal(told.received(), 2, 'each of the 2 clients asked once and waited');
  assert.equal(result.requests, 0, 'both refusals came in the warm-up');
  const untold = await refusingServer({});
  const storm = await runLoad(untold.url, payload, options(closed(2)));
  assert.ok(untold.received() > 20, `without Retry-After the clients resend at once: ${untold.received()}`);
  assert.equal(storm.errors['503'], storm.requests);
});

test('retryAfterMs reads delay-seconds and HTTP-dates, in any case of the name', () => {
  const raw = (name: string, value: string): Buffer[] => [
    Buffer.from('x-model-version'),
    Buffer.from('1'),
    Buffer.from(name),
    Buffer.from(value),
  ];
  const now = Date.parse('Wed, 02 Dec 2026 01:00:00 GMT');
  assert.equal(retryAfterMs(raw('Retry-After', '1'), now), 1000);
  assert.equal(retryAfterMs(raw('retry-after', ' 0 '), now), 0);
  assert.equal(retryAfterMs(raw('RETRY-AFTER', 'Wed, 02 Dec 2026 01:00:03 GMT'), now), 3000);
  assert.equal(retryAfterMs(raw('Retry-After', 'Wed, 02 Dec 2026 00:59:00 GMT'), now), 0, 'a date gone by: at once');
  assert.equal(retryAfterMs(raw('Retry-After', 'soon'), now), undefined);
  assert.equal(retryAfterMs(raw('Retry-Aftex', '1'), now), undefined);
  assert.equal(retryAfterMs([], now), undefined);
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

test('the stability rule: throughput, p99 and completions a second of the last windows within ±pct of their mean', () => {
  const steady = [
    { throughput: 50, p99Ms: 90, completedPerSecond: 50 },
    { throughput: 100, p99Ms: 10, completedPerSecond: 100 },
    { throughput: 104, p99Ms: 10.5, completedPerSecond: 104 },
    { throughput: 97, p99Ms: 9.6, completedPerSecond: 97 },
  ];
  assert.equal(isStable(steady, 3, 10), true);
  assert.equal(isStable(steady, 4, 10), false, 'the first window is off');
  assert.equal(isStable(steady, 3, 3), false);
  assert.equal(isStable(steady.slice(0, 2), 3, 10), false, 'too few windows');
  assert.equal(
    isStable([...steady, { throughput: 100, p99Ms: 14, completedPerSecond: 100 }], 3, 10),
    false,
    'p99 drifted',
  );
  assert.equal(
    isStable([...steady, { throughput: 130, p99Ms: 10, completedPerSecond: 130 }], 3, 10),
    false,
    'throughput drifted',
  );
  assert.equal(
    isStable([...steady, { throughput: 100, p99Ms: 10, completedPerSecond: 160 }], 3, 10),
    false,
    'as steady in its successes, but 60 errors a second came on top',
  );
});

test('a server that answers nothing for a while is not stable: the run waits for answers', async (t) => {
  // Every answer is held until 300 ms after the first request: the first windows are empty.
  let releaseAt = 0;
  const url = await plainServer(t, (response) => {
    releaseAt ||= performance.now() + 300;
    setTimeout(() => response.end('{}'), Math.max(0, releaseAt - performance.now()));
  });
  const payload: RequestPayload = { protocol: 'v2-json', path: '/', headers: {}, body: Buffer.from('{}'), rows: 1 };
  // ±100%: any two windows that measured something agree.
  const result = await runLoad(
    url,
    payload,
    options(closed(2), { warmupMs: 0, windowMs: 50, maxWindows: 60, stabilityPct: 100, maxRequests: 20 }),
  );
  assert.equal(result.errorCount, 0, JSON.stringify(result.errors));
  assert.ok(result.requests >= 2, `${result.requests} requests in ${result.windows} windows`);
  assert.ok(result.windows >= 4, `${result.windows} windows: two empty ones would have ended it`);
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
  assert.equal(counted.latencyHistogram, undefined, 'kept only when asked');
  const after = (await call(`${base}/v2/models/affine/stats`)).body.model_stats[0].inference_count as number;
  assert.ok(after - before >= 300, `the server saw ${after - before}`);

  // Two workers at 60/s each: the merged count is the whole 120/s, not one worker's share
  // (60/s) nor twice the whole (240/s): nearer 120 than either.
  const rate = await runLoad(
    base,
    payload,
    options({ kind: 'rate', rate: 120, arrival: 'constant' }, { workers: 2, windowMs: 250, minWindows: 3 }),
  );
  const perSecond = rate.requests / rate.durationSeconds;
  assert.ok(perSecond > 90 && perSecond < 180, `${rate.requests} requests in ${rate.durationSeconds} s`);
  assert.equal(rate.latency.count, rate.requests);

  // Kept, the merged histogram holds every measured request, at the summary's percentiles.
  const kept = await runLoad(
    base,
    payload,
    options(closed(4), { workers: 2, maxWindows: 50, maxRequests: 100, keepHistogram: true }),
  );
  const histogram = decodeFromCompressedBase64(kept.latencyHistogram as string);
  assert.equal(histogram.totalCount, 100);
  assert.equal(Math.min(histogram.getValueAtPercentile(99), histogram.maxValue) / 1000, kept.latency.p99);
});

test('bad options are refused before anything is sent', async () => {
  const payload: RequestPayload = { protocol: 'v2-json', path: '/', headers: {}, body: Buffer.alloc(0), rows: 1 };
  await assert.rejects(runLoad('http://127.0.0.1:1', payload, options(closed(0))), { code: 'BS_ERR_USAGE' });
  await assert.rejects(runLoad('http://127.0.0.1:1', payload, options(closed(1), { maxWindows: 1 })), {
    code: 'BS_ERR_USAGE',
  });
});
