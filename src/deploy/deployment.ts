import {
  METRICS_PATH,
  PRE_STOP,
  PROBES,
  SCRATCH,
  SECURITY_CONTEXT,
  SERVER_PORTS,
  TERMINATION_GRACE_PERIOD_SECONDS,
  resources,
  serveArgs,
} from './batchserve-container.js';
import { requestedResources, type K8sOptions } from './deploy-options.js';
import { cudaImage } from './image-reference.js';
import type { Container, KubernetesObject } from './k8s-objects.js';

/** The labels that tie the Deployment's pods to its Service. */
export function selectorLabels(name: string): Record<string, string> {
  return { 'app.kubernetes.io/name': 'batchserve', 'app.kubernetes.io/instance': name };
}

/**
 * A Deployment of `batchserve serve` whose image carries the model archives in /mnt/models.
 * With an autoscaler the replica count is left out, so that applying the manifest again does
 * not undo the autoscaler's choice.
 */
export function buildDeployment(options: K8sOptions): KubernetesObject {
  const container: Container = {
    name: 'batchserve',
    image: options.gpu === undefined ? options.image : cudaImage(options.image, '--image'),
    args: serveArgs(options.name),
    ports: [
      { name: 'http', containerPort: SERVER_PORTS.inference, protocol: 'TCP' },
      { name: 'grpc', containerPort: SERVER_PORTS.grpc, protocol: 'TCP' },
      { name: 'management', containerPort: SERVER_PORTS.management, protocol: 'TCP' },
      { name: 'metrics', containerPort: SERVER_PORTS.metrics, protocol: 'TCP' },
    ],
    resources: resources({ ...requestedResources(options), gpu: options.gpu }),
    ...PROBES,
    lifecycle: PRE_STOP,
    securityContext: SECURITY_CONTEXT,
    volumeMounts: [...SCRATCH.volumeMounts],
  };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: {
      name: options.name,
      ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
      labels: selectorLabels(options.name),
    },
    spec: {
      ...(options.autoscaler === 'none' ? { replicas: options.replicas ?? 1 } : {}),
      selector: { matchLabels: selectorLabels(options.name) },
      template: {
        metadata: {
          labels: selectorLabels(options.name),
          annotations: {
            'prometheus.io/scrape': 'true',
            'prometheus.io/port': String(SERVER_PORTS.metrics),
            'prometheus.io/path': METRICS_PATH,
          },
        },
        spec: {
          // The server never calls the Kubernetes API.
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: TERMINATION_GRACE_PERIOD_SECONDS,
          containers: [container],
          volumes: [...SCRATCH.volumes],
        },
      },
    },
  };
}
