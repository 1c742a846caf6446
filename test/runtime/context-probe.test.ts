import { test } from 'node:test';
import assert from 'node:assert/strict';
import type ort from 'onnxruntime-node';
import { validateModelConfig } from '../../src/config/model-config.js';
import { decoderLayout } from '../../src/runtime/decoder-layout.js';
import { DEFAULT_MAX_CONTEXT, servedMaxContext, type ServedContext } from '../../src/runtime/context-probe.js';
import { createSession, readSignature } from '../../src/runtime/session.js';
import { decoderModel } from '../fixtures/onnx-models.js';
import { TEXT_VOCAB } from '../fixtures/text-tokenizer.js';
import { DECODER_FIXTURES, readDecoderAnswers, torchTextFiles } from '../fixtures/torch-text.js';

const { runtime } = validateModelConfig({}, 'test');

/** servedMaxContext on a model, counting the steps it runs. */
async function probe(
  model: string | Uint8Array,
  configured: number | undefined,
): Promise<{ served: ServedContext; steps: number }> {
  const session = await createSession(model, { runtime });
  try {
    const signature = readSignature(session, 'model');
    const layout = decoderLayout(signature.inputs, signature.outputs);
    let steps = 0;
    const counting = new Proxy(session, {
      get: (target, key) =>
        key === 'run'
          ? (...args: Parameters<ort.InferenceSession['run']>) => {
              steps++;
              return target.run(...args);
            }
          : Reflect.get(target, key),
    });
    return { served: await servedMaxContext(counting, layout, configured), steps };
  } finally {
    await session.release();
  }
}

for (const name of DECODER_FIXTURES) {
  test(`${name}: the positions its table holds are found in a handful of one-token steps, and a max_context over them is refused naming both`, async () => {
    const { position_limit: held } = await readDecoderAnswers(name);
    assert.ok(held !== null);
    const { model } = torchTextFiles(name);
    const unset = await probe(model, undefined);
    assert.deepEqual(unset.served, { maxContext: held });
    // One at 2047, one at 0, then a binary search below 2047.
    assert.ok(unset.steps <= 2 + Math.ceil(Math.log2(DEFAULT_MAX_CONTEXT)), `${unset.steps} steps`);
    assert.deepEqual(await probe(model, held), { served: { maxContext: held }, steps: 1 });
    assert.deepEqual((await probe(model, 2)).served, { maxContext: 2 });
    assert.deepEqual((await probe(model, held + 1)).served, {
      maxContext: held,
      over: `generation.max_context ${held + 1} is over the ${held} positions this model holds; set it to ${held} or less, or leave it out`,
    });
  });
}

test('a decoder with no position table runs any position: max_context is the default, or what the config says, in one step', async () => {
  const model = decoderModel(TEXT_VOCAB.length);
  assert.deepEqual(await probe(model, undefined), { served: { maxContext: DEFAULT_MAX_CONTEXT }, steps: 1 });
  assert.deepEqual(await probe(model, 8192), { served: { maxContext: 8192 }, steps: 1 });
});
