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

test('a drain answers what is in flight with Connection: close and closes idle keep-alive connections, so no client reuses a closing socket', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir, { handlerSource: SLOW_HANDLER })}`],
  });
  const busy = new Agent({ keepAlive: true, maxSockets: 1 });
  const idle = new Agent({ keepAlive: true, maxSockets: 1 });
  t.after(() => {
    busy.destroy();
    idle.destroy();
  });
  const live = `${server.urls.inference}/v2/health/live`;
  const before = await send(idle, live);
  assert.equal(before.headers.connection, 'keep-alive', 'before the drain, connections are kept');

  const inFlight = send(busy, `${server.urls.inference}/v2/models/affine/infer`, affineRequest([[1, 2, 3, 4]]));
  await new Promise((resolve) => setTimeout(resolve, 100));
  const drained = server.drain(5_000);

  // The idle connection is closed by the server at once, not left for the client to reuse.
  await closed(before.socket);
  const answered = await inFlight;
  assert.equal(answered.status, 200, 'the request in flight is answered');
  assert.equal(answered.headers.connection, 'close', 'and told its connection ends');
  await closed(answered.socket);
  assert.equal(await drained, true);
});
