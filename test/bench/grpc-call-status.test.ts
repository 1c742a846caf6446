import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CallStatus } from '../../src/bench/grpc-http2.js';

test('CallStatus reads a refusal’s server pushback (grpc-retry-pushback-ms) and forgets it on reset', () => {
  const status = new CallStatus();
  status.read({ ':status': 200 as unknown as string, 'grpc-status': '14', 'grpc-retry-pushback-ms': '1000' });
  assert.equal(status.outcome(), 'UNAVAILABLE');
  assert.equal(status.retryAfterMs, 1000);
  status.reset();
  assert.equal(status.retryAfterMs, undefined);
  status.read({ ':status': 200 as unknown as string, 'grpc-status': '14', 'grpc-retry-pushback-ms': '-1' });
  assert.equal(status.retryAfterMs, undefined, 'gRFC A6: not a whole number of ms means do not retry; ignored');
  status.read({ ':status': 200 as unknown as string, 'grpc-status': '14' });
  assert.equal(status.retryAfterMs, undefined);
});
