/**
 * The parts of the Kubernetes API that batchserve's manifests use, typed as plain objects so
 * that the builders are checked by the compiler. Field names follow the API exactly; the
 * tests validate the objects against the real schemas.
 */

export interface ObjectMeta {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface HttpGetProbe {
  httpGet: { path: string; port: number };
  periodSeconds: number;
  timeoutSeconds: number;
  successThreshold: number;
  failureThreshold: number;
}

export interface ResourceRequirements {
  requests?: Record<string, string | number>;
  limits?: Record<string, string | number>;
}

export interface ContainerPort {
  name: string;
  containerPort: number;
  protocol: 'TCP';
}

export interface Lifecycle {
  preStop: { exec: { command: string[] } };
}

export interface SecurityContext {
  runAsNonRoot: true;
  runAsUser: number;
  runAsGroup: number;
  allowPrivilegeEscalation: false;
  privileged: false;
  readOnlyRootFilesystem: true;
  capabilities: { drop: ['ALL'] };
  seccompProfile: { type: 'RuntimeDefault' };
}

export interface VolumeMount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}

export type Volume =
  | { name: string; emptyDir: Record<string, never> }
  | { name: string; persistentVolumeClaim: { claimName: string; readOnly?: boolean } };

export interface EnvFromSource {
  secretRef: { name: string };
}

/** Pod-level: the group that owns the pod's volumes, so the non-root user can write to them. */
export interface PodSecurityContext {
  fsGroup: number;
  fsGroupChangePolicy: 'OnRootMismatch' | 'Always';
}

export interface Container {
  name: string;
  image: string;
  /** Replaces the image's entrypoint. */
  command?: string[];
  args: string[];
  envFrom?: EnvFromSource[];
  ports?: ContainerPort[];
  startupProbe?: HttpGetProbe;
  readinessProbe?: HttpGetProbe;
  livenessProbe?: HttpGetProbe;
  lifecycle?: Lifecycle;
  resources?: ResourceRequirements;
  securityContext?: SecurityContext;
  volumeMounts?: VolumeMount[];
}

/** A Kubernetes object: what the manifests render, one YAML document each. */
export interface KubernetesObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec: object;
}
