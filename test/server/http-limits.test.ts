import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { validateServerConfig } from '../../src/server/server-config.js';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  socket.on('error', () => {});
  return new Promise((resolve) => socket.once('connect', () => resolve(socket)));
}

function closedAfter(socket: Socket): Promise<{ ms: number; text: string }> {
  const started = performance.now();
  const received: Buffer[] = [];
  socket.on('data', (data: Buffer) => received.push(data));
  return new Promise((resolve) =>
    socket.once('close', () =>
      resolve({ ms: performance.now() - started, text: Buffer.concat(received).toString('latin1') }),
    ),
  );
}

test('a client sending its headers a byte a second is cut at the headers timeout; others are answered meanwhile', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`], headers_timeout: '1s' });
  const slow = await open(server.urls.inference);
  const closed = closedAfter(slow);
  slow.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\n');
  let cut = false;
  void closed.then(() => (cut = true));
  const drip = (async () => {
    for (let second = 0; second < 30 && !cut; second++) {
      if (!slow.destroyed) slow.write('X');
      await sleep(1000);
    }
  })();
  // While the slow client holds its connection, ordinary requests are answered.
  let answered = 0;
  const giveUpAt = performance.now() + 10_000;
  while (!cut && performance.now() < giveUpAt) {
    const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, {
      body: affineRequest([[1, 2, 3, 4]]),
    });
    assert.equal(answer.status, 200);
    answered++;
    await sleep(50);
  }
  slow.destroy();
  const { ms, text } = await closed;
  await drip;
  assert.ok(answered >= 3, `only ${answered} requests answered beside the slow client`);
  // 1 s timeout, checked every 250 ms; Node's own default would keep it 60 s or more.
  assert.ok(ms >= 900 && ms < 5000, `the slow client was cut after ${ms.toFixed(0)} ms`);
  assert.match(text, /^HTTP\/1\.1 408/);
});

test('connections past max_connections are closed on arrival; headers past max_header_size get 431', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir)}`],
    max_connections: 2,
    max_header_size: 2048,
  });
  const held = [await open(server.urls.inference), await open(server.urls.inference)];
  const extra = await open(server.urls.inference);
  const refused = await closedAfter(extra);
  assert.equal(refused.text, '', 'a connection over the cap got an answer');
  held[0]?.destroy();
  await sleep(50);
  const big = await call(`${server.urls.inference}/v2/health/live`, { headers: { 'x-padding': 'p'.repeat(4096) } });
  assert.equal(big.status, 431);
  const small = await call(`${server.urls.inference}/v2/health/live`);
  assert.equal(small.status, 200);
  held[1]?.destroy();
});

test('the HTTP limits are validated: headers_timeout may not exceed request_timeout', () => {
  assert.throws(() => validateServerConfig({ headers_timeout: '20s', request_timeout: '10s' }, 'test'), {
    code: 'BS_ERR_CONFIG_INVALID',
    message: /headers_timeout: must not be longer than request_timeout/,
  });
  const config = validateServerConfig({}, 'test');
  assert.deepEqual(
    [
      config.headers_timeout,
      config.request_timeout,
      config.keep_alive_timeout,
      config.max_connections,
      config.max_header_size,
    ],
    [10_000_000, 300_000_000, 5_000_000, 1024, 16_384],
  );
});
