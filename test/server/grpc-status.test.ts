import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { InferenceInputError, LatencyBudgetError, QueueFullError, QueueTimeoutError } from '../../src/core/errors.js';
import {
  ERROR_CODE_KEY,
  grpcError,
  RETRY_PUSHBACK_KEY,
  STATUS_MESSAGE_MAX_CHARACTERS,
} from '../../src/server/grpc-status.js';

test('load shed by the queue or the latency budget is UNAVAILABLE (retryable), with its code in the trailers', () => {
  for (const error of [new QueueFullError('Exceeds maximum queue size'), new LatencyBudgetError('past max_latency')]) {
    const answer = grpcError(error);
    assert.equal(answer.code, status.UNAVAILABLE, error.code);
    assert.deepEqual(answer.metadata?.get(ERROR_CODE_KEY), [error.code]);
    assert.deepEqual(answer.metadata?.get(RETRY_PUSHBACK_KEY), ['1000'], 'come back in 1 s, as Retry-After says');
  }
  const timedOut = grpcError(new QueueTimeoutError('Request timeout expired'));
  assert.equal(timedOut.code, status.UNAVAILABLE);
  assert.deepEqual(timedOut.metadata?.get(RETRY_PUSHBACK_KEY), [], 'a queued timeout sheds nothing: no pushback');
});

test('a status message is cut to what HTTP/2 trailers carry, never splitting a character', () => {
  const long = grpcError(
    new InferenceInputError(`${'x'.repeat(STATUS_MESSAGE_MAX_CHARACTERS - 1)}😀${'y'.repeat(200_000)}`),
  );
  assert.equal(long.code, status.INVALID_ARGUMENT);
  assert.ok((long.details?.length ?? Infinity) < STATUS_MESSAGE_MAX_CHARACTERS + 40, long.details?.slice(-60));
  assert.ok(
    long.details?.endsWith(`… (${STATUS_MESSAGE_MAX_CHARACTERS + 200_001} characters)`),
    long.details?.slice(-60),
  );
  assert.doesNotThrow(() => encodeURI(long.details ?? ''), 'no lone surrogate: grpc-js percent-encodes the message');
  assert.equal(grpcError(new InferenceInputError('short')).details, 'short');
});
