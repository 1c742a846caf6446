import assert from 'node:assert/strict';
import { test } from 'node:test';
import { UsageError } from '../../src/core/errors.js';
import {
  prepareV2Request,
  retarget,
  type ModelSignature,
  type PreparedRequest,
  type V2Framing,
} from '../../src/protocol/prepared-request.js';

// --- helpers ------------------------------------------------------------------------------------

const JSON_BODY: V2Framing = { headerLength: undefined, binaryBody: false };

/** A batching model: `a` [-1, 3] FP32 and `b` [-1, -1] INT64 in, `y` and `z` out. */
const SIGNATURE: ModelSignature = {
  inputs: [
    { name: 'a', datatype: 'FP32', shape: [-1, 3] },
    { name: 'b', datatype: 'INT64', shape: [-1, -1] },
  ],
  outputs: [
    { name: 'y', datatype: 'FP32', shape: [-1, 3] },
    { name: 'z', datatype: 'INT64', shape: [-1] },
  ],
  batching: true,
};

interface Input {
  name: string;
  datatype: string;
  shape: number[];
  data?: unknown[];
  parameters?: Record<string, unknown>;
}

/** An input of `shape` whose data counts up from 0 (flat). */
function input(name: string, datatype: string, shape: number[]): Input {
  const count = shape.reduce((a, b) => a * b, 1);
  return { name, datatype, shape, data: Array.from({ length: count }, (_, i) => i) };
}

const a = (shape: number[]): Input => input('a', 'FP32', shape);
const b = (shape: number[]): Input => input('b', 'INT64', shape);

function prepare(header: Record<string, unknown>, signature = SIGNATURE, framing = JSON_BODY): PreparedRequest {
  return prepareV2Request(Buffer.from(JSON.stringify(header)), framing, signature);
}

const refused = (message: RegExp, code = 'BS_ERR_INFERENCE_INPUT') => ({ code, httpStatus: 400, message });

// --- the prepared request ----------------------------------------------------------------------------

test('a prepared request is frozen, its inputs and outputs too', () => {
  const prepared = prepare({ id: 'r1', inputs: [a([2, 3]), b([2, 4])] });
  assert.ok(Object.isFrozen(prepared));
  assert.ok(Object.isFrozen(prepared.inputs));
  assert.ok(Object.isFrozen(prepared.outputs));
  // ES modules are strict: writes to a frozen object throw.
  assert.throws(() => {
    (prepared as { rows: number }).rows = 5;
  }, TypeError);
  assert.throws(() => {
    (prepared.inputs as Record<string, unknown>).c = prepared.inputs.a;
  }, TypeError);
  assert.throws(() => {
    (prepared.outputs as unknown[]).push({ name: 'y', binary: false });
  }, TypeError);
  assert.equal(prepared.rows, 2);
  assert.equal(prepared.id, 'r1');
  assert.ok(Object.isFrozen(retarget(prepared, SIGNATURE)));
});

test('rows and shapeKey: the batch dimension, and the other dimensions in the signature order', () => {
  // The request lists b first; the key follows the signature (a, then b).
  const batched = prepare({ inputs: [b([2, 5]), a([2, 3])] });
  assert.equal(batched.rows, 2);
  assert.equal(batched.shapeKey, '3|5');
  assert.deepEqual(batched.inputs.a?.dims, [2, 3]);
  assert.deepEqual(Array.from(batched.inputs.b?.data as BigInt64Array).slice(0, 3), [0n, 1n, 2n]);
  // The batch size is not part of the key; other dimensions are.
  assert.equal(prepare({ inputs: [a([3, 3]), b([3, 5])] }).shapeKey, '3|5');
  assert.equal(prepare({ inputs: [a([1, 3]), b([1, 6])] }).shapeKey, '3|6');

  // Without batching every dimension is in the key and a request is one row, whatever its first dimension.
  const fixed: ModelSignature = { ...SIGNATURE, batching: false };
  const unbatched = prepare({ inputs: [a([4, 3]), b([2, 5])] }, fixed);
  assert.equal(unbatched.rows, 1);
  assert.equal(unbatched.shapeKey, '4x3|2x5');
  // A scalar's part of the key is empty.
  const scalars: ModelSignature = {
    inputs: [
      { name: 's', datatype: 'FP32', shape: [] },
      { name: 'v', datatype: 'FP32', shape: [-1] },
    ],
    outputs: SIGNATURE.outputs,
    batching: false,
  };
  const scalar = prepare({ inputs: [input('v', 'FP32', [2]), input('s', 'FP32', [])] }, scalars);
  assert.equal(scalar.shapeKey, '|2');
  assert.equal(scalar.rows, 1);
});

test('inputs disagreeing on the batch dimension, or a batch of 0 rows, are refused', () => {
  assert.throws(
    () => prepare({ inputs: [a([2, 3]), b([3, 5])] }),
    refused(/^inputs disagree on the batch dimension: "b" has 3 rows, "a" has 2$/),
  );
  assert.throws(() => prepare({ inputs: [a([0, 3]), b([0, 5])] }), refused(/has size 0 at dimension 0/));
  // Without batching the first dimensions are independent.
  assert.equal(prepare({ inputs: [a([2, 3]), b([3, 5])] }, { ...SIGNATURE, batching: false }).rows, 1);
});

test('outputs: every model output by default, binary as binary_data_output says; an unknown one is a 400', () => {
  const inputs = [a([1, 3]), b([1, 1])];
  assert.deepEqual(prepare({ inputs }).outputs, [
    { name: 'y', binary: false },
    { name: 'z', binary: false },
  ]);
  assert.deepEqual(prepare({ inputs, parameters: { binary_data_output: true } }).outputs, [
    { name: 'y', binary: true },
    { name: 'z', binary: true },
  ]);
  assert.deepEqual(
    prepare({
      inputs,
      parameters: { binary_data_output: true },
      outputs: [{ name: 'z', parameters: { binary_data: false, classification: 2 } }],
    }).outputs,
    [{ name: 'z', binary: false, classification: 2 }],
  );
  assert.throws(
    () => prepare({ inputs, outputs: [{ name: 'y' }, { name: 'nope' }] }),
    refused(/^unknown output "nope" \(the model has y, z\)$/),
  );
});

test('tensors are checked against the signature: missing, unknown, datatype, rank, fixed dimension', () => {
  const cases: [string, Input[], RegExp][] = [
    ['missing', [a([1, 3])], /^input "b" is missing$/],
    ['unknown', [a([1, 3]), b([1, 2]), input('c', 'FP32', [1])], /^unknown input "c" \(the model takes a, b\)$/],
    ['datatype', [input('a', 'FP64', [1, 3]), b([1, 2])], /^input "a": datatype FP64, the model expects FP32$/],
    ['rank', [a([3]), b([1, 2])], /^input "a": shape \[3\] has rank 1, the model expects rank 2 \[-1, 3\]$/],
    [
      'fixed dimension',
      [a([1, 4]), b([1, 2])],
      /^input "a": shape \[1, 4\] does not match the model's \[-1, 3\] at dimension 1$/,
    ],
    ['a duplicate', [a([1, 3]), a([1, 3]), b([1, 2])], /^input "a" is given twice$/],
  ];
  for (const [what, inputs, message] of cases) {
    assert.throws(() => prepare({ inputs }), refused(message), what);
  }
});

test('priority and timeout: non-negative integers, 0 the same as absent; anything else is a usage error', () => {
  const inputs = [a([1, 3]), b([1, 1])];
  const none = prepare({ inputs });
  assert.equal(none.priority, undefined);
  assert.equal(none.timeoutUs, undefined);
  const zero = prepare({ inputs, parameters: { priority: 0, timeout: 0 } });
  assert.equal(zero.priority, undefined);
  assert.equal(zero.timeoutUs, undefined);
  const set = prepare({ inputs, parameters: { priority: 3, timeout: 250_000 } });
  assert.equal(set.priority, 3);
  assert.equal(set.timeoutUs, 250_000);
  for (const key of ['priority', 'timeout']) {
    for (const value of [-1, 1.5, '3', null, true, 2 ** 53, [1], {}]) {
      const what = `${key}: ${JSON.stringify(value)}`;
      assert.throws(
        () => prepare({ inputs, parameters: { [key]: value } }),
        (error: unknown) => {
          assert.ok(error instanceof UsageError, what);
          assert.equal(error.code, 'BS_ERR_USAGE');
          assert.equal(error.httpStatus, 400);
          assert.match(error.message, new RegExp(`^parameter "${key}" must be a non-negative integer`));
          return true;
        },
        what,
      );
    }
  }
});

// --- framing ------------------------------------------------------------------------------------------

/** A JSON header (input `a` as 12 binary bytes, `b` as JSON) and the binary data after it. */
function binaryRequest(): { body: Buffer; headerLength: number } {
  const header = Buffer.from(
    JSON.stringify({
      inputs: [{ name: 'a', datatype: 'FP32', shape: [1, 3], parameters: { binary_data_size: 12 } }, b([1, 2])],
    }),
  );
  return {
    body: Buffer.concat([header, Buffer.from(new Float32Array([1.5, -2, 3]).buffer)]),
    headerLength: header.length,
  };
}

test('Inference-Header-Content-Length must be a length in bytes', () => {
  const { body, headerLength } = binaryRequest();
  const framed = (value: string): PreparedRequest =>
    prepareV2Request(body, { headerLength: value, binaryBody: true }, SIGNATURE);
  for (const value of [String(headerLength), ` ${headerLength} `, `00${headerLength}`]) {
    assert.deepEqual(Array.from(framed(value).inputs.a?.data as Float32Array), [1.5, -2, 3], value);
  }
  // Not 0 (a raw binary body) when empty; not parsed leniently as Number() would.
  for (const value of ['abc', '', ' ', '-1', '1.5', '0x10', '1e3', '+12', `${headerLength}abc`]) {
    assert.throws(
      () => framed(value),
      refused(/^Inference-Header-Content-Length ".*" is not a length in bytes$/),
      JSON.stringify(value),
    );
  }
  assert.throws(() => framed(String(body.length + 1)), refused(/does not fit a body of/));
  assert.throws(() => framed(String(headerLength - 1)), refused(/not JSON/));
});

test('a binary body needs the Inference-Header-Content-Length header', () => {
  const json = Buffer.from(JSON.stringify({ inputs: [a([1, 3]), b([1, 1])] }));
  assert.throws(
    () => prepareV2Request(json, { headerLength: undefined, binaryBody: true }, SIGNATURE),
    refused(/^a binary body needs the Inference-Header-Content-Length header$/),
  );
  // The same JSON as a JSON body, or framed with its length, is fine.
  assert.equal(prepareV2Request(json, JSON_BODY, SIGNATURE).rows, 1);
  assert.equal(prepareV2Request(json, { headerLength: String(json.length), binaryBody: true }, SIGNATURE).rows, 1);
});

test('a raw binary body (header length 0) is the single input of a one-input model', () => {
  const single: ModelSignature = {
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 2] }],
    outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 2] }],
    batching: true,
  };
  const body = Buffer.from(new Float32Array([1, 2, 3, 4, 5, 6]).buffer);
  const prepared = prepareV2Request(body, { headerLength: '0', binaryBody: true }, single);
  assert.equal(prepared.rows, 3);
  assert.equal(prepared.shapeKey, '2');
  assert.deepEqual(prepared.inputs.x?.dims, [3, 2]);
  assert.deepEqual(prepared.outputs, [{ name: 'y', binary: true }]);
  assert.throws(
    () => prepareV2Request(body, { headerLength: '0', binaryBody: true }, SIGNATURE),
    refused(/needs a model with one input, this one has 2/),
  );
  assert.throws(
    () => prepareV2Request(body.subarray(0, 10), { headerLength: '0', binaryBody: true }, single),
    refused(/10 bytes are not a whole number of 8-byte rows/),
  );
});

// --- retarget ------------------------------------------------------------------------------------------

test('retarget checks the request against another signature and places it in that one’s batches', () => {
  const prepared = prepare({
    id: 'r7',
    inputs: [a([2, 3]), b([2, 5])],
    parameters: { priority: 2, timeout: 1000 },
    outputs: [{ name: 'z' }],
  });
  // A shadow version that does not batch: every dimension in the key, one row.
  const unbatched = retarget(prepared, { ...SIGNATURE, batching: false });
  assert.equal(unbatched.rows, 1);
  assert.equal(unbatched.shapeKey, '2x3|2x5');
  assert.equal(unbatched.id, 'r7');
  assert.equal(unbatched.priority, 2);
  assert.equal(unbatched.timeoutUs, 1000);
  assert.deepEqual(unbatched.outputs, [{ name: 'z', binary: false }]);
  assert.equal(unbatched.inputs, prepared.inputs);
  assert.ok(Object.isFrozen(unbatched));
  // One that lists its inputs the other way round keys them in its own order.
  const reordered = retarget(prepared, { ...SIGNATURE, inputs: [...SIGNATURE.inputs].reverse() });
  assert.equal(reordered.shapeKey, '5|3');
  assert.equal(reordered.rows, 2);
  // The original is untouched.
  assert.equal(prepared.rows, 2);
  assert.equal(prepared.shapeKey, '3|5');
});

test('retarget refuses a request the other signature does not take', () => {
  const prepared = prepare({ inputs: [a([2, 3]), b([2, 5])] });
  const renamed: ModelSignature = {
    ...SIGNATURE,
    inputs: [{ name: 'a2', datatype: 'FP32', shape: [-1, 3] }, SIGNATURE.inputs[1] as ModelSignature['inputs'][0]],
  };
  // The input sent under the other name is reported by that name, not as "a2" missing.
  assert.throws(() => retarget(prepared, renamed), refused(/^unknown input "a" \(the model takes a2, b\)$/));
  const wider: ModelSignature = {
    ...SIGNATURE,
    inputs: [{ name: 'a', datatype: 'FP32', shape: [-1, 4] }, SIGNATURE.inputs[1] as ModelSignature['inputs'][0]],
  };
  assert.throws(() => retarget(prepared, wider), refused(/does not match the model's \[-1, 4\] at dimension 1/));
  const fp64: ModelSignature = {
    ...SIGNATURE,
    inputs: [{ name: 'a', datatype: 'FP64', shape: [-1, 3] }, SIGNATURE.inputs[1] as ModelSignature['inputs'][0]],
  };
  assert.throws(() => retarget(prepared, fp64), refused(/datatype FP32, the model expects FP64/));
  const fewer: ModelSignature = { ...SIGNATURE, inputs: [SIGNATURE.inputs[0] as ModelSignature['inputs'][0]] };
  assert.throws(() => retarget(prepared, fewer), refused(/^unknown input "b"/));
  // A request whose inputs differ in their first dimension fits a model that does not batch, not one that does.
  const uneven = prepare({ inputs: [a([2, 3]), b([3, 5])] }, { ...SIGNATURE, batching: false });
  assert.throws(() => retarget(uneven, SIGNATURE), refused(/inputs disagree on the batch dimension/));
});
