import assert from 'node:assert/strict';
import { test } from 'node:test';
import { samplesOf } from '../metrics/prometheus-text.js';
import { affine, affineRequest, call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

test('an instance whose worker dies is replaced: its request fails alone, the next ones are answered', async (t) => {
  const archive = await packAffine(await tempDir(t), {
    handlerSource: `export async function preprocess(requests, context) {
  if (requests.some((request) => request.inputs.x.data[0] === 666)) process.exit(3);
  return context.builtins.tensor.preprocess(requests, context);
}
`,
  });
  const server = await startTestServer(t, { models: [`affine=${archive}`] });
  const url = `${server.urls.inference}/v2/models/affine/infer`;
  assert.equal((await call(url, { body: affineRequest([[1, 2, 3, 4]]) })).status, 200);

  const killed = await call(url, { body: affineRequest([[666, 0, 0, 0]]) });
  assert.equal(killed.status, 500);
  assert.match(killed.body.error, /instance affine:1:0 stopped: its worker thread exited with code 3/);

  // Queued while the new instance opens, then answered by it.
  const after = await Promise.all([1, 2, 3].map((value) => call(url, { body: affineRequest([[value, 0, 0, 0]]) })));
  assert.deepEqual(
    after.map((answer) => answer.status),
    [200, 200, 200],
  );
  assert.deepEqual(after[2]?.body.outputs[0].data, affine([[3, 0, 0, 0]]));
  const [restarts] = samplesOf(await scrapeMetrics(server), 'batchserve_instance_restarts_total', { model: 'affine' });
  assert.equal(restarts?.value, 1);
  assert.equal(server.repository.get('affine').instances.length, 1);
  await server.repository.unload('affine');
});
