import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DATATYPES } from '../../src/core/datatypes.js';
import { elementSize, readBinaryTensor } from '../../src/protocol/binary-tensor.js';

test('element sizes: fixed for numeric datatypes, 0 for BYTES whose elements vary', () => {
  const sizes = Object.fromEntries(DATATYPES.map((datatype) => [datatype, elementSize(datatype)]));
  assert.deepEqual(sizes, {
    BOOL: 1,
    UINT8: 1,
    UINT16: 2,
    UINT32: 4,
    UINT64: 8,
    INT8: 1,
    INT16: 2,
    INT32: 4,
    INT64: 8,
    FP16: 2,
    FP32: 4,
    FP64: 8,
    BYTES: 0,
  });
});

test('BYTES elements are read only from their own part of the body', () => {
  // "abc" declares 3 bytes but its part ends after 1; the next part's bytes are not borrowed.
  const body = Buffer.concat([Buffer.from([3, 0, 0, 0]), Buffer.from('abcdef')]);
  assert.throws(() => readBinaryTensor('s', 'BYTES', [1], 1, body, 0, 5), {
    code: 'BS_ERR_INFERENCE_INPUT',
    message: 'input "s": BYTES element 0 declares 3 bytes, only 1 remain',
  });
  assert.deepEqual(readBinaryTensor('s', 'BYTES', [1], 1, body, 0, 7).data, ['abc']);
  // An empty string is a length prefix of zero and nothing after it.
  assert.deepEqual(readBinaryTensor('s', 'BYTES', [2], 2, Buffer.alloc(8), 0, 8).data, ['', '']);
});
