import { Document } from 'yaml';
import { buildClusterServingRuntime } from './cluster-serving-runtime.js';
import {
  checkK8sOptions,
  checkKServeOptions,
  checkRuntimeOptions,
  type K8sOptions,
  type KServeOptions,
  type RuntimeOptions,
} from './deploy-options.js';
import { buildDeployment } from './deployment.js';
import { buildHorizontalPodAutoscaler } from './horizontal-pod-autoscaler.js';
import { buildInferenceService } from './inference-service.js';
import type { KubernetesObject } from './k8s-objects.js';
import { buildScaledObject } from './scaled-object.js';
import { buildService } from './service.js';

/** The ClusterServingRuntime alone: what `kubectl apply` installs once per cluster. */
export function kserveRuntimeManifests(options: RuntimeOptions): KubernetesObject[] {
  checkRuntimeOptions(options);
  return [buildClusterServingRuntime(options)];
}

/** The InferenceService, after the runtime it needs when `withRuntime`. */
export function kserveManifests(options: KServeOptions, withRuntime: boolean): KubernetesObject[] {
  checkKServeOptions(options);
  return [
    ...(withRuntime ? [buildClusterServingRuntime({ image: options.image })] : []),
    buildInferenceService(options),
  ];
}

/** Deployment, Service, and the autoscaler that scales the Deployment on pending rows. */
export function k8sManifests(options: K8sOptions): KubernetesObject[] {
  checkK8sOptions(options);
  const autoscaler =
    options.autoscaler === 'keda'
      ? [buildScaledObject(options)]
      : options.autoscaler === 'hpa'
        ? [buildHorizontalPodAutoscaler(options)]
        : [];
  return [buildDeployment(options), buildService(options), ...autoscaler];
}

/**
 * Multi-document YAML, the header as a comment on top. Plain scalars where YAML allows,
 * single quotes otherwise and no folding, which is also how prettier writes it, so the
 * files in deploy/ pass the format check as generated.
 */
export function renderManifests(objects: readonly KubernetesObject[], header: readonly string[]): string {
  return objects
    .map((object, index) => {
      const document = new Document(object);
      if (index === 0 && header.length > 0) document.commentBefore = header.map((line) => ` ${line}`).join('\n');
      return document.toString({ lineWidth: 0, singleQuote: true });
    })
    .join('---\n');
}
