import {
  METRICS_PATH,
  PROBES,
  SCRATCH,
  SECURITY_CONTEXT,
  SERVER_PORTS,
  resources,
  serveArgs,
} from './batchserve-container.js';
import { requestedResources, type RuntimeOptions } from './deploy-options.js';
import type { Container, KubernetesObject } from './k8s-objects.js';

/** The runtime's name, which InferenceServices give as `runtime:`. */
export const RUNTIME_NAME = 'batchserve';
/** The model format of a batchserve archive; only this runtime claims it. */
export const MODEL_FORMAT = 'batchserve-mar';
/** KServe finds the serving container by this name, and merges the InferenceService's into it. */
export const KSERVE_CONTAINER = 'kserve-container';

/**
 * A ClusterServingRuntime for `batchserve serve`, REST and gRPC. It serves InferenceServices in
 * both deployment modes, so the container keeps to what Knative accepts: no lifecycle hook (the
 * Standard-mode InferenceService adds its own pre-stop sleep), and at most one port. It declares
 * none, as KServe's own runtimes do: KServe merges an InferenceService's ports into the
 * runtime's (by containerPort), so a port here plus a gRPC InferenceService's would be two.
 * Without one, Knative and KServe's Standard-mode Service both route to 8080, the inference
 * port; a grpc-v2 InferenceService names the gRPC port instead (inference-service.ts).
 */
export function buildClusterServingRuntime(options: RuntimeOptions): KubernetesObject {
  const container: Container = {
    name: KSERVE_CONTAINER,
    image: options.image,
    args: serveArgs('{{.Name}}'),
    resources: resources(requestedResources(options)),
    ...PROBES,
    securityContext: SECURITY_CONTEXT,
    volumeMounts: [...SCRATCH.volumeMounts],
  };
  return {
    apiVersion: 'serving.kserve.io/v1alpha1',
    kind: 'ClusterServingRuntime',
    metadata: { name: RUNTIME_NAME, labels: { 'app.kubernetes.io/name': 'batchserve' } },
    spec: {
      // KServe copies these onto each pod, and its metrics aggregation scrapes the server there.
      annotations: {
        'prometheus.kserve.io/port': String(SERVER_PORTS.metrics),
        'prometheus.kserve.io/path': METRICS_PATH,
      },
      supportedModelFormats: [
        { name: MODEL_FORMAT, version: '1', autoSelect: true, priority: 1 },
        // An archive holding an ONNX model, when an InferenceService names `runtime: batchserve`;
        // never chosen on its own, so Triton stays the default for bare ONNX models.
        { name: 'onnx', version: '1', autoSelect: false },
      ],
      // An InferenceService's protocolVersion must be one of these when it names the runtime.
      protocolVersions: ['v2', 'grpc-v2'],
      containers: [container],
      volumes: [...SCRATCH.volumes],
    },
  };
}
