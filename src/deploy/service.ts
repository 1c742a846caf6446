import { SERVER_PORTS } from './batchserve-container.js';
import type { K8sOptions } from './deploy-options.js';
import { selectorLabels } from './deployment.js';
import type { KubernetesObject } from './k8s-objects.js';

/**
 * The inference API inside the cluster. The management API stays off the Service: each pod
 * generates its own token, so it is reached per pod (`kubectl port-forward`), and the metrics
 * port is scraped per pod too.
 */
export function buildService(options: Pick<K8sOptions, 'name' | 'namespace'>): KubernetesObject {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: options.name,
      ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
      labels: selectorLabels(options.name),
    },
    spec: {
      type: 'ClusterIP',
      selector: selectorLabels(options.name),
      ports: [{ name: 'http', port: SERVER_PORTS.inference, targetPort: 'http', protocol: 'TCP' }],
    },
  };
}
