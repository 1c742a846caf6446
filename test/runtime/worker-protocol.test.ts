import assert from 'node:assert/strict';
import { test } from 'node:test';
import ort from 'onnxruntime-node';
import { ConfigInvalidError, HandlerInvalidError, InferenceFailedError } from '../../src/core/errors.js';
import { fromWireError, fromWireTensors, toWireError, toWireTensors } from '../../src/runtime/worker-protocol.js';

test('every tensor type crosses to a worker and back unchanged, numeric data as raw bytes', () => {
  const tensors = {
    f32: new ort.Tensor('float32', Float32Array.from([1.5, -2, Math.PI]), [3]),
    f64: new ort.Tensor('float64', Float64Array.from([1e300, -0, 0.1]), [1, 3]),
    f16: new ort.Tensor('float16', Uint16Array.from([0x3c00, 0xc000]), [2]),
    i8: new ort.Tensor('int8', Int8Array.from([-128, 127]), [2]),
    u16: new ort.Tensor('uint16', Uint16Array.from([65535, 1]), [2]),
    i32: new ort.Tensor('int32', Int32Array.from([-2147483648, 7]), [2]),
    u32: new ort.Tensor('uint32', Uint32Array.from([4294967295]), [1]),
    i64: new ort.Tensor('int64', BigInt64Array.from([-(2n ** 63n), 5n]), [2]),
    u64: new ort.Tensor('uint64', BigUint64Array.from([2n ** 64n - 1n]), [1]),
    bool: new ort.Tensor('bool', Uint8Array.from([1, 0, 1]), [3]),
    text: new ort.Tensor('string', ['a', 'ünï'], [2]),
  };
  // A view at an offset into a larger buffer, as decoded request tensors can be.
  const backing = new Float32Array(8).fill(9);
  tensors.f32 = new ort.Tensor('float32', backing.subarray(2, 5).fill(4), [3]);
  const wire = toWireTensors(tensors);
  for (const [name, tensor] of Object.entries(wire)) {
    if (name !== 'text') assert.ok(tensor.data instanceof Uint8Array, `${name} travels as bytes`);
  }
  // structuredClone is the algorithm postMessage uses.
  const back = fromWireTensors(structuredClone(wire));
  for (const [name, tensor] of Object.entries(tensors)) {
    const received = back[name] as ort.Tensor;
    assert.equal(received.type, tensor.type, name);
    assert.deepEqual(received.dims, tensor.dims, name);
    assert.equal(received.data.constructor, tensor.data.constructor, name);
    assert.deepEqual(
      Array.from(received.data as ArrayLike<unknown>),
      Array.from(tensor.data as ArrayLike<unknown>),
      name,
    );
  }
});

test('an error crosses from a worker as its own class, code, status and message, a config error with its problems', () => {
  const config = fromWireError(structuredClone(toWireError(new ConfigInvalidError('m.yaml', ['a: too big']))));
  assert.ok(config instanceof ConfigInvalidError);
  assert.equal(config.code, 'BS_ERR_CONFIG_INVALID');
  assert.equal(config.httpStatus, 400);
  assert.equal(config.message, 'm.yaml: a: too big');
  assert.equal(config.name, 'ConfigInvalidError');
  assert.deepEqual(config.problems, ['a: too big']);
  const handler = fromWireError(structuredClone(toWireError(new HandlerInvalidError('no'))));
  assert.ok(handler instanceof HandlerInvalidError);
  assert.equal(handler.message, 'no');
  const plain = fromWireError(structuredClone(toWireError(new Error('boom'))));
  assert.ok(plain instanceof InferenceFailedError);
  assert.equal(plain.message, 'boom');
});
