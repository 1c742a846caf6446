import type { TensorSpec } from '../core/tensors.js';
import type { CompleteModelConfig, InstanceGroup } from './model-config.js';
import type { VersionPolicy } from './model-policy.js';
import type { TextMessage } from './text-format.js';
import { tritonDataType, TRITON_DEFAULT_MODEL_FILE } from './triton-model-config.js';

export interface TritonViewOptions {
  readonly name: string;
  /** The model's own config.pbtxt, when it came from a Triton repository: what has no batchserve key stays as written. */
  readonly base?: TextMessage;
  readonly versionPolicy?: VersionPolicy;
  readonly modelFilename?: string;
  /** The instance groups running now (a scale changes them); default: the config's. */
  readonly instances?: readonly InstanceGroup[];
}

/**
 * A batchserve config as Triton's config.pbtxt says it: what `model-archive export --triton`
 * writes and, printed with its defaults, what `/v2/models/{m}/config` answers. Fields of the
 * model's own config.pbtxt that batchserve has no key for are kept as they were written.
 */
export function tritonConfigOf(config: CompleteModelConfig, options: TritonViewOptions): TextMessage {
  const base = options.base ?? {};
  const batching = config.max_batch_size > 0;
  const pipeline = config.pipeline;
  const tensor = (spec: TensorSpec, written: readonly TextMessage[] | undefined): TextMessage => {
    const dims = (shape: readonly number[]): number[] => (batching ? shape.slice(1) : [...shape]);
    return {
      ...written?.find((candidate) => candidate.name === spec.name),
      name: spec.name,
      data_type: tritonDataType(spec.datatype),
      dims: dims(spec.shape),
      ...(spec.reshape ? { reshape: { shape: dims(spec.reshape) } } : {}),
    };
  };
  const view: TextMessage = {
    ...base,
    name: options.name,
    ...(pipeline ? { platform: 'ensemble' } : { platform: 'onnxruntime_onnx', backend: 'onnxruntime' }),
    version_policy: versionPolicyOf(options.versionPolicy),
    max_batch_size: config.max_batch_size,
    input: config.inputs.map((spec) => tensor(spec, base.input as TextMessage[] | undefined)),
    output: config.outputs.map((spec) => tensor(spec, base.output as TextMessage[] | undefined)),
    instance_group: instanceGroupsOf(options.instances ?? config.instances, options.name),
  };
  if (config.labels_file !== undefined && !(base.output as TextMessage[] | undefined)?.some((o) => o.label_filename)) {
    const first = (view.output as TextMessage[])[0];
    if (first) first.label_filename = config.labels_file;
  }
  if (pipeline) {
    view.ensemble_scheduling = {
      ...(base.ensemble_scheduling as TextMessage | undefined),
      step: pipeline.steps.flatMap((step) =>
        'model' in step
          ? [
              {
                model_name: step.model,
                model_version: step.version === undefined ? -1 : Number(step.version),
                input_map: { ...step.input_map },
                output_map: { ...step.output_map },
              },
            ]
          : [],
      ),
    };
    delete view.instance_group;
  } else {
    view.dynamic_batching = dynamicBatchingOf(config, base.dynamic_batching as TextMessage | undefined);
    view.default_model_filename = options.modelFilename ?? TRITON_DEFAULT_MODEL_FILE;
    const optimization = optimizationOf(config, base.optimization as TextMessage | undefined);
    if (Object.keys(optimization).length > 0) view.optimization = optimization;
    const parameters = { ...(base.parameters as Record<string, TextMessage> | undefined) };
    if (config.runtime.intra_op_threads > 0) {
      parameters.intra_op_thread_count = { string_value: String(config.runtime.intra_op_threads) };
    }
    if (config.runtime.inter_op_threads > 0) {
      parameters.inter_op_thread_count = { string_value: String(config.runtime.inter_op_threads) };
    }
    if (Object.keys(parameters).length > 0) view.parameters = parameters;
  }
  if (config.response_cache?.enable) view.response_cache = { enable: true };
  return view;
}

function versionPolicyOf(policy: VersionPolicy | undefined): TextMessage {
  if (policy?.specific !== undefined) return { specific: { versions: policy.specific.map(Number) } };
  if (policy?.latest !== undefined) return { latest: { num_versions: policy.latest } };
  if (policy?.all) return { all: {} };
  return { latest: { num_versions: 1 } };
}

function dynamicBatchingOf(config: CompleteModelConfig, written: TextMessage | undefined): TextMessage {
  const batching = config.dynamic_batching;
  const levels = batching.priority_levels > 1;
  return {
    ...written,
    // Triton has no adaptive delay: `auto` shows as 0.
    max_queue_delay_microseconds: batching.max_queue_delay === 'auto' ? 0 : batching.max_queue_delay,
    preferred_batch_size: [...batching.preferred_batch_sizes],
    ...(levels
      ? {
          priority_levels: batching.priority_levels,
          default_priority_level: batching.default_priority_level ?? batching.priority_levels,
        }
      : {}),
    default_queue_policy: {
      ...(written?.default_queue_policy as TextMessage | undefined),
      max_queue_size: batching.max_queue_size,
      default_timeout_microseconds: batching.default_timeout,
      // A request's own timeout may shorten the default here, as Triton's override allows.
      allow_timeout_override: true,
    },
  };
}

const GRAPH_LEVEL: Readonly<Record<string, number | undefined>> = { disabled: -1, basic: 0, extended: 1 };

function optimizationOf(config: CompleteModelConfig, written: TextMessage | undefined): TextMessage {
  const optimization: TextMessage = { ...written };
  const level = GRAPH_LEVEL[config.runtime.graph_optimization_level];
  if (level !== undefined) optimization.graph = { level };
  if (config.instances.some((group) => group.device.startsWith('tensorrt'))) {
    const { fp16, engine_cache: cache, cache_dir: dir } = config.tensorrt;
    optimization.execution_accelerators = {
      gpu_execution_accelerator: [
        {
          name: 'tensorrt',
          parameters: {
            precision_mode: fp16 ? 'FP16' : 'FP32',
            trt_engine_cache_enable: String(cache),
            ...(dir !== undefined ? { trt_engine_cache_path: dir } : {}),
          },
        },
      ],
    };
  }
  return optimization;
}

/** One Triton group per device: cuda:1 and tensorrt:1 are KIND_GPU on GPU 1, auto is KIND_AUTO. */
function instanceGroupsOf(groups: readonly InstanceGroup[], name: string): TextMessage[] {
  return groups.map((group, index) => {
    const gpu = /^(?:cuda|tensorrt)(?::(\d+))?$/.exec(group.device);
    const kind = gpu ? 'KIND_GPU' : group.device === 'auto' ? 'KIND_AUTO' : 'KIND_CPU';
    return {
      name: `${name}_${index}`,
      kind,
      count: group.count,
      ...(gpu ? { gpus: [Number(gpu[1] ?? 0)] } : {}),
    };
  });
}
