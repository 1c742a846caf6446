import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { BatchserveError } from '../../src/core/errors.js';
import type { Converter } from '../../src/optimize/converters.js';
import { prepareModel } from '../../src/optimize/prepare-model.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';

/** A converter whose result is corrupt: y = 2x + 2 where the original answers y = 2x + 1. */
const corrupting: Converter = () => ({ model: affineModel([4], 'batch', 2), summary: 'corrupted on purpose' });

test('a corrupt conversion is refused with BS_ERR_ACCURACY_GATE; with acceptAccuracyLoss it is kept, its failures listed', async (t) => {
  const dir = await tempDir(t);
  const serializedFile = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const configFile = join(dir, 'config.yaml');
  await writeFile(configFile, 'max_batch_size: 8\n');
  await assert.rejects(
    prepareModel({ serializedFile, configFile, precision: 'int8', converter: corrupting }),
    (error) => {
      assert.ok(error instanceof BatchserveError);
      assert.equal(error.code, 'BS_ERR_ACCURACY_GATE');
      assert.match(
        error.message,
        /the int8 model differs from the original on 64 random samples: output "y" max relative error/,
      );
      return true;
    },
  );

  const accepted = await prepareModel({
    serializedFile,
    configFile,
    precision: 'int8',
    converter: corrupting,
    acceptAccuracyLoss: true,
  });
  assert.equal(accepted.servedFile, 'affine.int8.onnx');
  assert.deepEqual(
    accepted.files.map((file) => file.path),
    ['affine.int8.onnx'],
  );
  assert.equal(accepted.conversion, 'corrupted on purpose');
  assert.equal(accepted.manifest.accuracy?.passed, false);
  assert.equal(accepted.manifest.accuracy?.limits.maxRelError, 0.15);
  assert.equal(accepted.acceptedFailures?.length, 1);

  // A looser --max-error passes the same conversion.
  const loose = await prepareModel({
    serializedFile,
    configFile,
    precision: 'int8',
    converter: corrupting,
    maxError: 0.5,
  });
  assert.equal(loose.manifest.accuracy?.passed, true);
  assert.equal(loose.acceptedFailures, undefined);
});

test('--optimize alone keeps the model as served and adds only the optimised graph and its start-up times', async (t) => {
  const dir = await tempDir(t);
  const serializedFile = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const prepared = await prepareModel({ serializedFile, optimize: true });
  assert.equal(prepared.servedFile, undefined);
  assert.deepEqual(
    prepared.files.map((file) => file.path),
    ['affine.optimized.onnx'],
  );
  assert.deepEqual(Object.keys(prepared.manifest).sort(), ['optimization', 'optimizedFile']);
  assert.equal(prepared.manifest.optimization?.level, 'extended');
  assert.ok((prepared.startup?.originalMs ?? 0) > 0 && (prepared.startup?.optimizedMs ?? 0) > 0);
});
