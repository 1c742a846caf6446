import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packArchive } from '../../src/archive/pack.js';
import type { ModelPrecision } from '../../src/archive/manifest.js';
import { prepareModel } from '../../src/optimize/prepare-model.js';
import { DEMO_MODEL_PATH } from '../../src/runtime/demo-model.js';
import { call, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const EXAMPLE = fileURLToPath(new URL('../../../examples/orientation/', import.meta.url));

/** Four rows of the demo's [3, 48, 192] input: smooth patterns, the same for every model. */
function rows(): number[] {
  const values: number[] = [];
  for (let row = 0; row < 4; row++) {
    for (let i = 0; i < 3 * 48 * 192; i++) values.push(Math.sin(i * (0.001 + row * 0.0007)) * 0.8);
  }
  return values;
}

test('the demo classifier packed as fp16 and int8 passes the gate, is served, and answers within it', async (t) => {
  const dir = await tempDir(t);
  const base = {
    serializedFile: DEMO_MODEL_PATH,
    handler: 'image-classifier',
    configFile: join(EXAMPLE, 'model-config.yaml'),
  };
  const archives: string[] = [];
  const limits = new Map<string, number>();
  for (const precision of [undefined, 'fp16', 'int8'] as (ModelPrecision | undefined)[]) {
    const name = precision ?? 'fp32';
    const preparedModel = precision ? await prepareModel({ ...base, precision }) : undefined;
    const { path, manifest } = await packArchive({
      ...base,
      modelName: name,
      extraFiles: [join(EXAMPLE, 'labels.txt')],
      exportPath: join(dir, 'store'),
      ...(preparedModel ? { preparedModel } : {}),
    });
    if (precision) {
      assert.equal(manifest.model.accuracy?.passed, true, JSON.stringify(manifest.model.accuracy));
      assert.equal(manifest.model.precision, precision);
      limits.set(name, manifest.model.accuracy?.limits.maxRelError ?? 0);
    }
    archives.push(`${name}=${path}`);
  }

  const server = await startTestServer(t, { models: archives });
  const body = JSON.stringify({
    inputs: [{ name: 'x', datatype: 'FP32', shape: [4, 3, 48, 192], data: rows() }],
  });
  const answer = async (name: string): Promise<number[]> => {
    const reply = await call(`${server.urls.inference}/v2/models/${name}/infer`, { body });
    assert.equal(reply.status, 200, JSON.stringify(reply.body));
    return (reply.body as { outputs: { data: number[] }[] }).outputs[0]?.data ?? [];
  };
  const reference = await answer('fp32');
  assert.equal(reference.length, 8);
  for (const [name, limit] of limits) {
    const got = await answer(name);
    const error = Math.max(...got.map((value, i) => Math.abs(value - (reference[i] as number))));
    const range = Math.max(...reference.map(Math.abs));
    assert.ok(error / range <= limit, `${name}: relative error ${error / range} > ${limit}`);
  }
});
