import { availableParallelism } from 'node:os';
import { ConfigInvalidError } from '../core/errors.js';
import { DATATYPES } from '../core/datatypes.js';
import type { TensorSpec } from '../core/tensors.js';
import { deepFreeze, validateField, type FieldSpec } from './schema-kit.js';
import { pipelineProblems, pipelineSchema, type PipelineConfig } from './pipeline-config.js';

export const MODEL_CONFIG_FILE = 'model-config.yaml';

/**
 * Ceilings of the numeric keys, held at pack and again whenever serve reads an archive's config,
 * so one packed by an older version or edited by hand cannot get past. They are fixed rather
 * than this machine's because pack may run elsewhere than serve; serve also holds the thread
 * counts to its own cores (machineLimitProblems).
 */
export const MODEL_CONFIG_LIMITS = {
  /**
   * onnxruntime threads per session: the cores of the largest two-socket servers sold (2 × 128).
   * More never speeds an operator up; each is an OS thread with its own stack.
   */
  threads: 256,
  /** serve: threads per core of this machine, room for an archive tuned on a larger one. */
  threadsPerCore: 4,
  instances: 64,
  batchSize: 65_536,
  /** Every preferred size is warmed up at each load. */
  preferredBatchSizes: 64,
  /** Queued rows each hold their request's tensors; a deeper queue only waits past any timeout. */
  queueSize: 1_048_576,
  /** A tensor dimension: what one typed array can index. */
  dimension: 2 ** 31 - 1,
  topK: 65_536,
  /** Tokens of one text: the longest context of today's encoders (and then some). */
  textMaxLength: 131_072,
} as const;

const SECOND_US = 1_000_000;

const DIMENSION: FieldSpec = {
  kind: 'integer',
  min: -1,
  max: MODEL_CONFIG_LIMITS.dimension,
  description: 'A dimension; -1 when variable.',
};

const tensorSpec = (what: string): FieldSpec => ({
  kind: 'object',
  description: `One ${what} tensor.`,
  fields: {
    name: { kind: 'string', description: `The ${what}'s name in the ONNX graph.` },
    datatype: { kind: 'enum', values: DATATYPES, description: 'KServe v2 datatype.' },
    shape: {
      kind: 'array',
      minItems: 0,
      items: DIMENSION,
      description: 'Full shape including the batch dimension (first, -1 when the model batches).',
    },
    reshape: {
      kind: 'array',
      minItems: 0,
      items: DIMENSION,
      description:
        "The shape the model itself has, when requests send (and answers carry) `shape` instead: Triton's `reshape`, the batch dimension included as in `shape`. The data is the same, only its shape changes.",
    },
  },
});

export const DEVICE_PATTERN = /^(cpu|auto|webgpu|sim|(cuda|tensorrt)(:\d+)?)$/;

/** The one schema for `model-config.yaml`: defaults and descriptions live beside each key. */
export const modelConfigSchema = {
  kind: 'object',
  description: 'model-config.yaml',
  fields: {
    inputs: {
      kind: 'array',
      items: tensorSpec('input'),
      description: 'Model inputs. Omit to take them from the model when packing.',
    },
    outputs: {
      kind: 'array',
      items: tensorSpec('output'),
      description: 'Model outputs served. Omit to take all of them from the model when packing.',
    },
    max_batch_size: {
      kind: 'integer',
      min: 0,
      max: MODEL_CONFIG_LIMITS.batchSize,
      description:
        'Most rows one forward pass may hold; 0 = the model does not batch. Default: 16 when every input has a variable first dimension, else 0.',
    },
    dynamic_batching: {
      kind: 'object',
      description: 'How queued requests are grouped into batches.',
      fields: {
        max_queue_delay: {
          kind: 'duration',
          allowAuto: true,
          default: 1_000,
          max: 600 * SECOND_US,
          description:
            'Longest the oldest queued request waits for a fuller batch (µs, or "5ms"). 0 batches what is queued when an instance frees. `auto`: the server times batches at load, learns T(B) = c + m·B and the arrival rate as it serves, and waits only while waiting lowers the instance time per row, inside `max_latency` (docs/serving.md, "Adaptive batching").',
        },
        max_latency: {
          kind: 'duration',
          max: 600 * SECOND_US,
          description:
            'With `max_queue_delay: auto`, the latency budget: no request is held for partners past the point where its expected completion would pass 80 % of it (the rest is for writing the answer), and a request is refused with 503 `BS_ERR_LATENCY_BUDGET` instead of queued when its expected completion (the queue ahead at the learnt batch cost, scaled by how long recent batches held their instance) would pass it (docs/serving.md, "Adaptive batching"). Default: `default_timeout` (1 s when that is 0).',
        },
        preferred_batch_sizes: {
          kind: 'array',
          default: [],
          maxItems: MODEL_CONFIG_LIMITS.preferredBatchSizes,
          items: { kind: 'integer', min: 1, max: MODEL_CONFIG_LIMITS.batchSize, description: 'A batch size.' },
          description: 'Batch sizes dispatched at once when reached; also warmed up at load.',
        },
        max_queue_size: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.queueSize,
          default: 1_024,
          description: 'Queued rows beyond which requests get 503 "Exceeds maximum queue size".',
        },
        default_timeout: {
          kind: 'duration',
          default: 30 * SECOND_US,
          max: 24 * 3600 * SECOND_US,
          description: 'How long a request may wait in the queue (µs, or "30s"); 0 = forever.',
        },
        priority_levels: {
          kind: 'integer',
          min: 1,
          max: 16,
          default: 1,
          description: 'Number of priority levels; level 1 is served first.',
        },
        default_priority_level: {
          kind: 'integer',
          min: 1,
          max: 16,
          description: 'The level of a request that names no priority; default: the last level (`priority_levels`).',
        },
      },
    },
    instances: {
      kind: 'array',
      default: [{ count: 1, device: 'cpu' }],
      minItems: 1,
      description: 'Groups of model instances; each instance runs one batch at a time.',
      items: {
        kind: 'object',
        description: 'One instance group.',
        fields: {
          count: {
            kind: 'integer',
            min: 1,
            max: MODEL_CONFIG_LIMITS.instances,
            default: 1,
            description: 'Instances in this group.',
          },
          device: {
            kind: 'string',
            default: 'cpu',
            pattern: DEVICE_PATTERN,
            patternHint: 'cpu, auto, webgpu, sim, cuda[:N] or tensorrt[:N]',
            description:
              'Where the instances run: cpu, auto, webgpu, cuda[:N], tensorrt[:N], or sim (the simulated accelerator of `simulated_device`).',
          },
        },
      },
    },
    runtime: {
      kind: 'object',
      description: 'onnxruntime session options.',
      fields: {
        intra_op_threads: {
          kind: 'integer',
          min: 0,
          max: MODEL_CONFIG_LIMITS.threads,
          default: 0,
          description: `Threads inside one operator; 0 lets onnxruntime choose, except in a process held to fewer CPUs than the machine has (taskset, a cpuset), which gets one a CPU it may use (onnxruntime would pin threads outside them). serve also refuses more than ${MODEL_CONFIG_LIMITS.threadsPerCore} per CPU core of its machine (os.availableParallelism()).`,
        },
        inter_op_threads: {
          kind: 'integer',
          min: 0,
          max: MODEL_CONFIG_LIMITS.threads,
          default: 0,
          description: `Threads across operators; 0 lets onnxruntime choose. serve also refuses more than ${MODEL_CONFIG_LIMITS.threadsPerCore} per CPU core of its machine.`,
        },
        graph_optimization_level: {
          kind: 'enum',
          values: ['disabled', 'basic', 'extended', 'all'],
          default: 'all',
          description: 'onnxruntime graph optimizations.',
        },
        thread: {
          kind: 'enum',
          values: ['worker', 'main'],
          default: 'worker',
          description:
            "Where each instance's handler and session run: a worker thread of its own, so one model's JavaScript work (image decoding, stacking) never stalls the HTTP loop; or the main thread, which saves a thread hop per batch.",
        },
      },
    },
    tensorrt: {
      kind: 'object',
      description: 'TensorRT options for instances on `tensorrt[:N]` devices.',
      fields: {
        fp16: {
          kind: 'boolean',
          default: false,
          description: 'Let TensorRT build FP16 kernels where they are faster (the model stays FP32 at its edges).',
        },
        engine_cache: {
          kind: 'boolean',
          default: true,
          description: 'Keep built engines on disk, so a restart loads in seconds instead of rebuilding for minutes.',
        },
        cache_dir: {
          kind: 'string',
          description:
            'Where engines are kept; default `$XDG_CACHE_HOME/batchserve/tensorrt` (`~/.cache/batchserve/tensorrt`).',
        },
      },
    },
    simulated_device: {
      kind: 'object',
      optional: true,
      description:
        'The simulated accelerator of instances on device `sim` (docs/serving.md, "The simulated accelerator"): a forward pass of B rows holds its instance for fixed_cost + B × row_cost of wall time and no CPU (Atomics.wait, within about 0.1 ms), and answers zeros in the outputs\' shapes. What a GPU call looks like to the server, with exact costs, so batching can be judged on any machine. Absent: the defaults below.',
      fields: {
        fixed_cost: {
          kind: 'duration',
          default: 4_000,
          max: 60 * SECOND_US,
          description: 'c: what every forward pass costs, whatever its rows (µs, or "4ms").',
        },
        row_cost: {
          kind: 'duration',
          default: 250,
          max: 60 * SECOND_US,
          description: 'm: what each row of a pass adds (µs, or "250us").',
        },
      },
    },
    handler_load_timeout: {
      kind: 'duration',
      min: 1_000,
      max: 600 * SECOND_US,
      default: 30 * SECOND_US,
      description:
        'How long importing a handler file, or a pipeline\'s step module, may take, at pack and at each load (µs, or "30s"). The import runs in a worker thread first, so a module that loops or calls process.exit at import ends only that thread: past the timeout the thread is stopped and pack, or that model\'s load, fails with BS_ERR_HANDLER_LOAD_TIMEOUT while the other models load and serve.',
    },
    warmup: {
      kind: 'boolean',
      default: true,
      description:
        'Run the whole handler lifecycle (preprocess, forward pass, postprocess) on zeros at batch size 1 and each preferred size before reporting ready; a failure fails the load. Turn off for a handler that cannot take v2 tensors.',
    },
    response_cache: {
      kind: 'object',
      optional: true,
      description:
        "Triton's response cache: answers kept by their inputs (every input's name, datatype, shape and bytes, or a TorchServe body and its content type), so a repeated request skips the queue and the instance. Per version, emptied when the version unloads or reloads.",
      fields: {
        enable: { kind: 'boolean', default: true, description: 'Cache this model’s answers.' },
        max_bytes: {
          kind: 'integer',
          min: 1,
          max: 2 ** 40,
          default: 64 * 1024 * 1024,
          description: 'Bytes of keys and answers kept; the least recently used go first.',
        },
      },
    },
    prediction_log: {
      kind: 'object',
      optional: true,
      description:
        'The prediction log of experiments (docs/experiments.md): one JSON line per answered request, with the version, how it was routed, status, latency and outputs; feedback joins to it by request id. Present = on; `serve --prediction-log DIR` turns it on with these defaults for every model.',
      fields: {
        path: {
          kind: 'string',
          description:
            "The model's log folder (relative paths from the server's working directory); default: `<serve --prediction-log>/<model>`.",
        },
        sample_rate: {
          kind: 'number',
          min: 0,
          max: 1,
          default: 1,
          description: 'Share of requests logged, decided per request at random.',
        },
        inputs: {
          kind: 'enum',
          values: ['none', 'hash', 'full'],
          default: 'none',
          description:
            "What of the request is kept: nothing, the body's sha256, or the inputs themselves (v2 tensors as JSON, other bodies base64).",
        },
        top_k: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.topK,
          default: 5,
          description: 'Classifiers (a model with labels): labels kept per row, best first, instead of the scores.',
        },
        max_file_size: {
          kind: 'integer',
          min: 1024,
          max: 2 ** 40,
          default: 64 * 1024 * 1024,
          description: 'Bytes after which the next file is started.',
        },
        max_files: {
          kind: 'integer',
          min: 1,
          max: 100_000,
          default: 10,
          description: 'Files kept; the oldest is deleted when a new one would exceed it.',
        },
      },
    },
    pipeline: pipelineSchema,
    labels_file: {
      kind: 'string',
      pattern: /^[^/\\][^\\]*$/,
      patternHint: 'a relative path inside the archive',
      description: 'Class labels, one per line, for classification outputs (a file packed with --extra-files).',
    },
    image_classifier: {
      kind: 'object',
      optional: true,
      description: 'Options of the built-in image-classifier handler.',
      fields: {
        resize: {
          kind: 'enum',
          values: ['stretch', 'keep-ratio-pad'],
          default: 'stretch',
          description: 'stretch to the input size, or keep the aspect ratio and pad right/bottom with zeros.',
        },
        channel_order: {
          kind: 'enum',
          values: ['RGB', 'BGR'],
          default: 'RGB',
          description: 'Channel order the model expects.',
        },
        layout: {
          kind: 'enum',
          values: ['NCHW', 'NHWC'],
          default: 'NCHW',
          description: 'Tensor layout of the image input.',
        },
        mean: {
          kind: 'array',
          default: [0.485, 0.456, 0.406],
          minItems: 3,
          items: { kind: 'number', description: 'A channel mean.' },
          description: 'Per-channel mean subtracted from pixels scaled to 0..1.',
        },
        std: {
          kind: 'array',
          default: [0.229, 0.224, 0.225],
          minItems: 3,
          items: { kind: 'number', min: 1e-9, description: 'A channel standard deviation.' },
          description: 'Per-channel standard deviation the centred pixels are divided by.',
        },
        top_k: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.topK,
          default: 5,
          description: 'Classes returned per image, best first.',
        },
        softmax: {
          kind: 'enum',
          values: ['auto', 'always', 'never'],
          default: 'auto',
          description: 'Apply softmax to the scores; auto does so unless each row already sums to 1.',
        },
      },
    },
    text: {
      kind: 'object',
      optional: true,
      description:
        'Options of the built-in text handlers: text-embedding, text-classifier and text-generation (its tokenizer).',
      fields: {
        tokenizer_file: {
          kind: 'string',
          pattern: /^[^/\\][^\\]*$/,
          patternHint: 'a relative path inside the archive',
          description:
            "A Hugging Face tokenizer.json packed with --extra-files; the handler's texts are tokenized with it.",
        },
        chat_template_file: {
          kind: 'string',
          pattern: /^[^/\\][^\\]*$/,
          patternHint: 'a relative path inside the archive',
          description:
            "text-generation: the model's Jinja chat template for /v1/chat/completions, a tokenizer_config.json (its chat_template, bos and eos tokens) or a template file; without it, messages become `role: content` lines.",
        },
        max_length: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.textMaxLength,
          default: 512,
          description: 'Tokens a text may have, special tokens included; a longer one is refused (400), not cut.',
        },
        pad_multiple: {
          kind: 'integer',
          min: 1,
          max: 1024,
          default: 8,
          description:
            'A batch is padded to its longest text, rounded up to a multiple of this (no further than max_length), so batches of nearby widths repeat a shape.',
        },
        pooling: {
          kind: 'enum',
          values: ['mean', 'cls', 'none'],
          default: 'mean',
          description:
            "How the first output [batch, tokens, dim] becomes one vector a text: the mean over its tokens (the attention mask's), the first token's, or none: the output is already [batch, dim].",
        },
        normalize: {
          kind: 'boolean',
          default: true,
          description: 'Scale each embedding to unit length (cosine similarity becomes a dot product).',
        },
        top_k: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.topK,
          default: 5,
          description: 'text-classifier: classes returned per text, best first.',
        },
        softmax: {
          kind: 'enum',
          values: ['auto', 'always', 'never'],
          default: 'auto',
          description: 'text-classifier: apply softmax to the logits; auto does so unless each row already sums to 1.',
        },
      },
    },
    generation: {
      kind: 'object',
      optional: true,
      description:
        'Options of the built-in text-generation handler: a decoder with past key/values in and out, batched a decoding step at a time.',
      fields: {
        scheduling: {
          kind: 'enum',
          values: ['iteration', 'request'],
          default: 'iteration',
          description:
            'iteration: the batch is re-formed at every decoding step, finished sequences leave and waiting ones join at once; request: a batch of sequences runs until its last one ends before others join (whole-request batching, for comparison).',
        },
        max_active_sequences: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.batchSize,
          default: 16,
          description: 'Sequences decoded together: the rows of a decoding step.',
        },
        max_tokens_per_step: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.queueSize,
          default: 512,
          description:
            "Prompt tokens one step may read: joining prompts are read together up to this; a longer prompt is read this many tokens a step, in turn with the running sequences' steps (chunked prefill), so it holds them back one chunk at a time.",
        },
        max_total_tokens: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.queueSize * 16,
          default: 65_536,
          description:
            'Tokens the active sequences may hold in the key/value cache together, each counted at its prompt plus its max_tokens: a sequence joins only when it fits.',
        },
        kv_cache_bytes: {
          kind: 'integer',
          min: 1,
          max: 2 ** 50,
          description:
            "Bytes the running sequences' key/value caches may come to hold, padding included; a sequence joins only when its batch's can still fit (default: a quarter of the machine's memory).",
        },
        prefix_cache_bytes: {
          kind: 'integer',
          min: 0,
          max: 2 ** 50,
          description:
            'Bytes of key/value cache kept for prompt prefixes already read (a system prompt, a shared document), so a prompt that starts the same way reads only what follows; 0 turns it off (default: a quarter of kv_cache_bytes). Decoders batched with padding only.',
        },
        max_context: {
          kind: 'integer',
          min: 2,
          max: MODEL_CONFIG_LIMITS.textMaxLength,
          description:
            "A sequence's prompt plus its new tokens; a request asking more is refused (400). Checked by running the model one token at its last position: over the positions the model holds, pack refuses it (BS_ERR_CONFIG_INVALID) and load serves what the model holds with a warning. Default: the positions the model holds, at most 2048.",
        },
        max_new_tokens: {
          kind: 'integer',
          min: 1,
          max: MODEL_CONFIG_LIMITS.textMaxLength,
          default: 256,
          description: 'New tokens when a request names no max_tokens, and the most one may name.',
        },
        max_waiting: {
          kind: 'integer',
          min: 0,
          max: MODEL_CONFIG_LIMITS.queueSize,
          default: 1024,
          description: 'Requests waiting to join; past it a request is refused with 503 BS_ERR_QUEUE_FULL.',
        },
        eos_token_ids: {
          kind: 'array',
          default: [],
          items: { kind: 'integer', min: 0, max: MODEL_CONFIG_LIMITS.dimension, description: 'A token id.' },
          description: 'Token ids that end a sequence (finish_reason stop), beside the stop strings a request sends.',
        },
      },
    },
  },
} as const satisfies FieldSpec;

export interface DynamicBatchingConfig {
  /** Microseconds, or `auto`: adaptive batching. */
  readonly max_queue_delay: number | 'auto';
  /** Microseconds; the budget of adaptive batching. */
  readonly max_latency?: number;
  readonly preferred_batch_sizes: readonly number[];
  readonly max_queue_size: number;
  /** Microseconds; 0 = no timeout. */
  readonly default_timeout: number;
  readonly priority_levels: number;
  readonly default_priority_level?: number;
}

export interface InstanceGroup {
  readonly count: number;
  readonly device: string;
}

export interface TensorrtOptions {
  readonly fp16: boolean;
  readonly engine_cache: boolean;
  readonly cache_dir?: string;
}

export interface ImageClassifierOptions {
  readonly resize: 'stretch' | 'keep-ratio-pad';
  readonly channel_order: 'RGB' | 'BGR';
  readonly layout: 'NCHW' | 'NHWC';
  readonly mean: readonly number[];
  readonly std: readonly number[];
  readonly top_k: number;
  readonly softmax: 'auto' | 'always' | 'never';
}

export interface TextOptions {
  readonly tokenizer_file?: string;
  readonly chat_template_file?: string;
  readonly max_length: number;
  readonly pad_multiple: number;
  readonly pooling: 'mean' | 'cls' | 'none';
  readonly normalize: boolean;
  readonly top_k: number;
  readonly softmax: 'auto' | 'always' | 'never';
}

export interface GenerationOptions {
  readonly scheduling: 'iteration' | 'request';
  readonly max_active_sequences: number;
  readonly max_tokens_per_step: number;
  readonly max_total_tokens: number;
  readonly kv_cache_bytes?: number;
  readonly prefix_cache_bytes?: number;
  readonly max_context?: number;
  readonly max_new_tokens: number;
  readonly max_waiting: number;
  readonly eos_token_ids: readonly number[];
}

/** Microseconds each: a pass of B rows costs fixed_cost + B × row_cost. */
export interface SimulatedDeviceConfig {
  readonly fixed_cost: number;
  readonly row_cost: number;
}

export interface ResponseCacheConfig {
  readonly enable: boolean;
  readonly max_bytes: number;
}

export interface PredictionLogConfig {
  readonly path?: string;
  readonly sample_rate: number;
  readonly inputs: 'none' | 'hash' | 'full';
  readonly top_k: number;
  readonly max_file_size: number;
  readonly max_files: number;
}

export interface ModelConfig {
  /** Absent until packing fills them in from the model. */
  readonly inputs?: readonly TensorSpec[];
  readonly outputs?: readonly TensorSpec[];
  /** Absent until packing decides from the model's batch dimension. */
  readonly max_batch_size?: number;
  readonly dynamic_batching: DynamicBatchingConfig;
  readonly instances: readonly InstanceGroup[];
  readonly runtime: {
    readonly intra_op_threads: number;
    readonly inter_op_threads: number;
    readonly graph_optimization_level: 'disabled' | 'basic' | 'extended' | 'all';
    readonly thread: 'worker' | 'main';
  };
  readonly tensorrt: TensorrtOptions;
  /** Microseconds. */
  readonly handler_load_timeout: number;
  readonly warmup: boolean;
  readonly simulated_device?: SimulatedDeviceConfig;
  readonly prediction_log?: PredictionLogConfig;
  readonly response_cache?: ResponseCacheConfig;
  readonly labels_file?: string;
  readonly image_classifier?: ImageClassifierOptions;
  readonly text?: TextOptions;
  readonly generation?: GenerationOptions;
  /** Set for a pipeline: an archive of steps, with no ONNX model of its own. */
  readonly pipeline?: PipelineConfig;
}

/** A config whose inputs, outputs and batch size are known: what an archive holds. */
export type CompleteModelConfig = ModelConfig & {
  readonly inputs: readonly TensorSpec[];
  readonly outputs: readonly TensorSpec[];
  readonly max_batch_size: number;
};

/**
 * Validates a parsed config object, fills in defaults and freezes it.
 * Throws ConfigInvalidError listing every problem, each as `key.path: message`.
 */
export function validateModelConfig(raw: unknown, source: string): ModelConfig {
  const problems: string[] = [];
  const config = validateField(modelConfigSchema, raw ?? {}, '', problems) as ModelConfig | undefined;
  if (config) problems.push(...crossFieldProblems(config));
  if (problems.length > 0 || !config) throw new ConfigInvalidError(source, problems);
  return deepFreeze(config);
}

/**
 * What serve checks beyond the schema, against the machine it runs on: an archive packed on a
 * larger machine may ask for more threads than this one has cores for, and onnxruntime starts
 * every one of them per instance without a word.
 */
export function machineLimitProblems(config: ModelConfig, cores = availableParallelism()): string[] {
  const { threadsPerCore } = MODEL_CONFIG_LIMITS;
  const cap = cores * threadsPerCore;
  return (['intra_op_threads', 'inter_op_threads'] as const).flatMap((key) => {
    const threads = config.runtime[key];
    return threads > cap
      ? [
          `runtime.${key}: expected at most ${cap} (${threadsPerCore} per CPU core of this machine's ${cores}), got ${threads}`,
        ]
      : [];
  });
}

function crossFieldProblems(config: ModelConfig): string[] {
  const problems: string[] = [];
  for (const key of ['inputs', 'outputs'] as const) {
    const seen = new Set<string>();
    config[key]?.forEach((tensor, index) => {
      if (seen.has(tensor.name)) problems.push(`${key}[${index}].name: "${tensor.name}" is listed twice`);
      seen.add(tensor.name);
      if (tensor.shape?.some((dim) => dim === 0)) {
        problems.push(`${key}[${index}].shape: dimensions must be -1 or positive, got [${tensor.shape.join(', ')}]`);
      }
      problems.push(...reshapeProblems(tensor, `${key}[${index}]`));
      if (config.max_batch_size !== undefined && config.max_batch_size > 0) {
        const first = tensor.shape?.[0];
        if (first === undefined) {
          problems.push(`${key}[${index}].shape: max_batch_size > 0 needs a batch dimension, got a scalar`);
        } else if (first !== -1) {
          problems.push(
            `${key}[${index}].shape: the batch dimension (first) must be -1 when max_batch_size > 0, got ${first}`,
          );
        }
      }
    });
  }
  const { max_batch_size: maxBatch, dynamic_batching: batching } = config;
  if (batching.default_priority_level !== undefined && batching.default_priority_level > batching.priority_levels) {
    problems.push(
      `dynamic_batching.default_priority_level: ${batching.default_priority_level} is past priority_levels (${batching.priority_levels})`,
    );
  }
  if (maxBatch !== undefined) {
    batching.preferred_batch_sizes.forEach((size, index) => {
      if (size > maxBatch) {
        problems.push(`dynamic_batching.preferred_batch_sizes[${index}]: ${size} exceeds max_batch_size ${maxBatch}`);
      }
    });
  }
  if (config.pipeline) problems.push(...pipelineProblems(config.pipeline, config.inputs, config.outputs));
  const image = config.image_classifier;
  if (image && image.mean.length !== image.std.length) {
    problems.push('image_classifier: mean and std must have one value per channel each');
  }
  return problems;
}

/**
 * A reshape changes the shape, never the data: the same element count when both are fixed,
 * the batch dimension where `shape` has it, and at most one variable dimension besides it
 * (found from the other's elements).
 */
function reshapeProblems(tensor: TensorSpec, where: string): string[] {
  const { shape, reshape } = tensor;
  if (reshape === undefined || shape === undefined) return [];
  const batched = shape[0] === -1;
  if (batched && reshape[0] !== -1) return [`${where}.reshape: must keep the batch dimension first, as -1`];
  const rest = (dims: readonly number[]): readonly number[] => (batched ? dims.slice(1) : dims);
  if (rest(reshape).some((dim) => dim === 0)) return [`${where}.reshape: dimensions must be -1 or positive`];
  const variable = rest(reshape).filter((dim) => dim === -1).length;
  if (variable > 1) return [`${where}.reshape: at most one variable dimension besides the batch`];
  const elements = (dims: readonly number[]): number => dims.reduce((product, dim) => product * dim, 1);
  if (variable === 0 && !rest(shape).includes(-1) && elements(rest(shape)) !== elements(rest(reshape))) {
    return [
      `${where}.reshape: [${reshape.join(', ')}] holds ${elements(rest(reshape))} elements a row, shape [${shape.join(', ')}] ${elements(rest(shape))}`,
    ];
  }
  return [];
}
