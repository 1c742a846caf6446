import { MODEL_NAME_HINT, MODEL_NAME_PATTERN } from '../core/model-name.js';
import { DEVICE_PATTERN } from '../config/model-config.js';
import { renderSchemaReference } from '../config/reference.js';
import { deepFreeze, validateField, type FieldSpec } from '../config/schema-kit.js';
import { ConfigInvalidError } from '../core/errors.js';
import { modelPolicyProblems, modelPolicySpec, type ModelPolicy } from '../config/model-policy.js';

const SECOND_US = 1_000_000;
const HOUR_US = 3600 * SECOND_US;

const port = (defaultPort: number, what: string): FieldSpec => ({
  kind: 'integer',
  min: 0,
  max: 65_535,
  default: defaultPort,
  description: `Port of the ${what}; 0 picks a free one (the start-up block prints it).`,
});

/** The one schema for `serve --config server.yaml`; command-line flags override it. */
export const serverConfigSchema = {
  kind: 'object',
  description: 'server.yaml',
  fields: {
    models: {
      kind: 'array',
      default: [],
      items: {
        kind: 'string',
        pattern: /^(all|[^=\s]+=.+)$/,
        patternHint: 'name=path.mar, or all',
        description: 'A model to load.',
      },
      description:
        'Models to load at start, each `name=path.mar` (the name must match the archive), or `all` for every archive in the model store. Left empty with a model store that is one archive, it is `[all]`.',
    },
    model_store: {
      kind: 'string',
      description:
        'Where `--models all` and register-by-name find archives: a folder of archives (`.mar` files and archive folders), one `.mar` file, or one archive folder. Read only: nothing is ever written into it, except a register-by-URL download into a writable folder.',
    },
    model_repository: {
      kind: 'string',
      description:
        "A Triton model repository served as it is (docs/triton.md): each folder `<model>/` with a `config.pbtxt` (or none: the tensors come from the model) and numbered version folders holding `model.onnx`, under each config's `version_policy`. Read only, as the model store; give one of the two.",
    },
    load_model: {
      kind: 'array',
      default: [],
      items: {
        kind: 'string',
        pattern: /^(\*|[A-Za-z0-9][\w.-]*)$/,
        patternHint: 'a model name, or *',
        description: 'A model of the repository.',
      },
      description:
        "With `model_control: explicit`, the repository's models loaded at start (Triton's `--load-model`); `*` loads them all. Others load through the repository extension's load.",
    },
    repository_poll_secs: {
      kind: 'number',
      min: 0.1,
      max: 86_400,
      default: 15,
      description:
        "With `model_control: poll`, how often the model repository is read again (Triton's `--repository-poll-secs`): new version folders the policy keeps load, removed ones drain, a changed config.pbtxt or model file reloads, new model folders load and removed ones unload.",
    },
    model_name: {
      kind: 'string',
      pattern: MODEL_NAME_PATTERN,
      patternHint: MODEL_NAME_HINT,
      description:
        "Serve the model store's one model (all its versions) under this name instead of the archive's; needs `models: [all]` (implied when the store is one archive). KServe passes `{{.Name}}`.",
    },
    work_dir: {
      kind: 'string',
      description:
        'Where archives are extracted while served (a folder `batchserve-<pid>-<random>` per server inside it, removed at exit; those of processes that are gone are removed at start). Default: the system temp folder (`os.tmpdir()`).',
    },
    host: { kind: 'string', default: '127.0.0.1', description: 'Address every API binds to.' },
    port: port(8080, 'inference API (KServe v2, TorchServe predictions)'),
    management_port: port(8081, 'management API'),
    metrics_port: port(8082, 'Prometheus metrics'),
    grpc_port: port(
      8001,
      "gRPC inference API (KServe v2 / Triton's `inference.GRPCInferenceService`, with health and reflection)",
    ),
    grpc_max_streams: {
      kind: 'integer',
      min: 1,
      max: 100_000,
      default: 100,
      description:
        'ModelStreamInfer streams open at once, over all connections; a stream beyond it is refused with RESOURCE_EXHAUSTED.',
    },
    grpc_max_metadata_size: {
      kind: 'integer',
      min: 1024,
      max: 60 * 1024,
      default: 16 * 1024,
      description:
        "Bytes of metadata (headers: names, values and 32 bytes each, as HTTP/2 counts them) one gRPC call may carry; a call over it is refused with RESOURCE_EXHAUSTED naming the limit (gRPC C core's hard limit is the default). Node's HTTP/2 itself refuses header blocks past about 64 KiB, before this check can answer.",
    },
    grpc_keepalive_time: {
      kind: 'duration',
      min: SECOND_US,
      max: 24 * HOUR_US,
      default: 2 * HOUR_US,
      description:
        "How often the server pings an idle gRPC connection to see that the client is still there (gRPC's default, 2 h).",
    },
    grpc_keepalive_timeout: {
      kind: 'duration',
      min: 1_000,
      max: 600 * SECOND_US,
      default: 20 * SECOND_US,
      description: 'How long a keepalive ping may go unanswered before the connection is closed.',
    },
    max_request_size: {
      kind: 'integer',
      min: 1,
      // A body is read into one Buffer; 2 GiB is the most Node 20's Buffer.concat and JSON.parse reliably take.
      max: 2 ** 31,
      default: 64 * 1024 * 1024,
      description: 'Largest request body in bytes; larger ones get 413.',
    },
    headers_timeout: {
      kind: 'duration',
      min: 1_000,
      max: 600 * SECOND_US,
      default: 10 * SECOND_US,
      description:
        "How long a client may take to send a request's headers; slower ones are cut (408), which stops slow-header attacks.",
    },
    request_timeout: {
      kind: 'duration',
      max: 24 * HOUR_US,
      default: 300 * SECOND_US,
      description: 'How long a client may take to send a whole request, body included; 0 turns the limit off.',
    },
    keep_alive_timeout: {
      kind: 'duration',
      max: 600 * SECOND_US,
      default: 5 * SECOND_US,
      description: 'How long an idle keep-alive connection stays open for its next request.',
    },
    max_connections: {
      kind: 'integer',
      min: 1,
      // Each is a file descriptor; past 65 536 the process limit (ulimit -n) is the real bound.
      max: 65_536,
      default: 1024,
      description: 'Open connections each API port accepts at once; further ones are closed as they arrive.',
    },
    max_header_size: {
      kind: 'integer',
      min: 1024,
      max: 1024 * 1024,
      default: 16 * 1024,
      description: 'Largest request header section in bytes; larger ones get 431.',
    },
    drain_timeout: {
      kind: 'duration',
      max: HOUR_US,
      default: 30 * SECOND_US,
      description: 'On SIGTERM/SIGINT, how long admitted requests may take to finish before the server exits.',
    },
    gpu_metrics_interval: {
      kind: 'duration',
      max: HOUR_US,
      default: 5 * SECOND_US,
      description:
        'How often the `batchserve_gpu_*` gauges are sampled from `nvidia-smi` while some model has an instance on a GPU (cuda, tensorrt, webgpu); 0 turns them off. Without `nvidia-smi` nothing is sampled (one log line).',
    },
    log_level: {
      kind: 'enum',
      values: ['debug', 'info', 'warn', 'error', 'silent'],
      default: 'info',
      description: 'JSON logs on stderr; debug logs one line per request.',
    },
    startup_format: {
      kind: 'enum',
      values: ['auto', 'text', 'json'],
      default: 'auto',
      description:
        'The start-up block on stdout: `text` for people, `json` as one JSON log line (`"msg":"serving"`, with `urls` and `models`); `auto` is text on a terminal, JSON otherwise (a container, a pipe).',
    },
    device: {
      kind: 'string',
      pattern: DEVICE_PATTERN,
      patternHint: 'cpu, auto, webgpu, cuda[:N] or tensorrt[:N]',
      description: "Overrides every model's instance device.",
    },
    auth: {
      kind: 'object',
      description: 'Bearer-token protection of the management API (and, in TorchServe mode, of inference).',
      fields: {
        enabled: { kind: 'boolean', default: true, description: 'Require `Authorization: Bearer <token>`.' },
        mode: {
          kind: 'enum',
          values: ['single', 'torchserve'],
          default: 'single',
          description:
            "single: one management token. torchserve: TorchServe's three keys (management; inference, which the model-running routes then need; API, for GET /token?type=management|inference on the management port, which issues a new key), written to key_file as TorchServe writes key_file.json.",
        },
        key_expiration: {
          kind: 'duration',
          default: 3_600_000_000,
          min: 0,
          // A year: past it a key that lasts is what 0 says.
          max: 365 * 24 * 3_600_000_000,
          description:
            "torchserve mode: how long a management or inference key lasts (TorchServe's token_expiration_min, 60 minutes); 0: for ever.",
        },
        token: { kind: 'string', description: 'The token; generated at start when absent.' },
        key_file: {
          kind: 'string',
          default: 'batchserve.key',
          description: 'Where a generated token is written (mode 0600).',
        },
      },
    },
    tls: {
      kind: 'object',
      optional: true,
      description:
        'TLS on every port (inference, management and metrics as https, gRPC as grpcs), TLS 1.2 and later only. The files are PEM, read at start (a bad or mismatched one stops it, in a line naming the file) and again on SIGHUP: new connections get the new certificates, open ones keep theirs and are not dropped.',
      fields: {
        cert: {
          kind: 'string',
          description: "The server's certificate chain (PEM): its own certificate first, then any intermediates.",
        },
        key: { kind: 'string', description: "The certificate's private key (PEM, not encrypted)." },
        client_ca: {
          kind: 'string',
          description:
            'CA certificates (PEM) that client certificates must be signed by (mutual TLS) on the APIs of `client_auth`; a client without one, or with one from another CA, fails the handshake.',
        },
        client_auth: {
          kind: 'array',
          items: { kind: 'enum', values: ['inference', 'management', 'metrics', 'grpc'], description: 'An API.' },
          description:
            "With `client_ca`, the APIs that require a client certificate. Default: `[management]`, which changes models; inference and gRPC keep the bearer keys of `auth` (TorchServe's inference key), and can be added, as Triton's gRPC takes a root certificate for mutual authentication.",
        },
      },
    },
    tracing: {
      kind: 'object',
      optional: true,
      description:
        "OpenTelemetry traces of inference requests, exported over OTLP/HTTP (JSON): a span per request with its queue, batch, forward pass and, for generation, time to first token, prefill and decode. Without an endpoint here or in `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) nothing is traced; the standard `OTEL_*` variables (`OTEL_EXPORTER_OTLP_HEADERS`, timeout and compression, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_SDK_DISABLED`) apply. Triton's `/v2[/models/{m}]/trace/setting` reads and sets the sampling while serving.",
      fields: {
        otlp_endpoint: {
          kind: 'string',
          pattern: /^https?:\/\/\S+$/,
          patternHint: 'an http:// or https:// URL',
          description:
            "The collector's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` means it: `/v1/traces` is added (e.g. `http://localhost:4318`).",
        },
        sample_ratio: {
          kind: 'number',
          min: 0,
          max: 1,
          description:
            'The share of requests traced among those whose `traceparent` does not say the caller sampled them (those are always traced). Default: `OTEL_TRACES_SAMPLER_ARG` with `OTEL_TRACES_SAMPLER=traceidratio` (or parentbased_traceidratio), 0 with always_off, else 1.',
        },
      },
    },
    model_control: {
      kind: 'enum',
      values: ['explicit', 'none', 'poll'],
      description:
        "Triton's `--model-control-mode` (also that flag): `explicit` allows the v2 repository extension's load and unload on the inference port with the management token (open only under `--no-auth`); `none` refuses them (403), the index staying readable; `poll` refuses them too, and reads the model repository again every `repository_poll_secs`. With `model_repository`, `none` and `poll` load every model at start and `explicit` those of `load_model`. Default: `none` with a model repository (Triton's default), else `explicit`.",
    },
    allowed_urls: {
      kind: 'array',
      default: [],
      items: { kind: 'string', description: 'A regular expression.' },
      description: 'Remote model URLs the management API may fetch; any other URL is refused.',
    },
    model_policies: {
      kind: 'map',
      keyHint: 'model',
      values: modelPolicySpec,
      description: 'Per model name: version policy, default version and traffic (A/B split, sticky key, shadow).',
    },
    prediction_log: {
      kind: 'string',
      description:
        "Turns on every model's prediction log (docs/experiments.md), each in `<dir>/<model>/`, with the defaults of `prediction_log` in model-config.yaml; a model's own `prediction_log` keys win.",
    },
    state_file: {
      kind: 'string',
      default: 'batchserve-state.json',
      description:
        'Where changes made at run time (default versions, traffic, canaries) are kept, so they survive a restart and win over model_policies; delete it to start from the config again.',
    },
  },
} as const satisfies FieldSpec;

export interface ServerConfig {
  readonly models: readonly string[];
  readonly model_store?: string;
  readonly model_repository?: string;
  readonly load_model: readonly string[];
  /** Seconds. */
  readonly repository_poll_secs: number;
  readonly model_name?: string;
  readonly work_dir?: string;
  readonly host: string;
  readonly port: number;
  readonly management_port: number;
  readonly metrics_port: number;
  readonly grpc_port: number;
  readonly grpc_max_streams: number;
  readonly grpc_max_metadata_size: number;
  /** Microseconds. */
  readonly grpc_keepalive_time: number;
  /** Microseconds. */
  readonly grpc_keepalive_timeout: number;
  readonly max_request_size: number;
  /** Microseconds. */
  readonly headers_timeout: number;
  /** Microseconds; 0 is no limit. */
  readonly request_timeout: number;
  /** Microseconds. */
  readonly keep_alive_timeout: number;
  readonly max_connections: number;
  readonly max_header_size: number;
  /** Microseconds. */
  readonly drain_timeout: number;
  /** Microseconds; 0: no GPU metrics. */
  readonly gpu_metrics_interval: number;
  readonly log_level: 'debug' | 'info' | 'warn' | 'error' | 'silent';
  readonly startup_format: 'auto' | 'text' | 'json';
  readonly device?: string;
  readonly auth: {
    readonly enabled: boolean;
    readonly mode: 'single' | 'torchserve';
    /** Microseconds; 0 = never. */
    readonly key_expiration: number;
    readonly token?: string;
    readonly key_file: string;
  };
  readonly tls?: TlsConfig;
  readonly tracing?: TracingConfig;
  readonly model_control: 'explicit' | 'none' | 'poll';
  readonly allowed_urls: readonly string[];
  readonly model_policies?: Readonly<Record<string, ModelPolicy>>;
  readonly prediction_log?: string;
  readonly state_file: string;
}

/** The APIs, each on its own port. */
export type ApiName = 'inference' | 'management' | 'metrics' | 'grpc';

export interface TlsConfig {
  readonly cert: string;
  readonly key: string;
  readonly client_ca?: string;
  /** Where client certificates are required: `client_auth`, or management when only client_ca is given; none without client_ca. */
  readonly client_auth: readonly ApiName[];
}

export interface TracingConfig {
  readonly otlp_endpoint?: string;
  readonly sample_ratio?: number;
}

export function validateServerConfig(raw: unknown, source: string): ServerConfig {
  const problems: string[] = [];
  const config = validateField(serverConfigSchema, raw ?? {}, '', problems) as ServerConfig | undefined;
  config?.allowed_urls.forEach((pattern, index) => {
    try {
      new RegExp(pattern);
    } catch {
      problems.push(`allowed_urls[${index}]: not a valid regular expression: ${pattern}`);
    }
  });
  if (config && config.request_timeout > 0 && config.headers_timeout > config.request_timeout) {
    problems.push('headers_timeout: must not be longer than request_timeout');
  }
  if (config?.model_name !== undefined && (config.models.length !== 1 || config.models[0] !== 'all')) {
    problems.push(
      "model_name: renames the model store's one model, so it needs `models: [all]` (--models all); a `name=path.mar` model is named already",
    );
  }
  if (config) problems.push(...portClashes(config), ...repositoryProblems(config), ...tlsProblems(config));
  for (const [name, policy] of Object.entries(config?.model_policies ?? {})) {
    problems.push(...modelPolicyProblems(policy, `model_policies.${name}`));
  }
  if (problems.length > 0 || !config) throw new ConfigInvalidError(source, problems);
  return deepFreeze({
    ...config,
    model_control: config.model_control ?? (config.model_repository !== undefined ? 'none' : 'explicit'),
    ...(config.tls ? { tls: { ...config.tls, client_auth: clientAuth(config.tls) } } : {}),
  });
}

/** A certificate needs its key; client certificates need a CA to check them against. */
function tlsProblems(config: ServerConfig): string[] {
  const tls = config.tls as Partial<TlsConfig> | undefined;
  if (!tls) return [];
  const problems: string[] = [];
  if (tls.cert === undefined || tls.key === undefined) {
    problems.push(
      `tls: needs both cert and key (--tls-cert and --tls-key); got ${tls.cert === undefined ? 'no cert' : 'no key'}`,
    );
  }
  if (tls.client_auth !== undefined && tls.client_ca === undefined) {
    problems.push('tls.client_auth: client certificates are checked against tls.client_ca (--tls-client-ca); give it');
  }
  if (tls.client_auth?.length === 0 && tls.client_ca !== undefined) {
    problems.push('tls.client_auth: name the APIs that require client certificates, or leave tls.client_ca out');
  }
  return problems;
}

function clientAuth(tls: Partial<TlsConfig>): readonly ApiName[] {
  if (tls.client_ca === undefined) return [];
  return [...new Set<ApiName>(tls.client_auth ?? ['management'])];
}

/** A model repository stands in for the model store, and its models load by the control mode. */
function repositoryProblems(config: ServerConfig): string[] {
  const problems: string[] = [];
  const repository = config.model_repository !== undefined;
  const mode = config.model_control as ServerConfig['model_control'] | undefined;
  if (repository && config.model_store !== undefined) {
    problems.push('model_repository: serves in place of model_store; give one of the two');
  }
  if (repository && config.models.includes('all')) {
    problems.push(
      "models: `all` loads a model store; a model repository's models load by model_control (none and poll: all of them; explicit: load_model)",
    );
  }
  if (config.load_model.length > 0 && (!repository || mode !== 'explicit')) {
    problems.push('load_model: names models of model_repository to load at start with model_control: explicit');
  }
  if (mode === 'poll' && !repository) problems.push('model_control: poll reads a model_repository; give one');
  return problems;
}

/** Two APIs cannot share a port (0 picks a different free one for each). */
function portClashes(config: ServerConfig): string[] {
  const ports = [
    ['port', config.port],
    ['management_port', config.management_port],
    ['metrics_port', config.metrics_port],
    ['grpc_port', config.grpc_port],
  ] as const;
  return ports.flatMap(([key, value], index) => {
    const earlier = ports.slice(0, index).find(([, other]) => other === value && value !== 0);
    return earlier ? [`${key}: ${value} is ${earlier[0]} already; each API needs its own port`] : [];
  });
}

export function renderServerConfigReference(): string {
  return renderSchemaReference(serverConfigSchema, 'serve options and server.yaml reference', [
    '`batchserve serve --config server.yaml` reads these keys (YAML or JSON); every key is',
    'optional and unknown keys are errors. Every key except `allowed_urls`, `model_policies` and',
    '`auth.token` also has a flag of the same name in kebab case (`max_request_size` →',
    '`--max-request-size`) and an environment variable, `BATCHSERVE_` and the flag in upper snake',
    'case (`BATCHSERVE_MAX_REQUEST_SIZE`); `auth.enabled: false` is `--no-auth` or',
    '`BATCHSERVE_AUTH=false`, `auth.key_file` is `--key-file` (`BATCHSERVE_KEY_FILE`), `tls.cert` is',
    '`--tls-cert` (`BATCHSERVE_TLS_CERT`; `tls.key`, `tls.client_ca` and `tls.client_auth` alike), and',
    'the file itself is `--config` (`BATCHSERVE_CONFIG`). A flag wins over its variable, a variable over the',
    'file, the file over the default. Durations take microseconds or a string such as `10s`.',
  ]);
}
