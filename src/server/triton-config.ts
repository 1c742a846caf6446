import type { LoadedModel } from '../repository/loaded-model.js';
import type { TensorSpec } from '../core/tensors.js';

/**
 * Triton's model configuration extension (GET …/config) in Triton's own field names, so
 * Triton clients and perf_analyzer can read it; `batchserve` carries our full config.
 * Triton's dims leave out the batch dimension when max_batch_size > 0.
 */
export function tritonModelConfig(model: LoadedModel): Record<string, unknown> {
  const { config } = model;
  const batching = config.max_batch_size > 0;
  const tensor = (spec: TensorSpec): Record<string, unknown> => ({
    name: spec.name,
    data_type: spec.datatype === 'BYTES' ? 'TYPE_STRING' : `TYPE_${spec.datatype}`,
    dims: batching ? spec.shape.slice(1) : spec.shape,
  });
  // A pipeline's instances run its steps on the server's own thread.
  const kind = (device: string): string => (device === 'cpu' || device === 'pipeline' ? 'KIND_CPU' : 'KIND_GPU');
  return {
    name: model.name,
    version: model.version,
    // A pipeline is Triton's ensemble; its steps are under `batchserve.pipeline`.
    ...(config.pipeline ? { platform: 'ensemble' } : { platform: 'onnxruntime_onnx', backend: 'onnxruntime' }),
    max_batch_size: config.max_batch_size,
    input: config.inputs.map(tensor),
    output: config.outputs.map(tensor),
    dynamic_batching: {
      // Triton has no adaptive delay: `auto` shows as 0 here and as itself under `batchserve`.
      max_queue_delay_microseconds:
        config.dynamic_batching.max_queue_delay === 'auto' ? 0 : config.dynamic_batching.max_queue_delay,
      preferred_batch_size: config.dynamic_batching.preferred_batch_sizes,
      priority_levels: config.dynamic_batching.priority_levels,
      default_queue_policy: {
        max_queue_size: config.dynamic_batching.max_queue_size,
        default_timeout_microseconds: config.dynamic_batching.default_timeout,
      },
    },
    instance_group: model.devices().map((device) => ({
      name: device,
      kind: kind(device),
      count: model.instances.filter((instance) => instance.device === device).length,
    })),
    batchserve: config,
  };
}
