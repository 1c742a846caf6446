import { SERVER_PORTS } from './batchserve-container.js';
import type { K8sOptions } from './deploy-options.js';
import { selectorLabels } from './deployment.js';
import type { KubernetesObject } from './k8s-objects.js';

/**
 * The inference APIs inside the cluster, REST and gRPC. The management API stays off the
 * Service: each pod generates its own token, so it is reached per pod (`kubectl port-forward`),
 * and the metrics port is scraped per pod too.
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
      ports: [
        { name: 'http', port: SERVER_PORTS.inference, targetPort: 'http', protocol: 'TCP' },
        // gRPC is HTTP/2 in the clear: Kubernetes' standard appProtocol for it, which gateways
        // and meshes read (KServe's Services say the same); Istio also reads the name's prefix.
        {
          name: 'grpc',
          port: SERVER_PORTS.grpc,
          targetPort: 'grpc',
          protocol: 'TCP',
          appProtocol: 'kubernetes.io/h2c',
        },
      ],
    },
  };
}
