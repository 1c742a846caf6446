import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ModelStatistics, statisticsResponse } from '../../src/metrics/model-statistics.js';

const zero = { count: 0, ns: 0 };

/** A clock that reads 1000 ms, then 2000 ms, … so last_inference is known. */
function steppingClock(): () => number {
  let ms = 0;
  return () => (ms += 1000);
}

test('five requests in two batches and one failure give Triton’s statistics object', () => {
  const stats = new ModelStatistics('resnet', '1', steppingClock());
  const big = { computeInputNs: 300, computeInferNs: 3000, computeOutputNs: 30 };
  const small = { computeInputNs: 200, computeInferNs: 2000, computeOutputNs: 20 };

  stats.recordExecution(3, big);
  for (const queueNs of [10, 20, 30]) stats.recordSuccess({ queueNs, ...big, totalNs: queueNs + 3330 + 5 });
  stats.recordExecution(2, small);
  for (const queueNs of [40, 50]) stats.recordSuccess({ queueNs, ...small, totalNs: queueNs + 2220 + 5 });
  stats.recordFailure(777);

  assert.deepEqual(stats.toJSON(), {
    name: 'resnet',
    version: '1',
    last_inference: 2000,
    inference_count: 5,
    execution_count: 2,
    inference_stats: {
      success: { count: 5, ns: 60 + 3 * 3335 + 90 + 2 * 2225 },
      fail: { count: 1, ns: 777 },
      queue: { count: 5, ns: 150 },
      compute_input: { count: 5, ns: 3 * 300 + 2 * 200 },
      compute_infer: { count: 5, ns: 3 * 3000 + 2 * 2000 },
      compute_output: { count: 5, ns: 3 * 30 + 2 * 20 },
      cache_hit: zero,
      cache_miss: zero,
    },
    batch_stats: [
      {
        batch_size: 2,
        compute_input: { count: 1, ns: 200 },
        compute_infer: { count: 1, ns: 2000 },
        compute_output: { count: 1, ns: 20 },
      },
      {
        batch_size: 3,
        compute_input: { count: 1, ns: 300 },
        compute_infer: { count: 1, ns: 3000 },
        compute_output: { count: 1, ns: 30 },
      },
    ],
  });
});

test('a version never run reports zeros and no batches', () => {
  assert.deepEqual(new ModelStatistics('m', '7').toJSON(), {
    name: 'm',
    version: '7',
    last_inference: 0,
    inference_count: 0,
    execution_count: 0,
    inference_stats: {
      success: zero,
      fail: zero,
      queue: zero,
      compute_input: zero,
      compute_infer: zero,
      compute_output: zero,
      cache_hit: zero,
      cache_miss: zero,
    },
    batch_stats: [],
  });
});

test('batch_stats are sorted by batch size and accumulate per size', () => {
  const stats = new ModelStatistics('m', '1', steppingClock());
  const t = { computeInputNs: 1, computeInferNs: 10, computeOutputNs: 100 };
  for (const size of [8, 1, 64, 4, 1, 16]) stats.recordExecution(size, t);
  const json = stats.toJSON();
  assert.deepEqual(
    json.batch_stats.map((b) => [b.batch_size, b.compute_infer.count, b.compute_infer.ns]),
    [
      [1, 2, 20],
      [4, 1, 10],
      [8, 1, 10],
      [16, 1, 10],
      [64, 1, 10],
    ],
  );
  assert.equal(json.inference_count, 94);
  assert.equal(json.execution_count, 6);
  assert.equal(json.last_inference, 6000);
});

test('fractional nanoseconds are summed exactly and reported whole', () => {
  const stats = new ModelStatistics('m', '1');
  for (let i = 0; i < 2; i++) {
    stats.recordSuccess({ queueNs: 0.4, computeInputNs: 0, computeInferNs: 1.25, computeOutputNs: 0, totalNs: 2.4 });
  }
  const { inference_stats } = stats.toJSON();
  assert.deepEqual(inference_stats.queue, { count: 2, ns: 1 });
  assert.deepEqual(inference_stats.compute_infer, { count: 2, ns: 3 });
  assert.deepEqual(inference_stats.success, { count: 2, ns: 5 });
});

test('statisticsResponse wraps versions in model_stats and serializes through toJSON', () => {
  const a = new ModelStatistics('a', '1');
  const b = new ModelStatistics('b', '2');
  b.recordFailure(5);
  const response = statisticsResponse([a, b]);
  assert.deepEqual(response, { model_stats: [a.toJSON(), b.toJSON()] });
  assert.deepEqual(JSON.parse(JSON.stringify({ model_stats: [a, b] })), response);
});
