import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { LatencyBudgetError, QueueFullError } from '../../src/core/errors.js';
import { ERROR_CODE_KEY, grpcError } from '../../src/server/grpc-status.js';

test('load shed by the queue or the latency budget is UNAVAILABLE (retryable), with its code in the trailers', () => {
  for (const error of [new QueueFullError('Exceeds maximum queue size'), new LatencyBudgetError('past max_latency')]) {
    const answer = grpcError(error);
    assert.equal(answer.code, status.UNAVAILABLE, error.code);
    assert.deepEqual(answer.metadata?.get(ERROR_CODE_KEY), [error.code]);
  }
});
