import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer } from 'node:http';
import { test } from 'node:test';
import { runOpenAiLoad } from '../../src/bench/openai-load.js';

test('bench --openai counts a refused request by what the server said, not by its status alone', async (t) => {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/v1/embeddings') {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: "The model 'nope' does not exist", code: 'model_not_found' } }));
      } else {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('upstream busy\n');
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => server.close());
  const { port } = server.address() as { port: number };
  const run = (api: 'embeddings' | 'completions') =>
    runOpenAiLoad({
      url: `http://127.0.0.1:${port}`,
      model: 'nope',
      api,
      concurrency: [1],
      maxTokens: [4, 4],
      prompt: 'a cat',
      warmupMs: 0,
      durationMs: 30,
      seed: 1,
    });
  const [embeddings] = await run('embeddings');
  assert.deepEqual(Object.keys(embeddings?.errors ?? {}), ["HTTP 404: The model 'nope' does not exist"]);
  const [completions] = await run('completions');
  assert.deepEqual(Object.keys(completions?.errors ?? {}), ['HTTP 503: upstream busy']);
});
