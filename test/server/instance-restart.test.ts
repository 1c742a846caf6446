import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ArchiveManifest } from '../../src/archive/manifest.js';
import { validateModelConfig, type CompleteModelConfig } from '../../src/config/model-config.js';
import { ModelLoadError } from '../../src/core/errors.js';
import { ServerMetrics } from '../../src/metrics/server-metrics.js';
import { LoadedModel } from '../../src/repository/loaded-model.js';
import type { ServingInstance } from '../../src/runtime/local-instance.js';
import { parseExposition, samplesOf } from '../metrics/prometheus-text.js';
import { affine, affineRequest, call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import type { BatchTimings, HandlerRequest } from '../../src/core/request.js';

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

/** An instance that answers "ok" and dies when the test says so, as a worker thread would. */
class MortalInstance implements ServingInstance {
  readonly device = 'test';
  private stopped: ((error: Error) => void) | undefined;
  constructor(readonly id: string) {}

  async run(requests: readonly HandlerRequest[]): Promise<{ responses: unknown[]; timings: BatchTimings }> {
    return { responses: requests.map(() => `ok from ${this.id}`), timings: NO_TIME };
  }

  async release(): Promise<void> {}

  onStopped(listener: (error: Error) => void): void {
    this.stopped = listener;
  }

  die(): void {
    this.stopped?.(new Error(`instance ${this.id} stopped: its worker thread exited with code 3`));
  }
}

const NO_TIME: BatchTimings = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };

/**
 * A LoadedModel over MortalInstances. `open` decides each reopening; every reopening and every
 * backoff wait is logged to `events`, and the backoff takes no real time.
 */
function mortalModel(open: (index: number) => ServingInstance) {
  const events: string[] = [];
  const metrics = new ServerMetrics();
  const first = new MortalInstance('m:1:0');
  const config = validateModelConfig(
    {
      max_batch_size: 4,
      inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
      outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
    },
    'test',
  ) as CompleteModelConfig;
  const model = new LoadedModel({
    name: 'm',
    version: '1',
    archivePath: 'm.mar',
    manifest: { model: { handler: 'tensor' } } as ArchiveManifest,
    config,
    labels: undefined,
    instances: [first],
    createInstance: async (index) => {
      events.push('open');
      return open(index);
    },
    workDir: '/nonexistent',
    deviceNotes: [],
    loadSeconds: 0,
    metrics,
    restartDelay: async (ms) => {
      events.push(`wait ${ms}`);
    },
  });
  const restarts = async (): Promise<number | undefined> =>
    samplesOf(parseExposition(await metrics.text()), 'batchserve_instance_restarts_total', { model: 'm' })[0]?.value;
  return { model, first, events, restarts };
}

/** The restart loop only awaits promises that are already settled: one turn of the event loop runs it out. */
const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('an instance that cannot be reopened is tried 3 times, a second more apart each time, then given up', async () => {
  const { model, first, events, restarts } = mortalModel(() => {
    throw new ModelLoadError('the handler failed to initialize');
  });
  first.die();
  await settle();
  await settle();
  assert.equal(events.filter((event) => event === 'open').length, 3, events.join(', '));
  assert.deepEqual(events.slice(0, 5), ['open', 'wait 1000', 'open', 'wait 2000', 'open']);
  assert.deepEqual(model.instances, [], 'the dead instance left and nothing took its place');
  assert.equal(await restarts(), 1, 'one instance stopped');
});

test('a reopening that works on a later try serves; an instance that dies again is replaced again', async () => {
  let tries = 0;
  let latest: MortalInstance | undefined;
  const { model, first, events, restarts } = mortalModel((index) => {
    tries += 1;
    if (tries === 2) throw new ModelLoadError('a transient failure');
    latest = new MortalInstance(`m:1:${index}:try${tries}`);
    return latest;
  });
  first.die();
  await settle();
  assert.deepEqual(events, ['open']);
  assert.deepEqual(
    model.instances.map((instance) => instance.id),
    ['m:1:0:try1'],
  );
  assert.equal(
    (
      await model.infer(
        { kind: 'body', body: Buffer.from('1'), contentType: undefined, movable: false },
        { rows: 1, shapeKey: 'a' },
      )
    ).response,
    'ok from m:1:0:try1',
  );

  latest?.die();
  await settle();
  await settle();
  assert.deepEqual(events, ['open', 'open', 'wait 1000', 'open'], 'the second death starts its own 3 tries');
  assert.deepEqual(
    model.instances.map((instance) => instance.id),
    ['m:1:0:try3'],
  );
  assert.equal(
    (
      await model.infer(
        { kind: 'body', body: Buffer.from('2'), contentType: undefined, movable: false },
        { rows: 1, shapeKey: 'a' },
      )
    ).response,
    'ok from m:1:0:try3',
  );
  assert.equal(await restarts(), 2);
});
