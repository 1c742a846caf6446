import assert from 'node:assert/strict';
import { test } from 'node:test';
import ort from 'onnxruntime-node';
import { ConfigInvalidError, HandlerInvalidError, InferenceFailedError } from '../../src/core/errors.js';
import type { Tensor, Tensors } from '../../src/core/tensors.js';
import {
  fromWireError,
  fromWireResponse,
  fromWireTensors,
  handlerRequestFromWire,
  toWireError,
  toWireRequest,
  toWireTensors,
  wireFromHandlerResponse,
} from '../../src/runtime/worker-protocol.js';

const tensor = (datatype: Tensor['datatype'], data: Tensor['data'], dims: number[]): Tensor => ({
  datatype,
  dims,
  data,
});

test('every tensor type crosses to a worker and back unchanged, numeric data as raw bytes', () => {
  const tensors: Tensors = {
    f32: tensor('FP32', Float32Array.from([1.5, -2, Math.PI]), [3]),
    f64: tensor('FP64', Float64Array.from([1e300, -0, 0.1]), [1, 3]),
    f16: tensor('FP16', Uint16Array.from([0x3c00, 0xc000]), [2]),
    i8: tensor('INT8', Int8Array.from([-128, 127]), [2]),
    u16: tensor('UINT16', Uint16Array.from([65535, 1]), [2]),
    i32: tensor('INT32', Int32Array.from([-2147483648, 7]), [2]),
    u32: tensor('UINT32', Uint32Array.from([4294967295]), [1]),
    i64: tensor('INT64', BigInt64Array.from([-(2n ** 63n), 5n]), [2]),
    u64: tensor('UINT64', BigUint64Array.from([2n ** 64n - 1n]), [1]),
    bool: tensor('BOOL', Uint8Array.from([1, 0, 1]), [3]),
    text: tensor('BYTES', ['a', 'ünï'], [2]),
  };
  // A view at an offset into a larger buffer, as decoded request tensors can be.
  const backing = new Float32Array(8).fill(9);
  tensors.f32 = tensor('FP32', backing.subarray(2, 5).fill(4), [3]);
  const wire = toWireTensors(tensors);
  for (const [name, sent] of Object.entries(wire)) {
    if (name !== 'text') assert.ok(sent.data instanceof Uint8Array, `${name} travels as bytes`);
  }
  // structuredClone is the algorithm postMessage uses.
  const back = fromWireTensors(structuredClone(wire));
  for (const [name, tensor] of Object.entries(tensors)) {
    const received = back[name] as Tensor;
    assert.equal(received.datatype, tensor.datatype, name);
    assert.deepEqual(received.dims, tensor.dims, name);
    assert.equal(received.data.constructor, tensor.data.constructor, name);
    assert.deepEqual(
      Array.from(received.data as ArrayLike<unknown>),
      Array.from(tensor.data as ArrayLike<unknown>),
      name,
    );
  }
});

test('in the worker a request becomes onnxruntime tensors over the bytes it came in, and its answer plain tensors on the way back', () => {
  const x = tensor('FP32', Float32Array.from([1, 2, 3, 4]), [1, 4]);
  const request = handlerRequestFromWire(
    structuredClone(toWireRequest({ kind: 'tensors', inputs: { x }, rows: 1, movable: false })),
  );
  assert.equal(request.kind, 'tensors');
  const input = request.kind === 'tensors' ? request.inputs.x : undefined;
  assert.ok(input instanceof ort.Tensor);
  assert.equal(input.type, 'float32');
  assert.deepEqual(Array.from(input.data as Float32Array), [1, 2, 3, 4]);
  const answer = fromWireResponse(
    structuredClone(wireFromHandlerResponse({ y: new ort.Tensor('int64', BigInt64Array.from([7n]), [1]) })),
  ) as Tensors;
  assert.equal(answer.y?.datatype, 'INT64');
  assert.ok(!(answer.y instanceof ort.Tensor), 'the server thread holds plain tensors');
  assert.deepEqual(Array.from(answer.y?.data as BigInt64Array), [7n]);
  assert.throws(() => wireFromHandlerResponse({ q: new ort.Tensor('int4', new Uint8Array(1), [2]) }), {
    code: 'BS_ERR_INFERENCE_FAILED',
    message: 'output "q": v2 cannot carry int4 tensors',
  });
  const texts = handlerRequestFromWire(structuredClone(toWireRequest({ kind: 'texts', texts: ['a', 'b'] })));
  assert.deepEqual(texts, { kind: 'texts', texts: ['a', 'b'] });
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
