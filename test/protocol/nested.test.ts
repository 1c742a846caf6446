import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { tensorOf } from '../fixtures/tensors.js';
import { floatToHalf } from '../../src/protocol/binary-tensor.js';
import { tensorToNested } from '../../src/protocol/nested.js';

test('a tensor becomes arrays nested along its shape, row-major', () => {
  const tensor = tensorOf(
    'int32',
    Int32Array.from({ length: 12 }, (_, i) => i),
    [2, 3, 2],
  );
  assert.deepEqual(tensorToNested(tensor), [
    [
      [0, 1],
      [2, 3],
      [4, 5],
    ],
    [
      [6, 7],
      [8, 9],
      [10, 11],
    ],
  ]);
  assert.deepEqual(tensorToNested(tensorOf('float32', Float32Array.of(0.5, -2, 3.25), [3])), [0.5, -2, 3.25]);
  assert.deepEqual(tensorToNested(tensorOf('float32', Float32Array.of(0.5, 1.5), [2, 1])), [[0.5], [1.5]]);
});

test('a rank-0 tensor is its single value; a zero-length dimension is an empty array', () => {
  assert.equal(tensorToNested(tensorOf('float32', Float32Array.of(4.5), [])), 4.5);
  assert.deepEqual(tensorToNested(tensorOf('float32', new Float32Array(0), [2, 0])), [[], []]);
});

test('values come out as plain JSON: booleans, numbers for 64-bit integers and halves, strings as they are', () => {
  assert.deepEqual(tensorToNested(tensorOf('bool', Uint8Array.of(0, 1, 2, 0), [2, 2])), [
    [false, true],
    [true, false],
  ]);
  assert.deepEqual(tensorToNested(tensorOf('int64', BigInt64Array.of(-3n, 2n ** 40n), [2])), [-3, 2 ** 40]);
  assert.deepEqual(tensorToNested(tensorOf('uint64', BigUint64Array.of(7n, 0n), [1, 2])), [[7, 0]]);
  const halves = Uint16Array.of(floatToHalf(1.5), floatToHalf(-0.25), floatToHalf(65504));
  assert.deepEqual(tensorToNested(tensorOf('float16', halves, [3])), [1.5, -0.25, 65504]);
  assert.deepEqual(tensorToNested(tensorOf('string', ['a', 'b', 'c', 'd'], [2, 2])), [
    ['a', 'b'],
    ['c', 'd'],
  ]);
  // A UINT16 tensor shares FP16's storage but holds integers, not halves.
  assert.deepEqual(tensorToNested(tensorOf('uint16', Uint16Array.of(15360, 1), [2])), [15360, 1]);
});

test('property: flattening the nested answer gives back the data, and each level has its dimension', () => {
  const shape = fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 });
  fc.assert(
    fc.property(shape, (dims) => {
      const size = dims.reduce((a, b) => a * b, 1);
      const data = Int32Array.from({ length: size }, (_, i) => i * 7 - 3);
      let level: unknown = tensorToNested(tensorOf('int32', data, dims));
      for (const dim of dims) {
        assert.ok(Array.isArray(level));
        assert.equal(level.length, dim);
        level = level[0];
      }
      assert.deepEqual([tensorToNested(tensorOf('int32', data, dims))].flat(dims.length), Array.from(data));
    }),
  );
});
