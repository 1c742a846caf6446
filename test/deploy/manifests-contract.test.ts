import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseDuration } from '../../src/config/schema-kit.js';
import type { KServeProtocol } from '../../src/deploy/deploy-options.js';
import type { Container, ContainerPort, KubernetesObject } from '../../src/deploy/k8s-objects.js';
import { k8sManifests, kserveManifests } from '../../src/deploy/manifests.js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { call, packAffine, scrapeMetrics, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { samplesOf } from '../metrics/prometheus-text.js';

/**
 * What the schemas cannot say: the names KServe looks for, Knative's rules for the user
 * container, a grace period that outlasts the drain, and that the probe, metrics and PromQL
 * name routes and series the real server has.
 */

// The container contract agreed with `batchserve serve` (README, "Running on Kubernetes and KServe").
const CONTRACT_ARGS =
  'serve --host 0.0.0.0 --port 8080 --management-port 8081 --metrics-port 8082 --grpc-port 8001 --model-store /mnt/models ' +
  '--models all --model-name {{.Name}} --work-dir /tmp/batchserve --key-file /tmp/batchserve.key --drain-timeout 30s';
/** Knative's queue-proxy and its profiling port share the pod's network namespace. */
const KNATIVE_RESERVED_PORTS = [8012, 8013, 8022, 9090, 9091, 8008];

const IMAGE = 'ghcr.io/batchserve/batchserve:0.1.0';
const kserve = (mode: 'standard' | 'knative', name = 'resnet', protocol: KServeProtocol = 'v2') =>
  kserveManifests(
    {
      name,
      namespace: 'ml',
      storageUri: 's3://models/resnet.mar',
      deploymentMode: mode,
      protocol,
      minReplicas: 1,
      maxReplicas: 4,
      targetQueueDepth: 16,
      image: IMAGE,
    },
    true,
  ) as [KubernetesObject, KubernetesObject];
const k8s = (autoscaler: 'keda' | 'hpa', name = 'resnet') =>
  k8sManifests({
    name,
    namespace: 'ml',
    image: 'registry.example.com/resnet:1.0',
    autoscaler,
    minReplicas: 1,
    maxReplicas: 4,
    targetQueueDepth: 16,
  }) as [KubernetesObject, KubernetesObject, KubernetesObject];

/* eslint-disable @typescript-eslint/no-explicit-any -- manifests are read as the YAML a cluster would get */
const runtimeContainers = (runtime: KubernetesObject): Container[] => (runtime.spec as any).containers;
const predictorOf = (isvc: KubernetesObject): any => (isvc.spec as any).predictor;
const podSpecOf = (deployment: KubernetesObject): any => (deployment.spec as any).template.spec;
const podAnnotationsOf = (deployment: KubernetesObject): any => (deployment.spec as any).template.metadata.annotations;
const specOf = (object: KubernetesObject): any => object.spec;
/* eslint-enable @typescript-eslint/no-explicit-any */

/**
 * The pod's container as KServe makes it: the InferenceService's model merged into the
 * runtime's kserve-container by strategic merge patch, where fields replace and `ports` merge
 * by containerPort, order aside (kserve/kserve pkg/utils/container_merge.go).
 */
function mergeIntoRuntime(runtimeContainer: Container, model: Partial<Container>): Container {
  const ports = new Map<number, ContainerPort>();
  for (const port of [...(runtimeContainer.ports ?? []), ...(model.ports ?? [])]) {
    ports.set(port.containerPort, { ...ports.get(port.containerPort), ...port });
  }
  return { ...runtimeContainer, ...model, ...(ports.size === 0 ? {} : { ports: [...ports.values()] }) };
}

function flagValue(args: readonly string[], flag: string): string {
  const index = args.indexOf(flag);
  assert.ok(index > 0 && index + 1 < args.length, `${flag} in ${args.join(' ')}`);
  return args[index + 1] as string;
}

function drainSeconds(args: readonly string[]): number {
  const micros = parseDuration(flagValue(args, '--drain-timeout'));
  assert.ok(micros !== undefined && micros > 0);
  return micros / 1_000_000;
}

function preStopSeconds(container: Pick<Container, 'lifecycle'>): number {
  const command = container.lifecycle?.preStop.exec.command ?? [];
  assert.equal(command[0], 'sleep');
  return Number(command[1]);
}

/** Knative's checks on a revision's containers (knative/serving pkg/apis/serving/k8s_validation.go). */
function knativeProblems(containers: readonly Partial<Container>[], podSpec: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const ports = containers.flatMap((container) => container.ports ?? []);
  if (ports.length > 1) problems.push(`${ports.length} container ports; Knative allows one`);
  if (ports.length === 0 && containers.length > 1) problems.push('no container port among several containers');
  const port = ports[0] ?? { name: '', containerPort: 8080, protocol: 'TCP' };
  if (!['', 'http1', 'h2c'].includes(port.name)) problems.push(`port name "${port.name}"`);
  if (port.protocol !== 'TCP') problems.push(`protocol ${String(port.protocol)}`);
  for (const container of containers) {
    const args = container.args ?? [];
    for (const flag of ['--port', '--management-port', '--metrics-port', '--grpc-port']) {
      const bound = args.includes(flag) ? Number(flagValue(args, flag)) : undefined;
      if (bound !== undefined && KNATIVE_RESERVED_PORTS.includes(bound)) problems.push(`${flag} ${bound} is reserved`);
    }
    if (KNATIVE_RESERVED_PORTS.includes(port.containerPort)) problems.push(`port ${port.containerPort} is reserved`);
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      const probePort: unknown = probe?.httpGet.port;
      if (typeof probePort === 'string' && probePort !== (port.name || 'http')) {
        problems.push(`probe port ${probePort} is not the container port`);
      }
    }
    if (container.lifecycle !== undefined) problems.push('lifecycle is not allowed');
  }
  if (podSpec.terminationGracePeriodSeconds !== undefined)
    problems.push('terminationGracePeriodSeconds is not allowed');
  return problems;
}

test('the runtime is batchserve: kserve-container, its own format, nothing that makes KServe take it for another server', () => {
  const [runtime] = kserve('standard');
  assert.equal(runtime.kind, 'ClusterServingRuntime');
  assert.equal(runtime.metadata.name, 'batchserve');
  const containers = runtimeContainers(runtime);
  assert.deepEqual(
    containers.map((container) => container.name),
    ['kserve-container'],
  );
  assert.equal(containers[0]?.args.join(' '), CONTRACT_ARGS);
  // KServe derives a server type (and image tag rewrites) from this annotation or a built-in runtime's name.
  const annotations = { ...runtime.metadata.annotations, ...(runtime.spec as { annotations: object }).annotations };
  assert.ok(!Object.keys(annotations).some((key) => key === 'serving.kserve.io/server-type'));
  assert.ok(!/triton|torchserve|mlserver|tensorflow|huggingface|vllm/.test(runtime.metadata.name));
  const formats = (runtime.spec as { supportedModelFormats: { name: string; autoSelect?: boolean }[] })
    .supportedModelFormats;
  assert.deepEqual(
    formats.filter((format) => format.autoSelect === true).map((format) => format.name),
    ['batchserve-mar'],
  );
  assert.deepEqual((runtime.spec as { protocolVersions: string[] }).protocolVersions, ['v2', 'grpc-v2']);
});

test('the InferenceServices name the runtime, its format and protocol (v2, or grpc-v2 with its port), and the deployment mode', () => {
  for (const [mode, annotation] of [
    ['standard', 'Standard'],
    ['knative', 'Knative'],
  ] as const) {
    const [, isvc] = kserve(mode);
    assert.equal(isvc.metadata.annotations?.['serving.kserve.io/deploymentMode'], annotation);
    const model = predictorOf(isvc).model;
    assert.equal(model.runtime, 'batchserve');
    assert.equal(model.modelFormat.name, 'batchserve-mar');
    assert.equal(model.protocolVersion, 'v2');
    // REST: KServe routes to the runtime's default, 8080.
    assert.equal(model.ports, undefined);
  }
  // gRPC: one port, the server's gRPC port, named as KServe documents for the mode.
  for (const [mode, name] of [
    ['standard', 'grpc-port'],
    ['knative', 'h2c'],
  ] as const) {
    const [runtime, isvc] = kserve(mode, 'resnet', 'grpc-v2');
    const model = predictorOf(isvc).model;
    assert.equal(model.protocolVersion, 'grpc-v2');
    assert.ok((runtime.spec as { protocolVersions: string[] }).protocolVersions.includes(model.protocolVersion));
    const grpcPort = Number(flagValue(runtimeContainers(runtime)[0]?.args ?? [], '--grpc-port'));
    assert.deepEqual(model.ports, [{ name, containerPort: grpcPort, protocol: 'TCP' }]);
  }
  const [, standard] = kserve('standard');
  assert.equal(standard.metadata.annotations?.['serving.kserve.io/autoscalerClass'], 'keda');
  const [, knative] = kserve('knative');
  assert.equal(knative.metadata.annotations?.['autoscaling.knative.dev/metric'], 'concurrency');
  assert.equal(knative.metadata.annotations?.['autoscaling.knative.dev/target'], '16');
});

test("Knative's rules hold for the runtime's container and the Knative InferenceServices, REST and gRPC", () => {
  const [runtime, isvc] = kserve('knative');
  const predictor = predictorOf(isvc);
  const runtimeContainer = runtimeContainers(runtime)[0] as Container;
  // KServe merges the InferenceService's model container into kserve-container, and its pod fields into the pod.
  const merged = mergeIntoRuntime(runtimeContainer, predictor.model);
  assert.deepEqual(knativeProblems([merged], predictor), []);
  assert.deepEqual(knativeProblems(runtimeContainers(runtime), {}), []);
  // gRPC: the one port is the server's gRPC port, named h2c; the probes still ask REST, by number.
  const grpcPredictor = predictorOf(kserve('knative', 'resnet', 'grpc-v2')[1]);
  const grpcMerged = mergeIntoRuntime(runtimeContainer, grpcPredictor.model);
  assert.deepEqual(knativeProblems([grpcMerged], grpcPredictor), []);
  assert.deepEqual(grpcMerged.ports, [
    { name: 'h2c', containerPort: Number(flagValue(merged.args, '--grpc-port')), protocol: 'TCP' },
  ]);
  assert.equal(grpcMerged.readinessProbe?.httpGet.port, Number(flagValue(merged.args, '--port')));
  // Why the runtime declares no port: KServe would add the InferenceService's to it.
  const declaring = { ...runtimeContainer, ports: [{ name: 'http1', containerPort: 8080, protocol: 'TCP' as const }] };
  assert.deepEqual(knativeProblems([mergeIntoRuntime(declaring, grpcPredictor.model)], grpcPredictor), [
    '2 container ports; Knative allows one',
  ]);
  // The checker itself finds what Knative refuses.
  const [standardRuntime, standardIsvc] = kserve('standard');
  const standardPredictor = predictorOf(standardIsvc);
  const standardMerged = mergeIntoRuntime(runtimeContainers(standardRuntime)[0] as Container, standardPredictor.model);
  assert.deepEqual(knativeProblems([standardMerged], standardPredictor), [
    'lifecycle is not allowed',
    'terminationGracePeriodSeconds is not allowed',
  ]);
  const deployment = k8s('keda')[0];
  assert.deepEqual(knativeProblems(podSpecOf(deployment).containers, {}), [
    '4 container ports; Knative allows one',
    'port name "http"',
    'lifecycle is not allowed',
  ]);
  const reserved = { ...merged, ports: [{ name: 'metrics', containerPort: 9090, protocol: 'TCP' as const }] };
  assert.deepEqual(knativeProblems([reserved], {}), ['port name "metrics"', 'port 9090 is reserved']);
});

test('the grace period outlasts the pre-stop sleep and the drain timeout in the arguments', () => {
  const [runtime, isvc] = kserve('standard');
  const predictor = predictorOf(isvc);
  const args = runtimeContainers(runtime)[0]?.args ?? [];
  assert.equal(drainSeconds(args), 30);
  assert.ok(predictor.terminationGracePeriodSeconds > preStopSeconds(predictor.model) + drainSeconds(args));
  for (const autoscaler of ['keda', 'hpa'] as const) {
    const podSpec = podSpecOf(k8s(autoscaler)[0]);
    const container = podSpec.containers[0] as Container;
    assert.ok(podSpec.terminationGracePeriodSeconds > preStopSeconds(container) + drainSeconds(container.args));
  }
});

test('probes, metrics, the gRPC port and the autoscaling query name what the real server answers', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(join(dir, 'archive'));
  const [runtime, isvc] = kserve('standard', 'resnet');
  const [deployment, , scaledObject] = k8s('keda', 'resnet');
  const hpa = k8s('hpa', 'resnet')[2];
  const args = runtimeContainers(runtime)[0]?.args ?? [];
  assert.deepEqual(podSpecOf(deployment).containers[0].args, [
    ...args.slice(0, args.indexOf('{{.Name}}')),
    'resnet',
    ...args.slice(args.indexOf('{{.Name}}') + 1),
  ]);

  // The manifest's own arguments, as the config keys their flags set, with the model name
  // KServe fills in; only the addresses and paths are this test's.
  const config: Record<string, unknown> = {};
  for (let index = 1; index < args.length; index += 2) {
    const key = (args[index] as string).replace(/^--/, '').replaceAll('-', '_');
    config[key] = args[index + 1] === '{{.Name}}' ? 'resnet' : args[index + 1];
  }
  assert.equal(config.key_file, '/tmp/batchserve.key');
  delete config.key_file;
  const server = await startTestServer(t, {
    ...config,
    models: [config.models],
    host: '127.0.0.1',
    port: 0,
    management_port: 0,
    metrics_port: 0,
    grpc_port: 0,
    model_store: archive,
    work_dir: join(dir, 'work'),
  });
  const urlOf = (port: number): string => {
    const byPort: Record<string, string> = {
      [flagValue(args, '--port')]: server.urls.inference,
      [flagValue(args, '--management-port')]: server.urls.management,
      [flagValue(args, '--metrics-port')]: server.urls.metrics,
      [flagValue(args, '--grpc-port')]: server.urls.grpc,
    };
    const url = byPort[String(port)];
    assert.ok(url, `port ${port} is none of the server's`);
    return url;
  };

  for (const container of [runtimeContainers(runtime)[0], podSpecOf(deployment).containers[0]] as Container[]) {
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      assert.ok(probe);
      const answer = await call(`${urlOf(probe.httpGet.port)}${probe.httpGet.path}`);
      assert.equal(answer.status, 200, `${container.name} ${probe.httpGet.path}`);
    }
  }
  // Every gRPC port the manifests route to: the grpc-v2 InferenceServices', the Deployment's
  // (which the Service's targetPort names), answered by Triton's service.
  const deploymentPorts: ContainerPort[] = podSpecOf(deployment).containers[0].ports;
  const servicePort = specOf(k8s('keda', 'resnet')[1]).ports.find((port: { name: string }) => port.name === 'grpc');
  const grpcPorts = [
    ...(['standard', 'knative'] as const).map(
      (mode) => predictorOf(kserve(mode, 'resnet', 'grpc-v2')[1]).model.ports[0],
    ),
    deploymentPorts.find((port) => port.name === servicePort.targetPort),
  ].map((port: ContainerPort | undefined) => port?.containerPort ?? 0);
  assert.equal(servicePort.appProtocol, 'kubernetes.io/h2c');
  for (const port of grpcPorts) {
    const client = new InferenceClient(urlOf(port));
    t.after(() => client.close());
    const answer = await client.call('ModelReady', { name: 'resnet' });
    assert.equal(answer.error, undefined, `port ${port}`);
    assert.equal(answer.response.ready, true);
  }

  const runtimeAnnotations = (runtime.spec as { annotations: Record<string, string> }).annotations;
  const scrapeTargets = [
    [runtimeAnnotations['prometheus.kserve.io/port'], runtimeAnnotations['prometheus.kserve.io/path']],
    [predictorOf(isvc).annotations['prometheus.io/port'], predictorOf(isvc).annotations['prometheus.io/path']],
    [podAnnotationsOf(deployment)['prometheus.io/port'], podAnnotationsOf(deployment)['prometheus.io/path']],
  ];
  for (const [port, path] of scrapeTargets) {
    const answer = await call(`${urlOf(Number(port))}${path as string}`);
    assert.equal(answer.status, 200);
    assert.match(String(answer.headers['content-type']), /^text\/plain/);
  }

  // The series exists from the model's load, before any request: a fresh pod's sum reads 0.
  const families = await scrapeMetrics(server);
  const queries = [
    predictorOf(isvc).autoScaling.metrics[0].external.metric.query as string,
    specOf(scaledObject).triggers[0].metadata.query as string,
  ];
  for (const query of queries) {
    const match = /^sum\(([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\}\)$/.exec(query);
    assert.ok(match, query);
    const labels: Record<string, string> = Object.fromEntries(
      [...(match[2] as string).matchAll(/(\w+)="([^"]*)"/g)].map(([, key, value]) => [key, value]),
    );
    assert.deepEqual(labels, { namespace: 'ml', model: 'resnet' });
    // Prometheus adds `namespace` when it scrapes the pod; the server's own labels must match the rest.
    const ownLabels = Object.fromEntries(Object.entries(labels).filter(([key]) => key !== 'namespace'));
    const samples = samplesOf(families, match[1] as string, ownLabels);
    assert.equal(families.get(match[1] as string)?.type, 'gauge', `${match[1]} in /metrics`);
    assert.ok(samples.length > 0, `${query}: no sample in /metrics`);
  }
  const external = specOf(hpa).metrics[0].external.metric;
  assert.ok(samplesOf(families, external.name, external.selector.matchLabels).length > 0);
});
