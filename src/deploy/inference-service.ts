import {
  METRICS_PATH,
  PRE_STOP,
  SERVER_PORTS,
  TERMINATION_GRACE_PERIOD_SECONDS,
  gpuLimit,
} from './batchserve-container.js';
import { MODEL_FORMAT, RUNTIME_NAME } from './cluster-serving-runtime.js';
import { DEFAULT_PROMETHEUS_URL, type KServeOptions } from './deploy-options.js';
import { cudaTag } from './image-reference.js';
import type { ContainerPort, KubernetesObject, ResourceRequirements } from './k8s-objects.js';
import { pendingRowsQuery } from './pending-rows.js';

/**
 * An InferenceService served by the batchserve runtime.
 *
 * Standard mode: a Deployment that KEDA scales on the pods' pending rows, summed by
 * Prometheus; the pod gets a pre-stop sleep and a grace period longer than the drain, and
 * scrape annotations for its own metrics port.
 *
 * Knative mode: Knative's autoscaler scales on requests in flight per pod. Knative refuses a
 * lifecycle hook and a grace period of ours: its queue-proxy holds SIGTERM back until it has
 * drained (its own pre-stop), and the grace period is the revision timeout (300 s unless set).
 *
 * KServe routes one port per InferenceService: REST (v2) unless `protocol` is grpc-v2, which
 * routes gRPC to the server's gRPC port instead. The probes ask the REST port either way; a
 * probe may name a port other than the routed one by number, in Knative too.
 */
export function buildInferenceService(options: KServeOptions): KubernetesObject {
  const standard = options.deploymentMode === 'standard';
  const annotations: Record<string, string> = standard
    ? { 'serving.kserve.io/deploymentMode': 'Standard', 'serving.kserve.io/autoscalerClass': 'keda' }
    : {
        'serving.kserve.io/deploymentMode': 'Knative',
        'autoscaling.knative.dev/class': 'kpa.autoscaling.knative.dev',
        'autoscaling.knative.dev/metric': 'concurrency',
        'autoscaling.knative.dev/target': String(options.targetQueueDepth),
      };
  const overrides = resourceOverrides(options);
  const protocol = options.protocol ?? 'v2';
  const model = {
    modelFormat: { name: MODEL_FORMAT },
    runtime: RUNTIME_NAME,
    protocolVersion: protocol,
    storageUri: options.storageUri,
    ...(protocol === 'grpc-v2' ? { ports: [grpcPort(standard)] } : {}),
    // KServe puts this in place of the runtime image's tag: the CUDA build of the same release.
    ...(options.gpu === undefined ? {} : { runtimeVersion: cudaTag(options.image, '--image') }),
    ...(overrides === undefined ? {} : { resources: overrides }),
    ...(standard ? { lifecycle: PRE_STOP } : {}),
  };
  return {
    apiVersion: 'serving.kserve.io/v1beta1',
    kind: 'InferenceService',
    metadata: {
      name: options.name,
      ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
      annotations,
    },
    spec: {
      predictor: {
        minReplicas: options.minReplicas,
        maxReplicas: options.maxReplicas,
        ...(standard ? standardPredictor(options) : {}),
        model,
      },
    },
  };
}

/**
 * The one port KServe routes a grpc-v2 InferenceService to (the runtime declares none), named
 * as KServe documents for each mode: Knative takes HTTP/2 only on a port named `h2c`; in
 * Standard mode Istio reads the protocol from the name's prefix, and KServe gives the
 * Service's port `appProtocol: kubernetes.io/h2c` for a name holding `grpc`.
 */
function grpcPort(standard: boolean): ContainerPort {
  return { name: standard ? 'grpc-port' : 'h2c', containerPort: SERVER_PORTS.grpc, protocol: 'TCP' };
}

function standardPredictor(options: KServeOptions): object {
  return {
    terminationGracePeriodSeconds: TERMINATION_GRACE_PERIOD_SECONDS,
    // KServe would point prometheus.io/* at its own aggregation port, which Standard mode lacks.
    annotations: {
      'serving.kserve.io/enable-prometheus-scraping': 'false',
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': String(SERVER_PORTS.metrics),
      'prometheus.io/path': METRICS_PATH,
    },
    autoScaling: {
      metrics: [
        {
          type: 'External',
          external: {
            metric: {
              backend: 'prometheus',
              serverAddress: options.prometheusUrl ?? DEFAULT_PROMETHEUS_URL,
              query: pendingRowsQuery(options.name, options.namespace),
            },
            // KServe hands this to KEDA as the threshold of an AverageValue metric: ceil(sum / value).
            target: { type: 'Value', value: options.targetQueueDepth },
          },
        },
      ],
    },
  };
}

/** What the flags change in the runtime's resources; KServe merges it into the runtime's container. */
function resourceOverrides(options: KServeOptions): ResourceRequirements | undefined {
  const requests = {
    ...(options.cpu === undefined ? {} : { cpu: options.cpu }),
    ...(options.memory === undefined ? {} : { memory: options.memory }),
  };
  const limits = { ...(options.memory === undefined ? {} : { memory: options.memory }), ...gpuLimit(options.gpu) };
  if (Object.keys(requests).length === 0 && Object.keys(limits).length === 0) return undefined;
  return {
    ...(Object.keys(requests).length === 0 ? {} : { requests }),
    ...(Object.keys(limits).length === 0 ? {} : { limits }),
  };
}
