import { Option, type Command } from 'commander';
import { commaList } from './options.js';
import type { ServeCommandOptions } from './serve.js';

/** The one rule: `--model-store <path>` → `BATCHSERVE_MODEL_STORE`. */
const serveEnvName = (flags: string): string =>
  `BATCHSERVE_${(/--([a-z-]+)/.exec(flags)?.[1] ?? '').toUpperCase().replaceAll('-', '_')}`;

/** A serve flag that its BATCHSERVE_* variable may set too; commander ranks the flag first. */
const flag = (flags: string, description: string, parse?: (value: string, previous?: string[]) => string[]): Option => {
  const option = new Option(flags, description).env(serveEnvName(flags));
  return parse ? option.argParser(parse) : option;
};

const ENVIRONMENT_HELP = `
Environment:
  Every flag but --no-auth can be set by a variable: BATCHSERVE_ and the flag in upper snake
  case (--model-store → BATCHSERVE_MODEL_STORE, --models a=a.mar,b=b.mar → BATCHSERVE_MODELS).
  --no-auth is BATCHSERVE_AUTH=false. A flag wins over its variable, a variable over the
  --config file, the file over the default. A variable set but empty is refused.

In a container (KServe):
  serve --host 0.0.0.0 --port 8080 --management-port 8081 --metrics-port 8082 --grpc-port 8001
        --model-store /mnt/models --models all --model-name {{.Name}} --work-dir /tmp/batchserve
        --key-file /tmp/batchserve.key --drain-timeout 30s
`;

/** Flags only: the server's modules load when the command runs. */
export function registerServe(program: Command): void {
  program
    .command('serve')
    .description('serve model archives with dynamic batching (KServe v2, TorchServe routes, management, metrics)')
    .addOption(
      flag(
        '--models <name=path.mar...>',
        'models to load (comma-separated or repeated); "all" loads the model store (the default when the store is one archive)',
        commaList,
      ),
    )
    .addOption(
      flag(
        '--model-store <path>',
        'folder of archives for --models all and register-by-name, or one archive (.mar file or archive folder); never written to',
      ),
    )
    .addOption(
      flag(
        '--model-repository <dir>',
        'a Triton model repository served as it is: <model>/config.pbtxt and numbered version folders holding model.onnx (docs/triton.md); never written to',
      ),
    )
    .addOption(
      flag(
        '--load-model <name...>',
        "with --model-control-mode explicit, the repository's models loaded at start (comma-separated or repeated; * for all)",
        commaList,
      ),
    )
    .addOption(
      flag(
        '--repository-poll-secs <seconds>',
        'with --model-control-mode poll, how often the model repository is read again (default 15)',
      ),
    )
    .addOption(
      flag(
        '--model-name <name>',
        "serve the store's one model (all its versions) under this name instead of the archive's; needs --models all",
      ),
    )
    .addOption(
      flag(
        '--work-dir <dir>',
        'where archives are extracted, in a batchserve-<pid>-<random> folder per server (default: the system temp folder)',
      ),
    )
    .addOption(flag('--config <server.yaml>', 'server config file; flags and BATCHSERVE_* variables override it'))
    .addOption(flag('--host <address>', 'address every API binds to (default 127.0.0.1; 0.0.0.0 in a container)'))
    .addOption(flag('--port <port>', 'inference port (default 8080; 0 picks a free one)'))
    .addOption(flag('--management-port <port>', 'management port (default 8081)'))
    .addOption(flag('--metrics-port <port>', 'metrics port (default 8082)'))
    .addOption(flag('--grpc-port <port>', "gRPC inference port, Triton's GRPCInferenceService (default 8001)"))
    .addOption(flag('--grpc-max-streams <count>', 'ModelStreamInfer streams open at once (default 100)'))
    .addOption(flag('--grpc-max-metadata-size <bytes>', 'metadata bytes one gRPC call may carry (default 16384)'))
    .addOption(flag('--grpc-keepalive-time <duration>', 'how often an idle gRPC connection is pinged (default 2h)'))
    .addOption(flag('--grpc-keepalive-timeout <duration>', 'how long a keepalive ping may go unanswered (default 20s)'))
    .addOption(
      flag('--device <device>', "override every model's device: cpu, auto, webgpu, cuda[:N], tensorrt[:N], sim"),
    )
    .addOption(flag('--max-request-size <bytes>', 'largest request body (default 64 MiB)'))
    .addOption(
      flag('--headers-timeout <duration>', "how long a client may take to send a request's headers (default 10s)"),
    )
    .addOption(
      flag(
        '--request-timeout <duration>',
        'how long a client may take to send a whole request; 0 is none (default 300s)',
      ),
    )
    .addOption(
      flag('--keep-alive-timeout <duration>', 'how long an idle keep-alive connection stays open (default 5s)'),
    )
    .addOption(flag('--max-connections <count>', 'open connections each port accepts at once (default 1024)'))
    .addOption(flag('--max-header-size <bytes>', 'largest request header section; larger get 431 (default 16 KiB)'))
    .addOption(flag('--drain-timeout <duration>', 'how long SIGTERM waits for admitted requests (default 30s)'))
    .addOption(
      flag(
        '--gpu-metrics-interval <duration>',
        'how often GPU utilisation, memory and power are sampled from nvidia-smi while a model runs on a GPU; 0 = never (default 5s)',
      ),
    )
    .addOption(flag('--log-level <level>', 'debug, info, warn, error or silent; JSON lines on stderr (default info)'))
    .addOption(
      flag(
        '--startup-format <format>',
        'the start-up block on stdout: text, json (one JSON log line) or auto: text on a terminal, else json (default auto)',
      ),
    )
    .addOption(flag('--key-file <path>', 'where the generated management token is written (default ./batchserve.key)'))
    .addOption(
      flag(
        '--ts-config <file>',
        "TorchServe's config.properties: its addresses, model_store, load_models, max_request_size and token keys, under --config and the flags; other keys are named at start",
      ),
    )
    .addOption(flag('--tls-cert <file.pem>', "TLS on every port (https, grpcs): the server's certificate chain, PEM"))
    .addOption(flag('--tls-key <file.pem>', "the certificate's private key, PEM (not encrypted)"))
    .addOption(
      flag(
        '--tls-client-ca <file.pem>',
        'require client certificates signed by these CAs (mutual TLS) on the --tls-client-auth APIs',
      ),
    )
    .addOption(
      flag(
        '--otlp-endpoint <url>',
        'export OpenTelemetry traces of inference requests over OTLP/HTTP to this collector base URL (/v1/traces is added), as OTEL_EXPORTER_OTLP_ENDPOINT',
      ),
    )
    .addOption(
      flag(
        '--trace-sample-ratio <ratio>',
        "the share of requests traced, 0 to 1, among those whose traceparent does not say the caller sampled them (those always are); default 1, or OTEL_TRACES_SAMPLER's",
      ),
    )
    .addOption(
      flag(
        '--tls-client-auth <apis...>',
        'with --tls-client-ca, the APIs that require a client certificate: inference, management, metrics, grpc (default management)',
        commaList,
      ),
    )
    .addOption(
      flag(
        '--auth-mode <mode>',
        "single (one management token) or torchserve (TorchServe's management, inference and API keys in --key-file, GET /token; default single)",
      ),
    )
    .addOption(
      flag(
        '--state-file <path>',
        'where run-time traffic changes are kept across restarts (default ./batchserve-state.json)',
      ),
    )
    .addOption(
      flag(
        '--prediction-log <dir>',
        "log every model's answers as JSON lines in <dir>/<model>/ for experiments and feedback (docs/experiments.md)",
      ),
    )
    .option('--no-auth', 'disable the management API token, with a warning (env: BATCHSERVE_AUTH=false)')
    .addOption(
      flag(
        '--model-control <mode>',
        'v2 repository load/unload on the inference port: explicit (with the management token), none, or poll (a --model-repository read again every --repository-poll-secs); default none with --model-repository, else explicit',
      ),
    )
    .addOption(
      flag('--model-control-mode <mode>', "Triton's spelling of --model-control: none, poll or explicit").conflicts(
        'modelControl',
      ),
    )
    .addHelpText('after', ENVIRONMENT_HELP)
    .action(async (options: ServeCommandOptions, command: Command) => {
      const { runServe } = await import('./serve.js');
      process.exitCode = await runServe(options, (key) => {
        const option = command.options.find((candidate) => candidate.attributeName() === key);
        const fromEnv = command.getOptionValueSource(key) === 'env' && option?.envVar !== undefined;
        return { name: (fromEnv ? option?.envVar : option?.long) ?? key, fromEnv };
      });
    });
}
