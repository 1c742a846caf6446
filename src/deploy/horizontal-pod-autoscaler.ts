import type { K8sOptions } from './deploy-options.js';
import type { KubernetesObject } from './k8s-objects.js';
import { PENDING_ROWS_METRIC } from './pending-rows.js';

/**
 * The alternative without KEDA: an autoscaling/v2 HPA on the external metric
 * `batchserve_pending_rows{model="…"}`, which a metrics adapter (prometheus-adapter with an
 * external rule summing the series in the HPA's namespace) serves. AverageValue divides the
 * sum by the replica count, so the HPA keeps ceil(sum / target) replicas.
 */
export function buildHorizontalPodAutoscaler(options: K8sOptions): KubernetesObject {
  return {
    apiVersion: 'autoscaling/v2',
    kind: 'HorizontalPodAutoscaler',
    metadata: {
      name: options.name,
      ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
    },
    spec: {
      scaleTargetRef: { apiVersion: 'apps/v1', kind: 'Deployment', name: options.name },
      minReplicas: options.minReplicas,
      maxReplicas: options.maxReplicas,
      metrics: [
        {
          type: 'External',
          external: {
            metric: { name: PENDING_ROWS_METRIC, selector: { matchLabels: { model: options.name } } },
            target: { type: 'AverageValue', averageValue: String(options.targetQueueDepth) },
          },
        },
      ],
    },
  };
}
