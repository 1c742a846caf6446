import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import type { BatchServer } from '../../src/server/server.js';
import { affine, affineRequest, call, packAffine, startTestServer, type JsonAnswer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { GATED_CONFIG, GATED_HANDLER, installGate, waitUntil, within, type HandlerGate } from './handler-gate.js';

/** One instance, one request per forward pass, two priority levels, no queue delay. */
async function gatedServer(t: TestContext): Promise<{ server: BatchServer; gate: HandlerGate; url: string }> {
  const gate = installGate(t);
  const archive = await packAffine(await tempDir(t), {
    config: `max_batch_size: 1\ndynamic_batching:\n  max_queue_delay: 0\n  priority_levels: 2\n${GATED_CONFIG}`,
    handlerSource: GATED_HANDLER,
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  gate.hold();
  return { server, gate, url: `${server.urls.inference}/v2/models/affine/infer` };
}

const row = (value: number): number[][] => [[value, 0, 0, 0]];

test('timeout and priority must be non-negative integers; anything else is a 400 with its code', async (t) => {
  const { url, gate } = await gatedServer(t);
  gate.openAll();
  for (const parameters of [
    { timeout: -1 },
    { timeout: '100' },
    { timeout: 1.5 },
    { timeout: null },
    { priority: -2 },
    { priority: 'high' },
    { priority: 1.5 },
    { priority: true },
  ]) {
    const answer = await call(url, { body: affineRequest(row(1), { parameters }) });
    assert.equal(answer.status, 400, JSON.stringify(parameters));
    assert.equal(answer.body.code, 'BS_ERR_USAGE', JSON.stringify(parameters));
    assert.match(
      answer.body.error,
      new RegExp(`parameter "${Object.keys(parameters)[0]}" must be a non-negative integer`),
    );
  }
  for (const parameters of [{ timeout: 0, priority: 0 }, { timeout: 5_000_000, priority: 1 }, { priority: 2 }]) {
    const answer = await call(url, { body: affineRequest(row(2), { parameters }) });
    assert.equal(answer.status, 200, JSON.stringify(parameters));
    assert.deepEqual(answer.body.outputs[0].data, affine(row(2)));
  }
});

test('a request whose timeout expires in the queue gets 503 at that moment, while the instance is still busy', async (t) => {
  const { url, gate } = await gatedServer(t);
  const running = call(url, { body: affineRequest(row(1)) });
  await gate.reached(1);
  const sent = Date.now();
  const expired = await within(
    call(url, { body: affineRequest(row(2), { parameters: { timeout: 50_000 } }) }),
    10_000,
    'the queued request timed out',
  );
  const waited = Date.now() - sent;
  assert.equal(expired.status, 503);
  assert.deepEqual(expired.body, { error: 'Request timeout expired', code: 'BS_ERR_QUEUE_TIMEOUT' });
  // The timeout is in microseconds: not before 50 ms (nor 50 s, which `within` rules out).
  assert.ok(waited >= 45, `answered ${waited} ms after it was sent`);
  gate.release();
  assert.equal((await running).status, 200, 'the running request was held all along, then answered');
  assert.deepEqual(gate.entered, [[1, 0, 0, 0]], 'the expired request never ran');
});

test('a priority 1 request queued behind priority 2 ones is served first; equal priorities keep arrival order', async (t) => {
  const { server, url, gate } = await gatedServer(t);
  const model = server.repository.get('affine');
  const answers = new Map<string, Promise<JsonAnswer>>();
  const send = (label: string, value: number, priority: number): Promise<JsonAnswer> => {
    const answer = call(url, { body: affineRequest(row(value), { parameters: { priority } }) });
    answers.set(label, answer);
    return answer;
  };
  void send('first', 0, 2);
  await gate.reached(1);
  // One at a time, so that the queue holds them in this order whatever the sockets do.
  for (const [index, [label, value, priority]] of (
    [
      ['low-1', 1, 2],
      ['low-2', 2, 2],
      ['low-3', 3, 2],
      ['high', 9, 1],
    ] as const
  ).entries()) {
    void send(label, value, priority);
    await waitUntil(() => model.queuedRows === index + 1, `${label} is queued`);
  }

  // Each release lets one forward pass finish while every other request is still held or
  // queued, so the first answer to arrive can only be the one just served.
  const served: string[] = [];
  while (answers.size > 0) {
    gate.release();
    const [label, answer] = await Promise.race(
      [...answers].map(([name, pending]) => pending.then((result) => [name, result] as const)),
    );
    assert.equal(answer.status, 200, label);
    answers.delete(label);
    served.push(label);
  }
  assert.deepEqual(served, ['first', 'high', 'low-1', 'low-2', 'low-3']);
  assert.deepEqual(
    gate.entered.map((values) => values[0]),
    [0, 9, 1, 2, 3],
  );
});
