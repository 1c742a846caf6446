import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InferenceInputError } from '../../src/core/errors.js';
import type { HandlerRequest } from '../../src/core/request.js';
import type { Tensor } from '../../src/core/tensors.js';
import type { SubmitOptions, SubmitResult } from '../../src/batching/batcher.js';
import type { ReadyRow } from '../../src/predict/dataset.js';
import { score } from '../../src/predict/score.js';

const scorer = { name: 'm', version: '1', outputNames: ['y'] };
const timings = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };

/** A request of `values.length` rows of x [rows, 1]; with `chunk`, one request for them all. */
function request(first: number, values: number[], chunk: boolean): ReadyRow {
  const x: Tensor = { datatype: 'FP32', dims: [values.length, 1], data: Float32Array.from(values) };
  const ids = values.map((_, index) => `id${first + index}`);
  return {
    row: first,
    id: ids[0] as string,
    request: { kind: 'tensors', inputs: { x }, rows: values.length, movable: false },
    rows: values.length,
    shapeKey: '1',
    ...(chunk
      ? {
          chunk: {
            count: values.length,
            ids,
            split: async () => values.map((value, index) => request(first + index, [value], false)),
          },
        }
      : {}),
  };
}

/** y = 2x; any request holding a negative value fails, as a batch with one bad row does. */
function model(answer: (x: Tensor) => unknown = (x) => ({ y: double(x) })) {
  const calls: number[] = [];
  return {
    calls,
    infer: async (handlerRequest: HandlerRequest, options: SubmitOptions): Promise<SubmitResult> => {
      const x = (handlerRequest.kind === 'tensors' ? handlerRequest.inputs.x : undefined) as Tensor;
      calls.push(options.rows);
      if ((x.data as Float32Array).some((value) => value < 0)) throw new InferenceInputError('negative');
      return { response: answer(x), queueNs: 0, timings, batchRows: options.rows, instanceId: 'i' };
    },
  };
}
const double = (x: Tensor): Tensor => ({
  datatype: 'FP32',
  dims: x.dims,
  data: (x.data as Float32Array).map((value) => value * 2),
});

test('a chunk answers one record a row, with each row its own id and a [1, …] shape', async () => {
  const fake = model();
  const outcomes = await score(fake, scorer, request(10, [1, 2, 3], true));
  assert.deepEqual(fake.calls, [3], 'one request for the three rows');
  assert.deepEqual(
    outcomes.map((outcome) => ('record' in outcome ? [outcome.row, outcome.record.id, outcome.record.outputs] : [])),
    [1, 2, 3].map((value, index) => [
      10 + index,
      `id${10 + index}`,
      { y: { datatype: 'FP32', shape: [1, 1], data: [value * 2] } },
    ]),
  );
});

test('a chunk that fails runs again one row a request: only the bad row fails', async () => {
  const fake = model();
  const outcomes = await score(fake, scorer, request(0, [1, -1, 3], true));
  assert.deepEqual(fake.calls, [3, 1, 1, 1]);
  assert.deepEqual(
    outcomes.map((outcome) => [outcome.row, 'failure' in outcome ? outcome.failure.code : 'scored']),
    [
      [0, 'scored'],
      [1, 'BS_ERR_INFERENCE_INPUT'],
      [2, 'scored'],
    ],
  );
});

test('a chunk answered as a whole (not row by row) runs again one row a request', async () => {
  const fake = model((x) => (x.dims[0] === 1 ? { y: double(x) } : [{ label: 'one answer for all' }]));
  const outcomes = await score(fake, scorer, request(0, [1, 2], true));
  assert.deepEqual(fake.calls, [2, 1, 1]);
  assert.deepEqual(
    outcomes.map((outcome) => ('record' in outcome ? outcome.record.outputs?.y?.data : undefined)),
    [[2], [4]],
  );
  const single = await score(model(), scorer, request(5, [-2], false));
  assert.deepEqual(single, [{ row: 5, id: 'id5', failure: { reason: 'negative', code: 'BS_ERR_INFERENCE_INPUT' } }]);
});
