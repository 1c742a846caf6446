import { UsageError } from '../core/errors.js';
import { DEFAULT_CPU, DEFAULT_MEMORY } from './batchserve-container.js';
import { cudaImage, parseImageReference } from './image-reference.js';

export type DeploymentMode = 'standard' | 'knative';
export type Autoscaler = 'keda' | 'hpa' | 'none';
/** What KServe routes an InferenceService to: v2 REST on the inference port, or v2 gRPC on the gRPC port. */
export type KServeProtocol = 'v2' | 'grpc-v2';

/** Where KEDA asks Prometheus for the pending rows, unless told: kube-prometheus-stack's service. */
export const DEFAULT_PROMETHEUS_URL = 'http://prometheus-operated.monitoring.svc:9090';

export interface RuntimeOptions {
  readonly image: string;
  readonly cpu?: string | undefined;
  readonly memory?: string | undefined;
}

export interface KServeOptions {
  /** The InferenceService's name, which is also the served model's name (`{{.Name}}`). */
  readonly name: string;
  readonly namespace?: string | undefined;
  readonly storageUri: string;
  readonly deploymentMode: DeploymentMode;
  /** KServe routes one port per InferenceService; v2 (REST) unless given. */
  readonly protocol?: KServeProtocol | undefined;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  /** Standard: pending rows per replica (KEDA); Knative: requests in flight per replica. */
  readonly targetQueueDepth: number;
  readonly gpu?: number | undefined;
  /** Override the runtime's requests when given. */
  readonly cpu?: string | undefined;
  readonly memory?: string | undefined;
  /** The runtime's image; with `gpu` its `-cuda` tag becomes the InferenceService's runtimeVersion. */
  readonly image: string;
  readonly prometheusUrl?: string | undefined;
}

export interface K8sOptions {
  readonly name: string;
  readonly namespace?: string | undefined;
  /** An image with the model archives in /mnt/models, built FROM batchserve's. */
  readonly image: string;
  readonly autoscaler: Autoscaler;
  /** Only without an autoscaler. */
  readonly replicas?: number | undefined;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly targetQueueDepth: number;
  readonly gpu?: number | undefined;
  readonly cpu?: string | undefined;
  readonly memory?: string | undefined;
  readonly prometheusUrl?: string | undefined;
}

const DNS_1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
export const DNS_1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** The names of most objects (claims, secrets, service accounts): dot-separated DNS-1123 labels, at most 253 characters. */
export const DNS_1123_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** Kubernetes' resource quantity, unsigned: `500m`, `2`, `1.5Gi`, `1e3`. */
const QUANTITY =
  /^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;
const URI = /^[a-z][a-z0-9+.-]*:\/\/\S+$/;
const HTTP_URL = /^https?:\/\/[^\s/]+(\/\S*)?$/;
/**
 * KServe names the predictor `<name>-predictor` and Knative its first revision
 * `<name>-predictor-00001`, which must still be a 63-character label.
 */
const KSERVE_NAME_MAX = 63 - '-predictor-00001'.length;

/** Checks the InferenceService's options, throwing one usage error that names the flag. */
export function checkKServeOptions(options: KServeOptions): void {
  checkName(options.name, KSERVE_NAME_MAX, ` so that KServe's ${options.name}-predictor-00001 stays a DNS label`);
  checkNamespace(options.namespace);
  if (!URI.test(options.storageUri)) {
    throw new UsageError(`--storage-uri: expected a URI such as s3://bucket/model.mar, got "${options.storageUri}"`);
  }
  checkReplicas(options.minReplicas, options.maxReplicas, options.deploymentMode === 'knative' ? 0 : 1);
  checkTarget(options.targetQueueDepth);
  checkResources(options);
  if (options.gpu !== undefined) cudaImage(options.image, '--image');
  else parseImageReference(options.image, '--image');
  if (options.deploymentMode === 'knative' && options.prometheusUrl !== undefined) {
    throw new UsageError('--prometheus-url: Knative scales on concurrency and asks no Prometheus; drop the flag');
  }
  checkPrometheusUrl(options.prometheusUrl);
}

export function checkRuntimeOptions(options: RuntimeOptions): void {
  parseImageReference(options.image, '--image');
  checkResources(options);
}

export function checkK8sOptions(options: K8sOptions): void {
  checkName(options.name, 63, '');
  checkNamespace(options.namespace);
  if (options.gpu !== undefined) cudaImage(options.image, '--image');
  else parseImageReference(options.image, '--image');
  if (options.autoscaler === 'none') {
    if (options.replicas !== undefined && options.replicas < 1) {
      throw new UsageError(`--replicas: expected an integer ≥ 1, got ${options.replicas}`);
    }
  } else {
    if (options.replicas !== undefined) {
      throw new UsageError(
        `--replicas: the ${options.autoscaler} autoscaler sets the replicas between --min-replicas and --max-replicas; use --autoscaler none for a fixed count`,
      );
    }
    checkReplicas(options.minReplicas, options.maxReplicas, 1);
    checkTarget(options.targetQueueDepth);
  }
  if (options.autoscaler !== 'keda' && options.prometheusUrl !== undefined) {
    throw new UsageError(
      `--prometheus-url: only KEDA asks Prometheus itself; drop the flag with --autoscaler ${options.autoscaler}`,
    );
  }
  checkPrometheusUrl(options.prometheusUrl);
  checkResources(options);
}

function checkName(name: string, max: number, why: string): void {
  if (!DNS_1035_LABEL.test(name) || name.length > max) {
    throw new UsageError(
      `--name: expected a DNS-1035 label (lower-case letters, digits and '-', starting with a letter, ending with a letter or digit, at most ${max} characters${why}), got "${name}"`,
    );
  }
}

export function checkNamespace(namespace: string | undefined): void {
  if (namespace !== undefined && (!DNS_1123_LABEL.test(namespace) || namespace.length > 63)) {
    throw new UsageError(
      `--namespace: expected a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters), got "${namespace}"`,
    );
  }
}

function checkReplicas(min: number, max: number, lowest: number): void {
  if (min < lowest) {
    const why = lowest === 1 ? ' (the pending rows live in the pods: with none there is nothing to scale up on)' : '';
    throw new UsageError(`--min-replicas: expected an integer ≥ ${lowest}, got ${min}${why}`);
  }
  if (max < Math.max(min, 1)) {
    throw new UsageError(`--max-replicas: expected at least --min-replicas (${min}) and at least 1, got ${max}`);
  }
}

function checkTarget(target: number): void {
  if (!Number.isSafeInteger(target) || target < 1) {
    throw new UsageError(`--target-queue-depth: expected an integer ≥ 1, got ${target}`);
  }
}

export function checkResources(options: {
  cpu?: string | undefined;
  memory?: string | undefined;
  gpu?: number | undefined;
}): void {
  for (const [flag, value] of [
    ['--cpu', options.cpu],
    ['--memory', options.memory],
  ] as const) {
    if (value !== undefined && !QUANTITY.test(value)) {
      throw new UsageError(`${flag}: expected a Kubernetes quantity such as 500m, 2, 4Gi, got "${value}"`);
    }
  }
  if (options.gpu !== undefined && options.gpu < 1) {
    throw new UsageError(`--gpu: expected an integer ≥ 1 (leave the flag out for CPU), got ${options.gpu}`);
  }
}

function checkPrometheusUrl(url: string | undefined): void {
  if (url !== undefined && !HTTP_URL.test(url)) {
    throw new UsageError(`--prometheus-url: expected an http(s) URL such as ${DEFAULT_PROMETHEUS_URL}, got "${url}"`);
  }
}

/** The requests the pod asks for: the flags, else batchserve's defaults. */
export function requestedResources(options: { cpu?: string | undefined; memory?: string | undefined }): {
  cpu: string;
  memory: string;
} {
  return { cpu: options.cpu ?? DEFAULT_CPU, memory: options.memory ?? DEFAULT_MEMORY };
}
