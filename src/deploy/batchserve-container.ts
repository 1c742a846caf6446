import { formatDuration } from '../config/schema-kit.js';
import type { HttpGetProbe, Lifecycle, ResourceRequirements, SecurityContext, Volume } from './k8s-objects.js';

/**
 * What a pod needs to know about `batchserve serve`: its ports, the paths it answers, its
 * arguments and how long it takes to stop. Every manifest builds its container from here, so
 * the KServe runtime and the plain Deployment cannot drift apart.
 */

/** `serve`'s defaults; gRPC on Triton's 8001, so that Triton's clients find it where they look. */
export const SERVER_PORTS = { inference: 8080, management: 8081, metrics: 8082, grpc: 8001 } as const;
export const READY_PATH = '/v2/health/ready';
export const LIVE_PATH = '/v2/health/live';
export const METRICS_PATH = '/metrics';
/** Where KServe's storage initializer puts `storageUri`, and where a model image keeps its archives. */
export const MODEL_STORE = '/mnt/models';

/**
 * The root filesystem is read-only; the work dir (where archives are extracted while served,
 * so as large as the models), the management key and Node's temp files go here.
 */
const SCRATCH_VOLUME: Volume = { name: 'scratch', emptyDir: {} };
const SCRATCH_PATH = '/tmp';

const DRAIN_TIMEOUT_US = 30_000_000;
/** Long enough for endpoints to stop sending before the drain starts refusing. */
export const PRE_STOP_SLEEP_SECONDS = 5;
/** The pre-stop sleep, the drain, and ten seconds for the process to unload and exit. */
export const TERMINATION_GRACE_PERIOD_SECONDS = PRE_STOP_SLEEP_SECONDS + DRAIN_TIMEOUT_US / 1_000_000 + 10;

export const DEFAULT_CPU = '1';
export const DEFAULT_MEMORY = '2Gi';
/** The user and group `batchserve` of batchserve's image (Dockerfile), numeric so that runAsNonRoot can check it. */
const NON_ROOT_ID = 10001;

/** `batchserve serve`'s arguments in a pod; `modelName` is KServe's `{{.Name}}` or the Deployment's name. */
export function serveArgs(modelName: string): string[] {
  return [
    'serve',
    '--host',
    '0.0.0.0',
    '--port',
    String(SERVER_PORTS.inference),
    '--management-port',
    String(SERVER_PORTS.management),
    '--metrics-port',
    String(SERVER_PORTS.metrics),
    '--grpc-port',
    String(SERVER_PORTS.grpc),
    '--model-store',
    MODEL_STORE,
    '--models',
    'all',
    '--model-name',
    modelName,
    '--work-dir',
    `${SCRATCH_PATH}/batchserve`,
    '--key-file',
    `${SCRATCH_PATH}/batchserve.key`,
    '--drain-timeout',
    formatDuration(DRAIN_TIMEOUT_US),
  ];
}

function probe(path: string, periodSeconds: number, timeoutSeconds: number, failureThreshold: number): HttpGetProbe {
  return {
    httpGet: { path, port: SERVER_PORTS.inference },
    periodSeconds,
    timeoutSeconds,
    successThreshold: 1,
    failureThreshold,
  };
}

/**
 * The server listens only once its models are loaded, so the start-up probe allows five
 * minutes for that (a large archive from object storage) before liveness takes over.
 */
export const PROBES = {
  startupProbe: probe(LIVE_PATH, 5, 2, 60),
  readinessProbe: probe(READY_PATH, 5, 2, 3),
  livenessProbe: probe(LIVE_PATH, 10, 5, 3),
} as const;

/** Sleep before SIGTERM so that Services and load balancers stop sending before the drain starts. */
export const PRE_STOP: Lifecycle = { preStop: { exec: { command: ['sleep', String(PRE_STOP_SLEEP_SECONDS)] } } };

export const SECURITY_CONTEXT: SecurityContext = {
  runAsNonRoot: true,
  runAsUser: NON_ROOT_ID,
  runAsGroup: NON_ROOT_ID,
  allowPrivilegeEscalation: false,
  privileged: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

export const SCRATCH = {
  volumes: [SCRATCH_VOLUME],
  volumeMounts: [{ name: SCRATCH_VOLUME.name, mountPath: SCRATCH_PATH }],
} as const;

/**
 * CPU and memory requested, memory limited; no CPU limit, since throttling a batching server
 * shows up as p99 latency. `gpu` adds `nvidia.com/gpu` to the limits (requests follow).
 */
export function resources(options: { cpu: string; memory: string; gpu?: number | undefined }): ResourceRequirements {
  return {
    requests: { cpu: options.cpu, memory: options.memory },
    limits: { memory: options.memory, ...gpuLimit(options.gpu) },
  };
}

export function gpuLimit(gpu: number | undefined): Record<string, number> {
  return gpu === undefined ? {} : { 'nvidia.com/gpu': gpu };
}
