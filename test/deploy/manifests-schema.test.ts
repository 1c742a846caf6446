import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { test } from 'node:test';
import type { K8sOptions, KServeOptions } from '../../src/deploy/deploy-options.js';
import type { KubernetesObject } from '../../src/deploy/k8s-objects.js';
import { k8sManifests, kserveManifests, kserveRuntimeManifests } from '../../src/deploy/manifests.js';
import { parseDocuments, schemaProblems } from './schemas.js';

const ROOT = new URL('../../../', import.meta.url);
const IMAGE = 'ghcr.io/batchserve/batchserve:0.1.0';

const KSERVE: KServeOptions = {
  name: 'resnet',
  storageUri: 's3://models/resnet.mar',
  deploymentMode: 'standard',
  minReplicas: 1,
  maxReplicas: 4,
  targetQueueDepth: 16,
  image: IMAGE,
};
const K8S: K8sOptions = {
  name: 'resnet',
  image: 'registry.example.com/resnet:1.0',
  autoscaler: 'keda',
  minReplicas: 1,
  maxReplicas: 4,
  targetQueueDepth: 16,
};

async function assertValid(label: string, objects: readonly unknown[]): Promise<void> {
  assert.ok(objects.length > 0, label);
  for (const object of objects) {
    assert.deepEqual(await schemaProblems(object), [], `${label}: ${(object as KubernetesObject).kind}`);
  }
}

test('every manifest in deploy/ is valid against the KServe, Kubernetes 1.30 and KEDA schemas', async () => {
  const files = (await readdir(new URL('deploy/', ROOT), { recursive: true })).filter((file) => file.endsWith('.yaml'));
  assert.ok(files.length >= 6, files.join(', '));
  const kinds = new Set<string>();
  for (const file of files) {
    const documents = parseDocuments(await readFile(new URL(`deploy/${file}`, ROOT), 'utf8'));
    await assertValid(`deploy/${file}`, documents);
    for (const document of documents) kinds.add((document as KubernetesObject).kind);
  }
  assert.deepEqual([...kinds].sort(), [
    'ClusterServingRuntime',
    'Deployment',
    'HorizontalPodAutoscaler',
    'InferenceService',
    'Job',
    'ScaledObject',
    'Service',
  ]);
});

test('generated manifests are valid for each combination of flags', async () => {
  const kserveCases: [string, KServeOptions, boolean][] = [
    ['standard', KSERVE, false],
    [
      'standard, namespace, GPU, resources, Prometheus, with the runtime',
      {
        ...KSERVE,
        namespace: 'ml',
        gpu: 2,
        cpu: '4',
        memory: '16Gi',
        prometheusUrl: 'https://prometheus.example.com',
      },
      true,
    ],
    ['standard, memory only', { ...KSERVE, memory: '8Gi' }, false],
    ['knative, scale to zero', { ...KSERVE, deploymentMode: 'knative', minReplicas: 0 }, false],
    ['standard, gRPC, with the runtime', { ...KSERVE, protocol: 'grpc-v2' }, true],
    ['knative, gRPC, GPU', { ...KSERVE, deploymentMode: 'knative', protocol: 'grpc-v2', gpu: 1 }, false],
    [
      'knative, GPU, namespace, with the runtime',
      { ...KSERVE, deploymentMode: 'knative', gpu: 1, namespace: 'ml' },
      true,
    ],
  ];
  for (const [label, options, withRuntime] of kserveCases) {
    await assertValid(`kserve ${label}`, kserveManifests(options, withRuntime));
  }
  const k8sCases: [string, K8sOptions][] = [
    ['keda', K8S],
    ['keda, namespace, Prometheus', { ...K8S, namespace: 'ml', prometheusUrl: 'http://prometheus.monitoring:9090' }],
    ['hpa, GPU, resources', { ...K8S, autoscaler: 'hpa', gpu: 1, cpu: '500m', memory: '4Gi' }],
    ['none, 3 replicas', { ...K8S, autoscaler: 'none', replicas: 3 }],
    ['none, default replicas', { ...K8S, autoscaler: 'none' }],
  ];
  for (const [label, options] of k8sCases) await assertValid(`k8s ${label}`, k8sManifests(options));
  await assertValid('runtime', kserveRuntimeManifests({ image: IMAGE }));
  await assertValid(
    'runtime, mirrored image, resources',
    kserveRuntimeManifests({ image: 'mirror.example.com:5000/batchserve/batchserve:0.1.0', cpu: '2', memory: '4Gi' }),
  );
});

/* eslint-disable @typescript-eslint/no-explicit-any -- breaking manifests on purpose */
type Breakage = [kind: string, break_: (object: any) => void, expected: RegExp];

test('the schemas refuse a misspelt key and a wrong type in every kind', async () => {
  type Three = [KubernetesObject, KubernetesObject, KubernetesObject];
  const [runtime, isvc] = kserveManifests(KSERVE, true) as [KubernetesObject, KubernetesObject];
  const [deployment, service, scaledObject] = k8sManifests(K8S) as Three;
  const [, , hpa] = k8sManifests({ ...K8S, autoscaler: 'hpa' }) as Three;
  const good: Record<string, KubernetesObject> = {
    ClusterServingRuntime: runtime,
    InferenceService: isvc,
    Deployment: deployment,
    Service: service,
    ScaledObject: scaledObject,
    HorizontalPodAutoscaler: hpa,
  };
  const breakages: Breakage[] = [
    [
      'ClusterServingRuntime',
      (o) => (o.spec.supportedModelFormats[0].autoselect = true),
      /^\/spec\/supportedModelFormats\/0: must NOT have additional properties \(autoselect\)$/,
    ],
    [
      'ClusterServingRuntime',
      (o) => (o.spec.protocolVersions = o.spec.protocolVersions.join(',')),
      /^\/spec\/protocolVersions: must be array$/,
    ],
    [
      'ClusterServingRuntime',
      (o) => (o.spec.annotations['prometheus.kserve.io/port'] = 8082),
      /^\/spec\/annotations\/prometheus\.kserve\.io~1port: must be string$/,
    ],
    [
      'InferenceService',
      (o) => (o.spec.predictor.model.storageURI = o.spec.predictor.model.storageUri),
      /^\/spec\/predictor\/model: must NOT have additional properties \(storageURI\)$/,
    ],
    [
      'InferenceService',
      (o) => (o.spec.predictor.model.ports = [{ name: 'grpc-port', containerPort: '8001', protocol: 'TCP' }]),
      /^\/spec\/predictor\/model\/ports\/0\/containerPort: must be integer$/,
    ],
    [
      'InferenceService',
      (o) => (o.spec.predictor.minReplicas = 'one'),
      /^\/spec\/predictor\/minReplicas: must be integer$/,
    ],
    [
      'InferenceService',
      (o) => (o.spec.predictor.autoScaling.metrics[0].type = 'Prometheus'),
      /^\/spec\/predictor\/autoScaling\/metrics\/0\/type: must be equal to one of the allowed values$/,
    ],
    [
      'InferenceService',
      (o) => (o.metadata.annotations.replicas = 3),
      /^\/metadata\/annotations\/replicas: must be string/,
    ],
    [
      'InferenceService',
      (o) => (o.apiVersion = 'serving.kserve.io/v1alpha1'),
      /^\/apiVersion: must be equal to constant$/,
    ],
    [
      'Deployment',
      (o) => (o.spec.template.spec.containers[0].readinesProbe = o.spec.template.spec.containers[0].readinessProbe),
      /^\/spec\/template\/spec\/containers\/0: must NOT have additional properties \(readinesProbe\)$/,
    ],
    [
      'Deployment',
      (o) => (o.spec.template.spec.terminationGracePeriodSeconds = '45'),
      /^\/spec\/template\/spec\/terminationGracePeriodSeconds: must be integer/,
    ],
    [
      'Service',
      (o) => (o.spec.selectors = o.spec.selector),
      /^\/spec: must NOT have additional properties \(selectors\)$/,
    ],
    ['Service', (o) => (o.spec.ports[0].port = 'http'), /^\/spec\/ports\/0\/port: must be integer$/],
    ['Service', (o) => (o.spec.ports[1].appProtocol = 2), /^\/spec\/ports\/1\/appProtocol: must be string/],
    [
      'ScaledObject',
      (o) => (o.spec.maxReplicas = o.spec.maxReplicaCount),
      /^\/spec: must NOT have additional properties \(maxReplicas\)$/,
    ],
    [
      'ScaledObject',
      (o) => (o.spec.triggers[0].metadata.threshold = 16),
      /^\/spec\/triggers\/0\/metadata\/threshold: must be string$/,
    ],
    [
      'ScaledObject',
      (o) => delete o.spec.triggers[0].metadata.query,
      /^\/spec\/triggers\/0\/metadata: must have required property 'query'$/,
    ],
    [
      'HorizontalPodAutoscaler',
      (o) => (o.spec.maxReplica = o.spec.maxReplicas),
      /^\/spec: must NOT have additional properties \(maxReplica\)$/,
    ],
    ['HorizontalPodAutoscaler', (o) => (o.spec.minReplicas = '1'), /^\/spec\/minReplicas: must be integer/],
  ];
  for (const [kind, break_, expected] of breakages) {
    const broken = structuredClone(good[kind]);
    break_(broken);
    const problems = await schemaProblems(broken);
    assert.ok(
      problems.some((problem) => expected.test(problem)),
      `${kind} ${String(break_)}: expected ${String(expected)} among ${JSON.stringify(problems)}`,
    );
  }
  assert.equal(new Set(breakages.map(([kind]) => kind)).size, Object.keys(good).length);
});
/* eslint-enable @typescript-eslint/no-explicit-any */
