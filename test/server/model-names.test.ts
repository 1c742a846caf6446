import assert from 'node:assert/strict';
import { test } from 'node:test';
import { packArchive } from '../../src/archive/pack.js';
import { validateModelConfig } from '../../src/config/model-config.js';
import { MAX_MODEL_NAME_LENGTH, modelNameProblem } from '../../src/core/model-name.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

// One rule for model names (docs/archives.md#model-names), checked wherever a name enters:
// a name becomes a URL segment, a metric label and a folder (work folders, prediction logs).

const INVALID = 'BS_ERR_INVALID_MODEL_NAME';
const AUTH = { authorization: 'Bearer test-token' };
const HOSTILE = ['../../x', 'a/b', '"quoted"', 'new\nline', '.hidden', '', 'a'.repeat(MAX_MODEL_NAME_LENGTH + 1)];

test('the rule: letters, digits, _ . -, starting with a letter or digit, at most 128 characters', () => {
  for (const name of ['affine', 'resnet-50_v1.2', 'a'.repeat(MAX_MODEL_NAME_LENGTH)]) {
    assert.equal(modelNameProblem(name), undefined, name);
  }
  for (const name of HOSTILE) assert.notEqual(modelNameProblem(name), undefined, JSON.stringify(name));
});

test('pack refuses a name over the length limit', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  assert.ok(archive);
  await assert.rejects(
    packArchive({
      modelName: 'a'.repeat(MAX_MODEL_NAME_LENGTH + 1),
      version: '1',
      serializedFile: `${dir}/affine.onnx`,
      configFile: `${dir}/affine-config.yaml`,
      exportPath: `${dir}/long`,
    }),
    { code: INVALID },
  );
});

test('serve --models refuses a hostile name before it reads the archive', async (t) => {
  const archive = await packAffine(await tempDir(t));
  for (const name of ['../../x', 'a"b']) {
    await assert.rejects(startTestServer(t, { models: [`${name}=${archive}`] }), { code: INVALID }, name);
  }
});

test('a pipeline step naming a model or a step by a hostile name is a config error', () => {
  const config = (step: string): unknown => ({
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
    outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 4] }],
    pipeline: { steps: [step] },
  });
  for (const step of [
    { name: 's', model: '../../x', input_map: { x: 'x' }, output_map: { y: 'y' } },
    { name: '../s', model: 'affine', input_map: { x: 'x' }, output_map: { y: 'y' } },
    { name: 's', model: 'a'.repeat(MAX_MODEL_NAME_LENGTH + 1), input_map: { x: 'x' }, output_map: { y: 'y' } },
  ]) {
    assert.throws(() => validateModelConfig(config(step as never), 'config'), { code: 'BS_ERR_CONFIG_INVALID' });
  }
});

test('management register, scale and unregister refuse a hostile name with 400', async (t) => {
  const server = await startTestServer(t, { models: [`affine=${await packAffine(await tempDir(t))}`] });
  const base = server.urls.management;
  const register = await call(`${base}/models?url=affine.mar&model_name=${encodeURIComponent('../../x')}`, {
    method: 'POST',
    headers: AUTH,
  });
  assert.equal(register.status, 400, JSON.stringify(register.body));
  assert.equal(register.body.code, INVALID);
  for (const name of ['..%2F..%2Fx', '%22q%22', 'a%0Ab', 'a'.repeat(MAX_MODEL_NAME_LENGTH + 1)]) {
    for (const method of ['PUT', 'DELETE']) {
      const answer = await call(`${base}/models/${name}?min_worker=1`, { method, headers: AUTH });
      assert.equal(answer.status, 400, `${method} ${name}: ${JSON.stringify(answer.body)}`);
      assert.equal(answer.body.code, INVALID);
    }
  }
});
