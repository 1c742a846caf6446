import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import { TritonConfigUnsupportedError } from '../core/errors.js';
import { isDatatype, type Datatype } from '../core/datatypes.js';
import type { TensorSpec } from '../core/tensors.js';
import { MODEL_CONFIG_LIMITS } from './model-config.js';
import type { VersionPolicy } from './model-policy.js';
import { parseTextFormat, writeTextFormat, type TextMessage } from './text-format.js';

/** A Triton model folder's config, beside its numbered version folders. */
export const TRITON_CONFIG_FILE = 'config.pbtxt';
/** Triton's onnxruntime backend loads this file of a version folder unless default_model_filename says otherwise. */
export const TRITON_DEFAULT_MODEL_FILE = 'model.onnx';
/** What Triton's auto-complete sets max_batch_size to for a model that batches (--backend-config default-max-batch-size). */
export const TRITON_DEFAULT_MAX_BATCH_SIZE = 4;

const PROTO_DIR = fileURLToPath(new URL('../../../protos/triton/', import.meta.url));
let modelConfigType: protobuf.Type | undefined;

/** Triton's own `inference.ModelConfig`, from the vendored model_config.proto (protos/SOURCE.md). */
export function tritonConfigType(): protobuf.Type {
  if (!modelConfigType) {
    const root = new protobuf.Root();
    root.resolvePath = (_origin, target) => `${PROTO_DIR}${target}`;
    root.loadSync('model_config.proto', { keepCase: true }).resolveAll();
    modelConfigType = root.lookupType('inference.ModelConfig');
  }
  return modelConfigType;
}

/** A config.pbtxt read against model_config.proto; mistakes name the line and the field. */
export function parseTritonConfig(text: string, source: string): TextMessage {
  return parseTextFormat(tritonConfigType(), text, source);
}

export function writeTritonConfig(config: TextMessage): string {
  return writeTextFormat(tritonConfigType(), config);
}

/**
 * A Triton config as Triton's model-configuration extension answers it: every scalar, list and
 * map printed with its default, unset messages left out, enums by name and 64-bit integers as
 * numbers (Triton fixes its JSON printer's strings back to numbers).
 */
export function tritonConfigJson(config: TextMessage): Record<string, unknown> {
  const type = tritonConfigType();
  const json = type.toObject(type.fromObject(config), {
    defaults: true,
    enums: String,
    longs: Number,
    arrays: true,
    objects: true,
  });
  return withoutNulls(json) as Record<string, unknown>;
}

/** protobufjs prints an unset message as null where Triton leaves the field out. */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .filter(([, item]) => item !== null)
      .map(([key, item]) => [key, withoutNulls(item)]),
  );
}

/** What a Triton model folder's config comes to here. */
export interface TritonTranslation {
  /** A model-config.yaml object, not yet validated. */
  readonly config: Record<string, unknown>;
  readonly versionPolicy: VersionPolicy;
  /** The file each version folder holds (default_model_filename). */
  readonly modelFilename: string;
  /** max_batch_size, inputs and outputs are Triton's auto-complete's to fill from the model. */
  readonly autoComplete: boolean;
  /** What is served otherwise than Triton would serve it, one sentence each (import's `differs:` lines). */
  readonly differences: readonly string[];
}

const TYPE_PREFIX = 'TYPE_';

/** Triton's data_type as a v2 datatype; TYPE_STRING is BYTES, as Triton's own protocol says. */
export function datatypeOfTriton(dataType: string): Datatype | undefined {
  if (dataType === 'TYPE_STRING') return 'BYTES';
  const name = dataType.startsWith(TYPE_PREFIX) ? dataType.slice(TYPE_PREFIX.length) : '';
  // TYPE_BYTES is not Triton's: its strings are TYPE_STRING.
  return name !== 'BYTES' && isDatatype(name) ? name : undefined;
}

export function tritonDataType(datatype: Datatype): string {
  return datatype === 'BYTES' ? 'TYPE_STRING' : `${TYPE_PREFIX}${datatype}`;
}

/**
 * Fields that change what a model answers, or how it is reached, and that batchserve cannot
 * do: the model is refused, naming the first. Paths are as the config spells them.
 */
const REFUSED: readonly [string, (value: unknown) => boolean, string][] = [
  [
    'sequence_batching',
    present,
    'batchserve has no sequence batcher: stateful models (correlation IDs, implicit state) are not served',
  ],
  ['batch_input', nonEmpty, 'ragged batch inputs are not built here'],
  ['batch_output', nonEmpty, 'ragged batch outputs are not scattered here'],
  ['model_operations', present, 'custom operator libraries are not loaded into onnxruntime-node'],
  [
    'model_transaction_policy.decoupled',
    (value) => value === true,
    'decoupled models (any number of responses per request) are not served',
  ],
  ['model_repository_agents', present, 'repository agents (checksum, decryption) are not run'],
  ['runtime', nonEmptyString, 'a backend runtime library is not loaded'],
  ['dynamic_batching.priority_queue_policy', nonEmptyMap, 'one queue policy holds for every priority level here'],
  [
    'dynamic_batching.default_queue_policy.timeout_action',
    (value) => value === 'DELAY',
    'a request past its timeout is refused here, never delayed (REJECT is the only action)',
  ],
  [
    'ensemble_scheduling.max_inflight_requests',
    positive,
    'a pipeline holds its instance count of batches in flight, not a count of requests',
  ],
];

/** Performance hints with no equivalent: the model serves the same answers without them; said once. */
const IGNORED: readonly [string, string][] = [
  ['optimization.priority', 'onnxruntime-node sets no stream priority'],
  ['optimization.cuda', 'CUDA graphs and stream options are not set by onnxruntime-node'],
  ['optimization.input_pinned_memory', 'buffers are not pinned'],
  ['optimization.output_pinned_memory', 'buffers are not pinned'],
  ['optimization.gather_kernel_buffer_threshold', 'inputs are gathered on the CPU'],
  ['optimization.eager_batching', 'batches form as the dynamic batcher decides'],
  ['dynamic_batching.preserve_ordering', 'each request is answered on its own connection or stream as it finishes'],
  ['cc_model_filenames', 'one model file serves every device'],
  ['metric_tags', 'metrics carry model and version labels only'],
  ['model_metrics', 'histogram buckets are fixed'],
  ['model_warmup', 'every preferred batch size is warmed up with zeros instead (warmup: true)'],
  ['ensemble_scheduling.step.model_namespace', 'model names are one namespace'],
];

function present(value: unknown): boolean {
  return value !== undefined;
}
function nonEmpty(value: unknown): boolean {
  return Array.isArray(value) && value.length > 0;
}
function nonEmptyString(value: unknown): boolean {
  return typeof value === 'string' && value !== '';
}
function nonEmptyMap(value: unknown): boolean {
  return typeof value === 'object' && value !== null && Object.keys(value).length > 0;
}
function positive(value: unknown): boolean {
  return Number(value) > 0;
}

/** Every value at a dotted path, through repeated fields. */
function valuesAt(message: unknown, path: string): unknown[] {
  let values = [message];
  for (const key of path.split('.')) {
    values = values.flatMap((value) => {
      const next = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
      if (next === undefined) return [];
      return Array.isArray(next) && key !== path.split('.').at(-1) ? (next as unknown[]) : [next];
    });
  }
  return values;
}

const ONNX_BACKENDS = new Set(['onnxruntime', 'onnxruntime_onnx']);

/**
 * Maps a Triton model config onto model-config.yaml: what batchserve does the same way, what
 * it cannot (refused: TritonConfigUnsupportedError naming the field) and what it leaves out
 * (listed in `differences`). `modelName` is the model folder's name.
 */
export function translateTritonConfig(triton: TextMessage, modelName: string, source: string): TritonTranslation {
  const refusals: string[] = [];
  const differences: string[] = [];
  const refuse = (field: string, why: string): void => void refusals.push(`${field}: ${why}`);
  const get = <T = unknown>(key: string): T | undefined => triton[key] as T | undefined;
  const name = get<string>('name');
  if (name !== undefined && name !== '' && name !== modelName) {
    refuse('name', `"${name}" is not the model folder's name "${modelName}" (Triton refuses it too)`);
  }
  const ensemble = get('ensemble_scheduling') !== undefined;
  const platform = get<string>('platform') ?? '';
  const backend = get<string>('backend') ?? '';
  if (backend === 'python') refuse('backend', 'a Python model: nothing here runs Python');
  else if (backend !== '' && !ONNX_BACKENDS.has(backend)) {
    refuse('backend', `"${backend}": batchserve runs ONNX models with onnxruntime only`);
  }
  if (platform === 'ensemble' && !ensemble) refuse('platform', 'an ensemble needs ensemble_scheduling');
  else if (platform !== '' && platform !== 'onnxruntime_onnx' && platform !== 'ensemble') {
    refuse('platform', `"${platform}": batchserve runs ONNX models with onnxruntime only`);
  }
  if (ensemble && platform !== 'ensemble')
    refuse('ensemble_scheduling', 'only a model whose platform is "ensemble" has steps');
  for (const [path, applies, why] of REFUSED) {
    if (valuesAt(triton, path).some(applies)) refuse(path, why);
  }
  for (const [path, why] of IGNORED) {
    if (valuesAt(triton, path).length > 0) differences.push(`${path} is not applied: ${why}`);
  }

  const maxBatchSize = get<number>('max_batch_size');
  const batching = (maxBatchSize ?? 0) > 0;
  const inputs = tensors(get<TextMessage[]>('input') ?? [], 'input', batching, refuse);
  const outputs = tensors(get<TextMessage[]>('output') ?? [], 'output', batching, refuse);
  // Triton's auto-complete fills the tensors and max_batch_size from the model when the config
  // gives no tensors; a config with tensors and no max_batch_size means 0 (proto3).
  const autoComplete = !ensemble && inputs.length === 0 && outputs.length === 0 && maxBatchSize === undefined;
  const config: Record<string, unknown> = {};
  if (inputs.length > 0) config.inputs = inputs;
  if (outputs.length > 0) config.outputs = outputs;
  if (!autoComplete) config.max_batch_size = maxBatchSize ?? 0;
  const labels = [
    ...new Set((get<TextMessage[]>('output') ?? []).map((output) => output.label_filename).filter(Boolean)),
  ];
  if (labels.length > 1)
    refuse('output.label_filename', 'one labels file per model here, and these outputs name several');
  else if (labels.length === 1) config.labels_file = labels[0];

  config.dynamic_batching = dynamicBatching(get<TextMessage>('dynamic_batching'), refuse, differences);
  const optimization = get<TextMessage>('optimization') ?? {};
  const runtime = runtimeOptions(optimization, get<Record<string, TextMessage>>('parameters') ?? {}, differences);
  if (Object.keys(runtime).length > 0) config.runtime = runtime;
  const accelerators = executionAccelerators(optimization, refuse, differences);
  if (accelerators.tensorrt) config.tensorrt = accelerators.tensorrt;
  config.instances = instanceGroups(
    get<TextMessage[]>('instance_group'),
    accelerators.gpuDevice,
    ensemble,
    refuse,
    differences,
  );
  if ((get<TextMessage>('response_cache') ?? {}).enable === true) config.response_cache = { enable: true };
  if (ensemble) config.pipeline = { steps: ensembleSteps(get<TextMessage>('ensemble_scheduling') ?? {}, refuse) };
  if (get('dynamic_batching') === undefined && batching && !ensemble) {
    differences.push(
      'no dynamic_batching: Triton runs each request as it came; here requests queued while every instance is busy share the next batch (max_queue_delay 0)',
    );
  }
  if (refusals.length > 0) throw new TritonConfigUnsupportedError(source, refusals);
  return {
    config,
    versionPolicy: versionPolicy(get<TextMessage>('version_policy')),
    modelFilename: get<string>('default_model_filename') || TRITON_DEFAULT_MODEL_FILE,
    autoComplete,
    differences,
  };
}

type Refuse = (field: string, why: string) => void;

function tensors(
  list: readonly TextMessage[],
  kind: 'input' | 'output',
  batching: boolean,
  refuse: Refuse,
): TensorSpec[] {
  return list.map((tensor, index) => {
    const where = `${kind}[${index}]`;
    for (const flag of ['is_shape_tensor', 'is_non_linear_format_io', 'allow_ragged_batch', 'optional'] as const) {
      if (tensor[flag] === true)
        refuse(
          `${where}.${flag}`,
          `${flag === 'optional' ? 'every input is required here' : 'TensorRT and ragged-batch tensors are not served'}`,
        );
    }
    const dataType = (tensor.data_type as string | undefined) ?? 'TYPE_INVALID';
    const datatype = datatypeOfTriton(dataType);
    if (!datatype) refuse(`${where}.data_type`, `${dataType} has no v2 datatype here`);
    const dims = ((tensor.dims as number[] | undefined) ?? []).map(Number);
    const withBatch = (shape: readonly number[]): number[] => (batching ? [-1, ...shape] : [...shape]);
    const reshape = (tensor.reshape as { shape?: number[] } | undefined)?.shape?.map(Number);
    return {
      name: typeof tensor.name === 'string' ? tensor.name : '',
      datatype: datatype ?? 'FP32',
      shape: withBatch(dims),
      ...(reshape !== undefined ? { reshape: withBatch(reshape) } : {}),
    };
  });
}

function dynamicBatching(
  batching: TextMessage | undefined,
  refuse: Refuse,
  differences: string[],
): Record<string, unknown> {
  // Triton's defaults: no delay, an unbounded queue, no timeout; batchserve's bounds hold the queue.
  const policy = (batching?.default_queue_policy ?? {}) as TextMessage;
  const queueSize = Number(policy.max_queue_size ?? 0);
  if (queueSize === 0) {
    differences.push(
      `dynamic_batching.default_queue_policy.max_queue_size 0 (unbounded) is served as ${MODEL_CONFIG_LIMITS.queueSize} rows`,
    );
  }
  if (policy.allow_timeout_override !== true) {
    differences.push(
      'dynamic_batching.default_queue_policy.allow_timeout_override is false: a request may still shorten its own timeout here',
    );
  }
  const levels = Number(batching?.priority_levels ?? 0);
  const defaultLevel = Number(batching?.default_priority_level ?? 0);
  if (levels > 16) refuse('dynamic_batching.priority_levels', `${levels} levels; at most 16 here`);
  if (levels > 0 && (defaultLevel < 1 || defaultLevel > levels)) {
    refuse(
      'dynamic_batching.default_priority_level',
      `must be from 1 to priority_levels (${levels}), as Triton requires`,
    );
  }
  return {
    max_queue_delay: Number(batching?.max_queue_delay_microseconds ?? 0),
    preferred_batch_sizes: ((batching?.preferred_batch_size as number[] | undefined) ?? []).map(Number),
    max_queue_size:
      queueSize === 0 ? MODEL_CONFIG_LIMITS.queueSize : Math.min(queueSize, MODEL_CONFIG_LIMITS.queueSize),
    default_timeout: Number(policy.default_timeout_microseconds ?? 0),
    ...(levels > 0 && levels <= 16 ? { priority_levels: levels, default_priority_level: defaultLevel } : {}),
  };
}

/** Triton's onnxruntime backend reads these `parameters`; the others carry nothing here. */
const RUNTIME_PARAMETERS: Readonly<Record<string, string>> = {
  intra_op_thread_count: 'intra_op_threads',
  inter_op_thread_count: 'inter_op_threads',
};

function runtimeOptions(
  optimization: TextMessage,
  parameters: Record<string, TextMessage>,
  differences: string[],
): Record<string, unknown> {
  const runtime: Record<string, unknown> = {};
  const level = (optimization.graph as TextMessage | undefined)?.level;
  // The onnxruntime backend: -1 disables, 1 is extended, anything else all optimizations.
  if (level !== undefined)
    runtime.graph_optimization_level = level === -1 ? 'disabled' : level === 1 ? 'extended' : 'all';
  for (const [key, parameter] of Object.entries(parameters)) {
    const option = RUNTIME_PARAMETERS[key];
    const value = Number(parameter.string_value);
    if (option !== undefined && Number.isSafeInteger(value) && value >= 0) runtime[option] = value;
    else
      differences.push(
        `parameters "${key}" is not applied: batchserve reads intra_op_thread_count and inter_op_thread_count`,
      );
  }
  return runtime;
}

function executionAccelerators(
  optimization: TextMessage,
  refuse: Refuse,
  differences: string[],
): { gpuDevice: 'cuda' | 'tensorrt'; tensorrt?: Record<string, unknown> } {
  const accelerators = (optimization.execution_accelerators ?? {}) as TextMessage;
  const gpu = (accelerators.gpu_execution_accelerator as TextMessage[] | undefined) ?? [];
  for (const cpu of (accelerators.cpu_execution_accelerator as TextMessage[] | undefined) ?? []) {
    differences.push(
      `optimization.execution_accelerators.cpu_execution_accelerator "${String(cpu.name)}" is not applied: CPU instances run onnxruntime's own CPU kernels`,
    );
  }
  let result: { gpuDevice: 'cuda' | 'tensorrt'; tensorrt?: Record<string, unknown> } = { gpuDevice: 'cuda' };
  gpu.forEach((accelerator, index) => {
    const where = `optimization.execution_accelerators.gpu_execution_accelerator[${index}]`;
    if (accelerator.name !== 'tensorrt') {
      refuse(`${where}.name`, `"${String(accelerator.name)}": GPU instances run CUDA or TensorRT here`);
      return;
    }
    const parameters = (accelerator.parameters ?? {}) as Record<string, string>;
    const tensorrt: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(parameters)) {
      if (key === 'precision_mode') tensorrt.fp16 = value === 'FP16';
      else if (key === 'trt_engine_cache_enable') tensorrt.engine_cache = value === 'true' || value === '1';
      else if (key === 'trt_engine_cache_path') tensorrt.cache_dir = value;
      else
        differences.push(
          `${where}.parameters "${key}" is not applied: batchserve sets precision_mode, trt_engine_cache_enable and trt_engine_cache_path`,
        );
    }
    result = { gpuDevice: 'tensorrt', tensorrt };
  });
  return result;
}

function instanceGroups(
  groups: readonly TextMessage[] | undefined,
  gpuDevice: 'cuda' | 'tensorrt',
  ensemble: boolean,
  refuse: Refuse,
  differences: string[],
): Record<string, unknown>[] {
  // Triton's default: one instance on each GPU there is, else one on the CPU ('auto' here).
  if (!groups || groups.length === 0) return [{ count: 1, device: ensemble ? 'cpu' : 'auto' }];
  return groups.flatMap((group, index) => {
    const where = `instance_group[${index}]`;
    const count = Number(group.count ?? 1);
    const kind = (group.kind as string | undefined) ?? 'KIND_AUTO';
    if (kind === 'KIND_MODEL')
      refuse(`${where}.kind`, 'KIND_MODEL leaves placement to the model, which onnxruntime does not do');
    if (group.passive === true) refuse(`${where}.passive`, 'every instance here takes batches');
    if (nonEmpty(group.secondary_devices)) refuse(`${where}.secondary_devices`, 'NVDLA devices are not used');
    for (const key of ['rate_limiter', 'host_policy', 'profile'] as const) {
      if (group[key] !== undefined && !(Array.isArray(group[key]) && group[key].length === 0)) {
        differences.push(`${where}.${key} is not applied: instances take batches as they free`);
      }
    }
    const gpus = ((group.gpus as number[] | undefined) ?? []).map(Number);
    if (kind === 'KIND_CPU') return [{ count, device: 'cpu' }];
    if (kind === 'KIND_GPU') {
      if (gpus.length === 0) {
        differences.push(`${where} names no gpus: its ${count} instance(s) go on GPU 0, not on each GPU`);
        return [{ count, device: `${gpuDevice}:0` }];
      }
      return gpus.map((gpu) => ({ count, device: `${gpuDevice}:${gpu}` }));
    }
    return [{ count, device: 'auto' }];
  });
}

function ensembleSteps(scheduling: TextMessage, refuse: Refuse): Record<string, unknown>[] {
  const steps = (scheduling.step as TextMessage[] | undefined) ?? [];
  if (steps.length === 0) refuse('ensemble_scheduling.step', 'an ensemble needs at least one step');
  const used = new Map<string, number>();
  return steps.map((step) => {
    const model = typeof step.model_name === 'string' ? step.model_name : '';
    const seen = (used.get(model) ?? 0) + 1;
    used.set(model, seen);
    const version = Number(step.model_version ?? -1);
    return {
      name: seen === 1 ? model : `${model}-${seen}`,
      model,
      ...(version >= 0 ? { version: String(version) } : {}),
      input_map: step.input_map ?? {},
      output_map: step.output_map ?? {},
    };
  });
}

/** Triton's default policy is the one latest version. */
function versionPolicy(policy: TextMessage | undefined): VersionPolicy {
  if (policy?.all !== undefined) return { all: true };
  if (policy?.specific !== undefined) {
    return { specific: (((policy.specific as TextMessage).versions as unknown[] | undefined) ?? []).map(String) };
  }
  const latest = (policy?.latest as TextMessage | undefined)?.num_versions;
  return { latest: Math.max(1, Number(latest ?? 1)) };
}
