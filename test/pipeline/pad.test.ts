import assert from 'node:assert/strict';
import { test } from 'node:test';
import ort from 'onnxruntime-node';
import { emptyRows, padToBucket } from '../../src/pipeline/pad.js';

test('pads one axis up to the next multiple, keeping every row in place', () => {
  const tensor = new ort.Tensor('float32', Float32Array.from([1, 2, 3, 4, 5, 6]), [2, 3]);
  const padded = padToBucket(tensor, { axis: 1, multiple: 4, value: -1 }, 'x');
  assert.deepEqual(padded.dims, [2, 4]);
  assert.deepEqual(Array.from(padded.data as Float32Array), [1, 2, 3, -1, 4, 5, 6, -1]);
  assert.equal(padToBucket(padded, { axis: 1, multiple: 4, value: 0 }, 'x'), padded, 'a full bucket is left as is');
});

test('pads an inner axis of int64 data, capped at max; beyond max is bad input', () => {
  const tensor = new ort.Tensor('int64', BigInt64Array.from([1n, 2n, 3n, 4n, 5n, 6n]), [1, 3, 2]);
  const padded = padToBucket(tensor, { axis: 1, multiple: 8, max: 5, value: 7 }, 'ids');
  assert.deepEqual(padded.dims, [1, 5, 2]);
  assert.deepEqual(Array.from(padded.data as BigInt64Array), [1n, 2n, 3n, 4n, 5n, 6n, 7n, 7n, 7n, 7n]);
  assert.throws(
    () => padToBucket(tensor, { axis: 1, multiple: 1, max: 2, value: 0 }, 'ids'),
    (error: Error & { code?: string }) =>
      error.code === 'BS_ERR_INFERENCE_INPUT' && /over the padding max 2/.test(error.message),
  );
});

test('an output with no rows keeps its datatype and fixed dimensions', () => {
  const empty = emptyRows({ name: 'y', datatype: 'FP32', shape: [-1, 4, -1] });
  assert.deepEqual(empty.dims, [0, 4, 0]);
  assert.equal(empty.type, 'float32');
  assert.equal(empty.data.length, 0);
});
