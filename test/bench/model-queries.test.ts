import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createServer, type Socket } from 'node:net';
import { once } from 'node:events';
import { getJson, RestModelQueries } from '../../src/bench/model-queries.js';
import { packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

test('bench --url reads a served delay as the server has it: a fixed one in µs, adaptive as auto', async (t) => {
  const dir = await tempDir(t);
  const fixed = await packAffine(dir, {
    name: 'fixed',
    config: 'max_batch_size: 8\ndynamic_batching: { max_queue_delay: 3ms }\n',
  });
  const adaptive = await packAffine(dir, {
    name: 'adaptive',
    config: 'max_batch_size: 8\ndynamic_batching: { max_queue_delay: auto }\n',
  });
  const server = await startTestServer(t, { models: [`fixed=${fixed}`, `adaptive=${adaptive}`] });
  const base = server.urls.inference;
  assert.deepEqual(await new RestModelQueries(base, 'fixed').config(), {
    maxBatchSize: 8,
    maxQueueDelayUs: 3000,
    instances: 1,
  });
  // Triton's max_queue_delay_microseconds reads 0 for auto; the point must not say delay 0.
  assert.deepEqual(await new RestModelQueries(base, 'adaptive').config(), {
    maxBatchSize: 8,
    maxQueueDelayUs: 'auto',
    instances: 1,
  });
});

test('a connection closed under a bench query is tried once more on a new one; closed again, it says it cannot reach the server', async (t) => {
  let closing = 1;
  const sockets = new Set<Socket>();
  // Closes the first `closing` connections as their request arrives, as a server timing out a kept-alive one does.
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.once('data', () => {
      if (closing-- > 0) socket.destroy();
      else socket.end('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  const { port } = server.address() as { port: number };
  assert.deepEqual(await getJson(`http://127.0.0.1:${port}/v2/models/m/config`), { ok: true });
  closing = 2;
  await assert.rejects(getJson(`http://127.0.0.1:${port}/v2/models/m/config`), {
    code: 'BS_ERR_USAGE',
    message: /^cannot reach http:\/\/127\.0\.0\.1:\d+\/v2\/models\/m\/config: other side closed/,
  });
});
