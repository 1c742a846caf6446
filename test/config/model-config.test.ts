import { test } from 'node:test';
import assert from 'node:assert/strict';
import { modelConfigFromText } from '../../src/config/load.js';
import { validateModelConfig } from '../../src/config/model-config.js';
import { parseDuration } from '../../src/config/schema-kit.js';
import { ConfigInvalidError } from '../../src/core/errors.js';

function problemsOf(raw: unknown): readonly string[] {
  try {
    validateModelConfig(raw, 'model-config.yaml');
  } catch (error) {
    assert.ok(error instanceof ConfigInvalidError);
    assert.equal(error.code, 'BS_ERR_CONFIG_INVALID');
    return error.problems;
  }
  assert.fail('expected the config to be rejected');
}

test('an empty config gets sensible defaults and is frozen', () => {
  const config = validateModelConfig({}, 'model-config.yaml');
  assert.equal(config.max_batch_size, undefined, 'decided from the model when packing');
  assert.equal(config.dynamic_batching.max_queue_delay, 1000);
  assert.equal(config.dynamic_batching.max_queue_size, 1024);
  assert.equal(config.dynamic_batching.default_timeout, 30_000_000);
  assert.deepEqual(config.instances, [{ count: 1, device: 'cpu' }]);
  assert.equal(config.warmup, true);
  assert.equal(config.runtime.graph_optimization_level, 'all');
  assert.ok(Object.isFrozen(config) && Object.isFrozen(config.dynamic_batching));
});

test('durations accept microseconds or unit strings', () => {
  assert.equal(parseDuration(2500), 2500);
  assert.equal(parseDuration('5ms'), 5000);
  assert.equal(parseDuration('250us'), 250);
  assert.equal(parseDuration('1.5s'), 1_500_000);
  assert.equal(parseDuration('5 parsecs'), undefined);
  assert.equal(parseDuration(-1), undefined);
  const config = validateModelConfig({ dynamic_batching: { max_queue_delay: '5ms' } }, 'c.yaml');
  assert.equal(config.dynamic_batching.max_queue_delay, 5000);
});

test('a wrong type names the key and what was expected', () => {
  assert.deepEqual(problemsOf({ max_batch_size: 'eight' }), ['max_batch_size: expected an integer, got "eight"']);
  assert.deepEqual(problemsOf({ dynamic_batching: { max_queue_delay: 'soon' } }), [
    'dynamic_batching.max_queue_delay: expected microseconds (an integer) or a duration such as "5ms", or auto, got "soon"',
  ]);
  assert.match(problemsOf({ instances: [{ device: 'gpu' }] })[0] ?? '', /^instances\[0\]\.device: expected cpu, auto/);
  assert.match(
    problemsOf({ inputs: [{ name: 'x', datatype: 'FLOAT', shape: [-1] }] })[0] ?? '',
    /^inputs\[0\]\.datatype: expected one of BOOL/,
  );
});

test('unknown keys are errors, not warnings — a mistyped key cannot pass silently', () => {
  assert.deepEqual(problemsOf({ max_batch_delay: 5 }).length, 1);
  assert.match(
    problemsOf({ max_batch_delay: 5 })[0] ?? '',
    /^max_batch_delay: unknown key \(expected one of inputs, outputs/,
  );
  assert.match(
    problemsOf({ dynamic_batching: { max_queue_delay_us: 5 } })[0] ?? '',
    /^dynamic_batching\.max_queue_delay_us: unknown key/,
  );
});

test('every problem is reported at once', () => {
  const problems = problemsOf({ max_batch_size: -1, warmup: 'yes', bogus: 1, runtime: { intra_op_threads: 1.5 } });
  assert.equal(problems.length, 4);
  assert.ok(problems.some((p) => p.startsWith('max_batch_size: expected a value from 0')));
  assert.ok(problems.some((p) => p.startsWith('warmup: expected true or false')));
  assert.ok(problems.some((p) => p.startsWith('bogus: unknown key')));
  assert.ok(problems.some((p) => p.startsWith('runtime.intra_op_threads: expected an integer')));
});

test('a fixed batch dimension with max_batch_size > 0 is refused', () => {
  assert.deepEqual(problemsOf({ max_batch_size: 8, inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }] }), [
    'inputs[0].shape: the batch dimension (first) must be -1 when max_batch_size > 0, got 1',
  ]);
  // The same shape is fine for a model that does not batch, and is kept as given.
  const unbatched = validateModelConfig(
    { max_batch_size: 0, inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }] },
    'c.yaml',
  );
  assert.equal(unbatched.max_batch_size, 0);
  assert.deepEqual(unbatched.inputs, [{ name: 'x', datatype: 'FP32', shape: [1, 4] }]);
});

test('cross-field rules: duplicate names, zero dimensions, preferred sizes above the maximum', () => {
  const problems = problemsOf({
    max_batch_size: 4,
    inputs: [
      { name: 'x', datatype: 'FP32', shape: [-1, 0] },
      { name: 'x', datatype: 'FP32', shape: [-1, 2] },
    ],
    dynamic_batching: { preferred_batch_sizes: [2, 8] },
  });
  assert.ok(problems.includes('inputs[1].name: "x" is listed twice'));
  assert.ok(problems.some((p) => p.startsWith('inputs[0].shape: dimensions must be -1 or positive')));
  assert.ok(problems.includes('dynamic_batching.preferred_batch_sizes[1]: 8 exceeds max_batch_size 4'));
});

test('YAML and JSON parse; syntax errors and duplicate keys name the file and line', () => {
  assert.equal(modelConfigFromText('max_batch_size: 4\n', 'a.yaml').max_batch_size, 4);
  assert.equal(modelConfigFromText('{"max_batch_size": 2}', 'a.json').max_batch_size, 2);
  assert.throws(
    () => modelConfigFromText('max_batch_size: 4\nmax_batch_size: 8\n', 'dup.yaml'),
    (error: ConfigInvalidError) =>
      error.code === 'BS_ERR_CONFIG_INVALID' && /^dup\.yaml: line 2: not valid YAML/.test(error.message),
  );
  assert.throws(
    () => modelConfigFromText('{"max_batch_size": ', 'bad.json'),
    (error: ConfigInvalidError) =>
      error.code === 'BS_ERR_CONFIG_INVALID' && error.message.startsWith('bad.json: not valid JSON'),
  );
  assert.throws(
    () => modelConfigFromText('max_batch_size: [\n', 'bad.yaml'),
    (error: ConfigInvalidError) => error.message.startsWith('bad.yaml: line'),
  );
});

test('docs/model-config.md and docs/server-config.md are rendered from the schemas (run `npm run docs` after a change)', async () => {
  const { readFile } = await import('node:fs/promises');
  const { renderModelConfigReference } = await import('../../src/config/reference.js');
  const doc = await readFile(new URL('../../../docs/model-config.md', import.meta.url), 'utf8');
  assert.equal(doc, renderModelConfigReference());
  const { renderServerConfigReference } = await import('../../src/server/server-config.js');
  const serverDoc = await readFile(new URL('../../../docs/server-config.md', import.meta.url), 'utf8');
  assert.equal(serverDoc, renderServerConfigReference());
});
