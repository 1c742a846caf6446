import { test } from 'node:test';
import assert from 'node:assert/strict';
import { machineLimitProblems, modelConfigSchema, validateModelConfig } from '../../src/config/model-config.js';
import type { FieldSpec } from '../../src/config/schema-kit.js';
import { ConfigInvalidError } from '../../src/core/errors.js';
import { serverConfigSchema, validateServerConfig } from '../../src/server/server-config.js';

function problemsOf(validate: () => unknown): readonly string[] {
  try {
    validate();
  } catch (error) {
    assert.ok(error instanceof ConfigInvalidError);
    return error.problems;
  }
  assert.fail('expected the config to be rejected');
}

/** Every key of a schema whose value is an integer or a duration, with its path. */
function countedKeys(spec: FieldSpec, path: string): { path: string; spec: FieldSpec }[] {
  switch (spec.kind) {
    case 'integer':
    case 'duration':
      return [{ path, spec }];
    case 'object':
      return Object.entries(spec.fields).flatMap(([key, field]) => countedKeys(field, path ? `${path}.${key}` : key));
    case 'array':
      return countedKeys(spec.items, `${path}[]`);
    case 'map':
      return countedKeys(spec.values, `${path}.<${spec.keyHint}>`);
    default:
      return [];
  }
}

test('the thread count of the report (100000) is refused in the path: message form', () => {
  assert.deepEqual(
    problemsOf(() => validateModelConfig({ runtime: { intra_op_threads: 100_000 } }, 'model-config.yaml')),
    ['runtime.intra_op_threads: expected a value from 0 to 256, got 100000'],
  );
});

test('every integer and duration key of model-config.yaml and server.yaml has a ceiling', () => {
  for (const [name, schema] of [
    ['model-config.yaml', modelConfigSchema],
    ['server.yaml', serverConfigSchema],
  ] as const) {
    const unbounded = countedKeys(schema, '')
      .filter(({ spec }) => !('max' in spec) || spec.max === undefined)
      .map(({ path }) => path);
    assert.deepEqual(unbounded, [], `${name}: keys without a max`);
  }
});

test('every out-of-range count, size and timeout of a model config is reported at once', () => {
  const problems = problemsOf(() =>
    validateModelConfig(
      {
        max_batch_size: 1_000_000,
        runtime: { intra_op_threads: 257, inter_op_threads: 100_000 },
        instances: [{ count: 65 }],
        dynamic_batching: {
          max_queue_delay: '11m',
          max_queue_size: 2 ** 30,
          default_timeout: 2 ** 50,
          preferred_batch_sizes: [70_000],
        },
      },
      'model-config.yaml',
    ),
  );
  assert.deepEqual([...problems].sort(), [
    'dynamic_batching.default_timeout: expected a duration of at most 86400s, got 1125899906842624',
    'dynamic_batching.max_queue_delay: expected a duration of at most 600s, got "11m"',
    'dynamic_batching.max_queue_size: expected a value from 1 to 1048576, got 1073741824',
    'dynamic_batching.preferred_batch_sizes[0]: expected a value from 1 to 65536, got 70000',
    'instances[0].count: expected a value from 1 to 64, got 65',
    'max_batch_size: expected a value from 0 to 65536, got 1000000',
    'runtime.inter_op_threads: expected a value from 0 to 256, got 100000',
    'runtime.intra_op_threads: expected a value from 0 to 256, got 257',
  ]);
  assert.deepEqual(
    problemsOf(() =>
      validateModelConfig(
        { dynamic_batching: { preferred_batch_sizes: Array.from({ length: 65 }, (_, i) => i + 1) } },
        'c',
      ),
    ),
    ['dynamic_batching.preferred_batch_sizes: expected at most 64 item(s), got 65'],
  );
});

test('the server config bounds its sizes and timeouts too, all at once', () => {
  const problems = problemsOf(() =>
    validateServerConfig(
      {
        max_connections: 1_000_000,
        max_request_size: 2 ** 40,
        max_header_size: 2 ** 30,
        grpc_max_streams: 10_000_000,
        keep_alive_timeout: '11m',
        drain_timeout: '61m',
        request_timeout: '1441m',
        headers_timeout: 0,
      },
      'server.yaml',
    ),
  );
  assert.deepEqual([...problems].sort(), [
    'drain_timeout: expected a duration of at most 3600s, got "61m"',
    'grpc_max_streams: expected a value from 1 to 100000, got 10000000',
    'headers_timeout: expected a duration from 1ms to 600s, got 0',
    'keep_alive_timeout: expected a duration of at most 600s, got "11m"',
    'max_connections: expected a value from 1 to 65536, got 1000000',
    'max_header_size: expected a value from 1024 to 1048576, got 1073741824',
    'max_request_size: expected a value from 1 to 2147483648, got 1099511627776',
    'request_timeout: expected a duration of at most 86400s, got "1441m"',
  ]);
});

test('serve holds the thread counts to 4 per core of its own machine', () => {
  const config = validateModelConfig({ runtime: { intra_op_threads: 9, inter_op_threads: 8 } }, 'c');
  assert.deepEqual(machineLimitProblems(config, 2), [
    "runtime.intra_op_threads: expected at most 8 (4 per CPU core of this machine's 2), got 9",
  ]);
  assert.deepEqual(machineLimitProblems(config, 3), []);
  assert.deepEqual(machineLimitProblems(validateModelConfig({}, 'c'), 1), [], '0 (onnxruntime chooses) always passes');
});
