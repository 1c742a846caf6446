import assert from 'node:assert/strict';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseTritonConfig, translateTritonConfig } from '../../src/config/triton-model-config.js';
import { affineModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';
import { runCli as cli } from '../fixtures/cli.js';

const CONFIG = `name: "affine"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100 }
instance_group [ { count: 2 kind: KIND_CPU } ]
optimization { cuda { graphs: true } }
`;

test('model-archive import packs a Triton model folder, a differs: line per difference; export --triton writes it back', async (t) => {
  const dir = await tempDir(t);
  const folder = join(dir, 'models', 'affine');
  for (const version of ['1', '2']) {
    await mkdir(join(folder, version), { recursive: true });
    await writeFile(join(folder, version, 'model.onnx'), affineModel([2, 2]));
  }
  await writeFile(join(folder, 'config.pbtxt'), CONFIG);
  const imported = await cli(['model-archive', 'import', folder, '--export-path', join(dir, 'store')]);
  assert.equal(imported.code, 0, imported.stderr);
  const lines = imported.stdout.trim().split('\n');
  assert.deepEqual(
    lines.filter((line) => line.startsWith('differs: ')).map((line) => line.split(' ')[1]),
    [
      'optimization.cuda',
      'dynamic_batching.default_queue_policy.max_queue_size',
      'dynamic_batching.default_queue_policy.allow_timeout_override',
      'version_policy',
    ],
  );
  assert.match(lines.at(-1) ?? '', /^imported .*affine as .*affine\.mar \(zip, /);
  const inspected = await cli(['model-archive', 'inspect', join(dir, 'store', 'affine.mar')]);
  assert.match(inspected.stdout, /version\s+2/i, 'the highest version by default');

  const exported = await cli([
    'model-archive',
    'export',
    join(dir, 'store', 'affine.mar'),
    '--triton',
    '--export-path',
    join(dir, 'back'),
  ]);
  assert.equal(exported.code, 0, exported.stderr);
  assert.match(exported.stdout, /exported .* as .*back\/affine \(config\.pbtxt, version 2\)/);
  assert.deepEqual((await readdir(join(dir, 'back', 'affine'))).sort(), ['2', 'config.pbtxt']);
  assert.deepEqual(await readFile(join(dir, 'back', 'affine', '2', 'model.onnx')), Buffer.from(affineModel([2, 2])));
  const back = (text: string): unknown => {
    const { config } = translateTritonConfig(parseTritonConfig(text, 'config.pbtxt'), 'affine', 'config.pbtxt');
    return { ...config, runtime: undefined };
  };
  assert.deepEqual(back(await readFile(join(dir, 'back', 'affine', 'config.pbtxt'), 'utf8')), back(CONFIG));
});

test('a Triton model folder batchserve cannot serve is refused in one line naming the field', async (t) => {
  const dir = await tempDir(t);
  await mkdir(join(dir, 'model', '1'), { recursive: true });
  await writeFile(join(dir, 'model', 'config.pbtxt'), 'backend: "python"\n');
  const refused = await cli(['model-archive', 'import', join(dir, 'model'), '--export-path', dir]);
  assert.equal(refused.code, 1);
  const message = refused.stderr.trim();
  assert.equal(message.split('\n').length, 1, message);
  assert.match(
    message,
    /config\.pbtxt: backend: a Python model: nothing here runs Python \[BS_ERR_TRITON_CONFIG_UNSUPPORTED\]$/,
  );
});
