import { DEFAULT_PROMETHEUS_URL, type K8sOptions } from './deploy-options.js';
import type { KubernetesObject } from './k8s-objects.js';
import { pendingRowsQuery } from './pending-rows.js';

/**
 * A KEDA ScaledObject on the Deployment: KEDA asks Prometheus for the model's pending rows
 * summed over its pods, and, the metric being an AverageValue, the HPA it drives keeps
 * ceil(sum / target) replicas.
 */
export function buildScaledObject(options: K8sOptions): KubernetesObject {
  return {
    apiVersion: 'keda.sh/v1alpha1',
    kind: 'ScaledObject',
    metadata: {
      name: options.name,
      ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
    },
    spec: {
      scaleTargetRef: { name: options.name },
      minReplicaCount: options.minReplicas,
      maxReplicaCount: options.maxReplicas,
      triggers: [
        {
          type: 'prometheus',
          name: 'pending-rows',
          metricType: 'AverageValue',
          metadata: {
            serverAddress: options.prometheusUrl ?? DEFAULT_PROMETHEUS_URL,
            query: pendingRowsQuery(options.name, options.namespace),
            // KEDA's trigger metadata is a map of strings.
            threshold: String(options.targetQueueDepth),
          },
        },
      ],
    },
  };
}
