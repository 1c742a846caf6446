import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request, type IncomingHttpHeaders } from 'node:http';
import type { Socket } from 'node:net';
import { affineRequest, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

/** Holds each batch 300 ms, so a request is still in flight when the drain starts. */
const SLOW_HANDLER = `export async function inference(inputs, context) {
  await new Promise((resolve) => setTimeout(resolve, 300));
  return context.builtins.tensor.inference(inputs, context);
}
`;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  socket: Socket;
}

function send(agent: Agent, url: string, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const call = request(
      url,
      { agent, method: body === undefined ? 'GET' : 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        // Taken now: once the answer ends, the agent keeps the socket and the response lets go of it.
        const socket = res.socket;
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, socket }));
      },
    );
    call.on('error', reject);
    call.end(body);
  });
}

const closed = (socket: Socket): Promise<void> =>
  socket.destroyed ? Promise.resolve() : new Promise((resolve) => socket.once('close', () => resolve()));

test('a drain answers what is in flight and what arrives on a kept connection with Connection: close, and closes a connection left idle', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir, { handlerSource: SLOW_HANDLER })}`],
  });
  const busy = new Agent({ keepAlive: true, maxSockets: 1 });
  const reused = new Agent({ keepAlive: true, maxSockets: 1 });
  const idle = new Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => {
    busy.destroy();
    reused.destroy();
    idle.destroy();
  });
  const live = `${server.urls.inference}/v2/health/live`;
  const kept = await send(reused, live);
  assert.equal(kept.headers.connection, 'keep-alive', 'before the drain, connections are kept');
  const left = await send(idle, live);

  const inFlight = send(busy, `${server.urls.inference}/v2/models/affine/infer`, affineRequest([[1, 2, 3, 4]]));
  await new Promise((resolve) => setTimeout(resolve, 100));
  const drained = server.drain(5_000);

  // A client that has not seen the drain sends its next request on the connection it kept.
  const late = await send(reused, live);
  assert.equal(late.socket, kept.socket, 'on the kept connection');
  assert.equal(late.status, 200, 'it is answered');
  assert.equal(late.headers.connection, 'close', 'and told its connection ends');
  await closed(late.socket);
  const answered = await inFlight;
  assert.equal(answered.status, 200, 'the request in flight is answered');
  assert.equal(answered.headers.connection, 'close');
  await closed(answered.socket);
  // Nothing was sent on this one: the server closes it, not left for the client to reuse.
  await closed(left.socket);
  assert.equal(await drained, true);
});

/** What a keep-alive client's requests came to: answers by status, failures by error code. */
interface Tally {
  answers: Map<number, number>;
  failures: Map<string, number>;
}

/**
 * `clients` keep-alive clients, each sending its next request as soon as its last is answered,
 * until one fails: after a drain, the answer that says `Connection: close` sends the client to
 * a new connection, which the closed listener refuses (ECONNREFUSED, a request never received).
 * `started` resolves once every client has had `warm` answers, so the drain lands mid-run.
 */
function keepAliveClients(url: string, body: string, clients: number, warm: number) {
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const tally: Tally = { answers: new Map(), failures: new Map() };
  const count = <K>(map: Map<K, number>, key: K): void => void map.set(key, (map.get(key) ?? 0) + 1);
  let warmed = 0;
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const run = async (): Promise<void> => {
    for (let sent = 1; ; sent++) {
      try {
        count(tally.answers, (await send(agent, url, body)).status);
      } catch (error) {
        count(tally.failures, (error as NodeJS.ErrnoException).code ?? String(error));
        return;
      }
      if (sent === warm && ++warmed === clients) markStarted();
    }
  };
  const finished = Promise.all(Array.from({ length: clients }, run)).then(() => {
    agent.destroy();
    return tally;
  });
  return { started, finished };
}

test('a drain under 16 keep-alive clients answers every request they sent on a kept connection: none is reset', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`] });
  const clients = keepAliveClients(
    `${server.urls.inference}/v2/models/affine/infer`,
    affineRequest([[1, 2, 3, 4]]),
    16,
    20,
  );
  await clients.started;
  assert.equal(await server.drain(10_000), true);
  const { answers, failures } = await clients.finished;
  assert.deepEqual(
    [...failures.keys()],
    ['ECONNREFUSED'],
    `every client ends at the closed listener, none on a reset: ${JSON.stringify([...failures])}`,
  );
  assert.deepEqual(
    [...answers.keys()].filter((status) => status !== 200 && status !== 503),
    [],
    'every request was answered, served or refused',
  );
});
