import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PNG } from 'pngjs';
import { calibrationGateFeeds, GATE_BATCH } from '../../src/optimize/calibration-inputs.js';
import { validateModelConfig } from '../../src/config/model-config.js';
import { BatchserveError } from '../../src/core/errors.js';
import { tempDir } from '../fixtures/temp.js';

/** A version 1 .npy file of little-endian float32 values. */
function npy(shape: readonly number[], values: readonly number[]): Buffer {
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${shape.join(', ')}${shape.length === 1 ? ',' : ''}), }`;
  header += ' '.repeat(64 - ((10 + header.length + 1) % 64)) + '\n';
  const preamble = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, 0, 0]);
  preamble.writeUInt16LE(header.length, 8);
  return Buffer.concat([preamble, Buffer.from(header, 'latin1'), Buffer.from(new Float32Array(values).buffer)]);
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof BatchserveError, String(error));
    return error.code;
  }
  assert.fail('expected an error');
}

const x = [{ name: 'x', datatype: 'FP32' as const, shape: [-1, 2] }];

test('.npy files become passes of at most GATE_BATCH rows; a file of rank − 1 is one row', async (t) => {
  const dir = await tempDir(t);
  const twelve = Array.from({ length: 24 }, (_, i) => i);
  await writeFile(join(dir, 'a.npy'), npy([12, 2], twelve));
  await writeFile(join(dir, 'b.npy'), npy([2], [100, 101]));
  await writeFile(join(dir, 'notes.txt'), 'ignored');
  const gate = await calibrationGateFeeds(dir, x, undefined);
  assert.equal(gate.source, 'calibration');
  assert.equal(gate.samples, 13);
  assert.deepEqual(
    gate.feeds.map((feed) => feed.x?.dims),
    [
      [GATE_BATCH, 2],
      [4, 2],
      [1, 2],
    ],
  );
  assert.deepEqual([...(gate.feeds[1]?.x?.data as Float32Array)], twelve.slice(16));
  assert.deepEqual([...(gate.feeds[2]?.x?.data as Float32Array)], [100, 101]);
});

test('raw .bin rows of a fixed-shape input, and named .npy files per input of a two-input model', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'rows.bin'), Buffer.from(new Float32Array([1, 2, 3, 4, 5, 6]).buffer));
  const raw = await calibrationGateFeeds(dir, x, undefined);
  assert.deepEqual(raw.feeds[0]?.x?.dims, [3, 2]);

  const two = await tempDir(t);
  await writeFile(join(two, 'a.npy'), npy([3, 2], [1, 2, 3, 4, 5, 6]));
  await writeFile(join(two, 'b.npy'), npy([3, 2], [6, 5, 4, 3, 2, 1]));
  const inputs = [
    { name: 'a', datatype: 'FP32' as const, shape: [-1, 2] },
    { name: 'b', datatype: 'FP32' as const, shape: [-1, 2] },
  ];
  const gate = await calibrationGateFeeds(two, inputs, undefined);
  assert.deepEqual([...(gate.feeds[0]?.b?.data as Float32Array)], [6, 5, 4, 3, 2, 1]);
});

test('images go through the image-classifier preprocessing into the input shape', async (t) => {
  const dir = await tempDir(t);
  const png = new PNG({ width: 4, height: 2 });
  png.data.fill(255);
  await writeFile(join(dir, 'white.png'), PNG.sync.write(png));
  const options = validateModelConfig(
    { image_classifier: { mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] } },
    't',
  ).image_classifier;
  const gate = await calibrationGateFeeds(dir, [{ name: 'img', datatype: 'FP32', shape: [-1, 3, 2, 4] }], options);
  assert.deepEqual(gate.feeds[0]?.img?.dims, [1, 3, 2, 4]);
  assert.ok([...(gate.feeds[0]?.img?.data as Float32Array)].every((value) => Math.abs(value - 1) < 1e-6));
});

test('calibration data that does not fit is a usage error naming the file', async (t) => {
  const dir = await tempDir(t);
  await writeFile(join(dir, 'wide.npy'), npy([2, 3], [1, 2, 3, 4, 5, 6]));
  assert.equal(await codeOf(calibrationGateFeeds(dir, x, undefined)), 'BS_ERR_USAGE');
  const empty = await tempDir(t);
  assert.equal(await codeOf(calibrationGateFeeds(empty, x, undefined)), 'BS_ERR_USAGE');
  assert.equal(await codeOf(calibrationGateFeeds(join(empty, 'missing'), x, undefined)), 'BS_ERR_USAGE');
});
