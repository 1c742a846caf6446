import { ortTypeOf } from '../../src/core/datatypes.js';
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Tensor } from '../../src/core/tensors.js';
import { tensorOf } from '../fixtures/tensors.js';
import type { Datatype } from '../../src/core/datatypes.js';
import { jsonTensorData, readJsonTensor, type JsonInput } from '../../src/protocol/json-tensor.js';

/** The JSON tensor codec on its own: range limits, spellings at their edges, and what errors say. */

const inputOf = (datatype: Datatype, dims: number[]): JsonInput => ({
  name: 'x',
  datatype,
  dims,
  count: dims.reduce((product, dim) => product * dim, 1),
});

function refused(datatype: Datatype, dims: number[], data: unknown, message: RegExp, maxElements = 1000): void {
  assert.throws(() => readJsonTensor(inputOf(datatype, dims), data, maxElements), {
    code: 'BS_ERR_INFERENCE_INPUT',
    message,
  });
}

test('INT64 and UINT64 take exactly their ranges, as numbers or digit strings, flat or nested', () => {
  const uint64 = readJsonTensor(inputOf('UINT64', [2]), ['18446744073709551615', 0], 100);
  assert.deepEqual(uint64.data, BigUint64Array.of(2n ** 64n - 1n, 0n));
  refused('UINT64', [1], ['18446744073709551616'], /^input "x": element 0 is "18446744073709551616", UINT64 needs/);
  refused('INT64', [1], ['-9223372036854775809'], /element 0 is "-9223372036854775809", INT64 needs/);
  // Nested rows are held to the same range.
  const nested = readJsonTensor(inputOf('INT64', [2, 1]), [['-9223372036854775808'], [7]], 100);
  assert.deepEqual(nested.data, BigInt64Array.of(-(2n ** 63n), 7n));
  refused('INT64', [2, 1], [[1], ['9223372036854775808']], /^input "x": element 1 is "9223372036854775808", INT64/);
  refused('UINT64', [2, 1], [[1], [-1]], /^input "x": element 1 is -1, UINT64 needs an integer in \[0, /);
  // Neither fractions nor strings with anything but digits around them.
  refused('INT64', [1], [1.5], /^input "x": element 0 is 1\.5, INT64 needs an integer in /);
  for (const text of ['x12', '12x', ' 12', '+12', '1e3', '', '123456789012345678901']) {
    refused('INT64', [1], [text], /^input "x": element 0 is ".*", INT64 needs an integer in .*a string beyond 2\^53/);
  }
});

test('an element the codec cannot read is shown in the error, cut to 40 characters', () => {
  refused('BYTES', [1], [{ a: 'x'.repeat(100) }], /^input "x": element 0 is \{"a":"x{34}, BYTES needs a string$/);
  refused('FP32', [2], [1, undefined], /^input "x": element 1 is undefined, FP32 needs a number/);
  refused('BOOL', [3], [true, 0, 'true'], /^input "x": element 2 is "true", BOOL needs true, false, 0 or 1$/);
});

test('data with more elements than the shape is refused with the count it has', () => {
  refused('BYTES', [2], ['a', 'b', 'c', 'd'], /^input "x": shape \[2\] needs 2 elements, got 4$/);
  refused('INT16', [1, 2], [[1, 2], [3]], /^input "x": shape \[1, 2\] needs 2 elements, got 3$/);
  // A shape larger than the header could describe is refused before anything is allocated;
  // the count given is of the data, nested or not.
  refused(
    'FP32',
    [2, 3],
    [
      [1, 2, 3],
      [4, 5],
    ],
    /^input "x": shape \[2, 3\] needs 6 elements, got 5$/,
    5,
  );
  refused('FP32', [2, 5], [[1], [2], [3]], /^input "x": shape \[2, 5\] needs 10 elements, got 3$/, 9);
  // At exactly the bound the elements are still read one by one, so a bad one is named.
  refused('FP32', [4], [1, 'two', 3, 4], /^input "x": element 1 is "two", FP32 needs a number/, 4);
});

test('JSON output: INT64 and UINT64 are numbers up to ±(2^53 - 1), strings beyond', () => {
  const max = BigInt(Number.MAX_SAFE_INTEGER);
  const int64 = tensorOf('int64', BigInt64Array.of(max, max + 1n, -max, -max - 1n, 0n), [5]);
  assert.equal(jsonTensorData(int64), '[9007199254740991,"9007199254740992",-9007199254740991,"-9007199254740992",0]');
  const uint64 = tensorOf('uint64', BigUint64Array.of(5n, max + 1n), [2]);
  assert.equal(jsonTensorData(uint64), '[5,"9007199254740992"]');
});

test('JSON output: each datatype spelled as the v2 protocol reads it', () => {
  const cases: [Tensor, string][] = [
    [tensorOf('string', ['a', 'é"'], [2]), '["a","é\\""]'],
    [tensorOf('bool', Uint8Array.of(0, 1, 2), [3]), '[false,true,true]'],
    [tensorOf('float32', Float32Array.of(0.5, NaN, -Infinity, -0), [4]), '[0.5,"NaN","-Infinity",0]'],
    [tensorOf('float16', Uint16Array.of(0x3c00, 0x7c00, 0x7e00), [3]), '[1,"Infinity","NaN"]'],
    [tensorOf('uint8', Uint8Array.of(255, 0), [2]), '[255,0]'],
    [tensorOf('float32', new Float32Array(0), [0]), '[]'],
  ];
  for (const [tensor, json] of cases) assert.equal(jsonTensorData(tensor), json, ortTypeOf(tensor.datatype));
});
