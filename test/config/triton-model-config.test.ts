import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseTritonConfig, translateTritonConfig } from '../../src/config/triton-model-config.js';
import { TritonConfigUnsupportedError } from '../../src/core/errors.js';

const translate = (text: string, name = 'm') =>
  translateTritonConfig(parseTritonConfig(text, 'config.pbtxt'), name, 'config.pbtxt');

test('each field maps onto model-config.yaml as Triton serves it', () => {
  const { config, versionPolicy, modelFilename, autoComplete, differences } = translate(`
    name: "m"
    backend: "onnxruntime"
    max_batch_size: 8
    version_policy: { specific { versions: [1, 3] } }
    default_model_filename: "net.onnx"
    input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 4 ] reshape: { shape: [ 2, 2 ] } } ]
    output [ { name: "y" data_type: TYPE_STRING dims: [ -1 ] label_filename: "labels.txt" } ]
    dynamic_batching {
      preferred_batch_size: [ 2, 4 ]
      max_queue_delay_microseconds: 500
      priority_levels: 3
      default_priority_level: 2
      default_queue_policy { max_queue_size: 32 default_timeout_microseconds: 2000000 allow_timeout_override: true }
    }
    instance_group [ { count: 2 kind: KIND_CPU }, { count: 1 kind: KIND_GPU gpus: [ 0, 1 ] } ]
    optimization {
      graph { level: -1 }
      execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" parameters { key: "precision_mode" value: "FP16" } } ] }
    }
    parameters { key: "intra_op_thread_count" value { string_value: "2" } }
    parameters { key: "inter_op_thread_count" value { string_value: "1" } }
    response_cache { enable: true }
  `);
  assert.deepEqual(config, {
    inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4], reshape: [-1, 2, 2] }],
    outputs: [{ name: 'y', datatype: 'BYTES', shape: [-1, -1] }],
    max_batch_size: 8,
    labels_file: 'labels.txt',
    dynamic_batching: {
      max_queue_delay: 500,
      preferred_batch_sizes: [2, 4],
      max_queue_size: 32,
      default_timeout: 2_000_000,
      priority_levels: 3,
      default_priority_level: 2,
    },
    runtime: { graph_optimization_level: 'disabled', intra_op_threads: 2, inter_op_threads: 1 },
    tensorrt: { fp16: true },
    instances: [
      { count: 2, device: 'cpu' },
      { count: 1, device: 'tensorrt:0' },
      { count: 1, device: 'tensorrt:1' },
    ],
    response_cache: { enable: true },
  });
  assert.deepEqual(versionPolicy, { specific: ['1', '3'] });
  assert.equal(modelFilename, 'net.onnx');
  assert.equal(autoComplete, false);
  assert.deepEqual(differences, []);
});

test("Triton's defaults: latest 1, model.onnx, no delay, unbounded queue, no timeout, auto-complete without tensors", () => {
  const { config, versionPolicy, modelFilename, autoComplete, differences } = translate('');
  assert.deepEqual(versionPolicy, { latest: 1 });
  assert.equal(modelFilename, 'model.onnx');
  assert.equal(autoComplete, true);
  assert.deepEqual(config, {
    dynamic_batching: { max_queue_delay: 0, preferred_batch_sizes: [], max_queue_size: 1_048_576, default_timeout: 0 },
    instances: [{ count: 1, device: 'auto' }],
  });
  assert.equal(differences.length, 2, differences.join('\n'));
  // Tensors given and no max_batch_size: proto3's 0, dims are the whole shape.
  const fixed = translate('input [ { name: "x" data_type: TYPE_INT64 dims: [ 2, 3 ] } ]');
  assert.equal(fixed.config.max_batch_size, 0);
  assert.deepEqual(fixed.config.inputs, [{ name: 'x', datatype: 'INT64', shape: [2, 3] }]);
});

test('an ensemble becomes a pipeline of model steps', () => {
  const { config } = translate(`
    platform: "ensemble"
    max_batch_size: 4
    input [ { name: "in" data_type: TYPE_FP32 dims: [ 4 ] } ]
    output [ { name: "out" data_type: TYPE_FP32 dims: [ 4 ] } ]
    ensemble_scheduling {
      step [
        { model_name: "a" model_version: -1 input_map { key: "x" value: "in" } output_map { key: "y" value: "mid" } },
        { model_name: "b" model_version: 2 input_map { key: "x" value: "mid" } output_map { key: "y" value: "out" } }
      ]
    }
  `);
  assert.deepEqual(config.pipeline, {
    steps: [
      { name: 'a', model: 'a', input_map: { x: 'in' }, output_map: { y: 'mid' } },
      { name: 'b', model: 'b', version: '2', input_map: { x: 'mid' }, output_map: { y: 'out' } },
    ],
  });
  assert.deepEqual(config.instances, [{ count: 1, device: 'cpu' }]);
});

const REFUSALS: readonly [string, string][] = [
  ['backend: "python"', 'backend'],
  ['platform: "tensorrt_plan"', 'platform'],
  ['backend: "pytorch"', 'backend'],
  ['platform: "ensemble"', 'platform'],
  ['sequence_batching { max_sequence_idle_microseconds: 1000 }', 'sequence_batching'],
  ['batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "n" } ]', 'batch_input'],
  ['batch_output [ { target_name: "y" } ]', 'batch_output'],
  ['model_operations { op_library_filename: "libops.so" }', 'model_operations'],
  ['model_transaction_policy { decoupled: true }', 'model_transaction_policy.decoupled'],
  ['model_repository_agents { agents [ { name: "checksum" } ] }', 'model_repository_agents'],
  ['runtime: "libtorch.so"', 'runtime'],
  [
    'dynamic_batching { priority_levels: 2 default_priority_level: 1 priority_queue_policy { key: 1 value { max_queue_size: 1 } } }',
    'dynamic_batching.priority_queue_policy',
  ],
  [
    'dynamic_batching { default_queue_policy { timeout_action: DELAY } }',
    'dynamic_batching.default_queue_policy.timeout_action',
  ],
  ['dynamic_batching { priority_levels: 2 }', 'dynamic_batching.default_priority_level'],
  ['dynamic_batching { priority_levels: 17 default_priority_level: 1 }', 'dynamic_batching.priority_levels'],
  ['instance_group [ { kind: KIND_MODEL } ]', 'instance_group[0].kind'],
  ['instance_group [ { kind: KIND_CPU passive: true } ]', 'instance_group[0].passive'],
  [
    'instance_group [ { kind: KIND_GPU secondary_devices [ { kind: KIND_NVDLA } ] } ]',
    'instance_group[0].secondary_devices',
  ],
  ['input [ { name: "x" data_type: TYPE_FP32 dims: [1] optional: true } ]', 'input[0].optional'],
  ['input [ { name: "x" data_type: TYPE_INT32 dims: [1] is_shape_tensor: true } ]', 'input[0].is_shape_tensor'],
  ['input [ { name: "x" data_type: TYPE_FP32 dims: [1] allow_ragged_batch: true } ]', 'input[0].allow_ragged_batch'],
  ['output [ { name: "y" data_type: TYPE_BF16 dims: [1] } ]', 'output[0].data_type'],
  [
    'output [ { name: "a" data_type: TYPE_FP32 dims: [1] label_filename: "a.txt" }, { name: "b" data_type: TYPE_FP32 dims: [1] label_filename: "b.txt" } ]',
    'output.label_filename',
  ],
  [
    'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "cuda" } ] } }',
    'optimization.execution_accelerators.gpu_execution_accelerator[0].name',
  ],
  ['name: "other"', 'name'],
];

for (const [text, field] of REFUSALS) {
  test(`refused, naming the field: ${field} (${text.length > 48 ? `${text.slice(0, 48)}…` : text})`, () => {
    assert.throws(
      () => translate(text),
      (error: unknown) => {
        assert.ok(error instanceof TritonConfigUnsupportedError, String(error));
        assert.equal(error.code, 'BS_ERR_TRITON_CONFIG_UNSUPPORTED');
        assert.equal(error.problems[0]?.split(':')[0], field);
        assert.ok(error.message.startsWith(`config.pbtxt: ${field}: `), error.message);
        assert.ok(!error.message.includes('\n'), 'one line');
        return true;
      },
    );
  });
}

test('performance hints with no equivalent load, each said as a difference', () => {
  const { differences } = translate(`
    optimization { priority: PRIORITY_MAX cuda { graphs: true } input_pinned_memory { enable: false } }
    dynamic_batching { preserve_ordering: true default_queue_policy { max_queue_size: 8 allow_timeout_override: true } }
    model_warmup [ { name: "w" batch_size: 1 } ]
    metric_tags { key: "team" value: "vision" }
    instance_group [ { kind: KIND_CPU rate_limiter { priority: 2 } } ]
    parameters { key: "execution_mode" value { string_value: "1" } }
  `);
  assert.deepEqual(
    differences.map((difference) => difference.split(' ')[0]),
    [
      'optimization.priority',
      'optimization.cuda',
      'optimization.input_pinned_memory',
      'dynamic_batching.preserve_ordering',
      'metric_tags',
      'model_warmup',
      'parameters',
      'instance_group[0].rate_limiter',
    ],
  );
});
