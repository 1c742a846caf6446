/**
 * The manifests in deploy/, each with the `batchserve` arguments that write it. A test holds
 * every file to its command's output byte for byte; `npm run deploy:examples` rewrites them.
 */
export interface DeployExample {
  /** Relative to the repository root. */
  readonly file: string;
  readonly args: readonly string[];
}

const KSERVE = ['--name', 'resnet', '--namespace', 'default', '--storage-uri', 's3://models/resnet/resnet.mar'];
const SCALE = ['--min-replicas', '1', '--max-replicas', '8', '--target-queue-depth', '16'];
const K8S = ['--name', 'resnet', '--namespace', 'default', '--image', 'registry.example.com/resnet-batchserve:1.0'];
// The archive fetched as KServe would fetch it, the images read from one claim, the shards written to another.
const JOB = [
  '--name',
  'score-resnet',
  '--namespace',
  'default',
  '--archive',
  's3://models/resnet/resnet.mar',
  '--fetch-secret',
  's3-credentials',
  '--input',
  'pvc://datasets/images/2026-08',
  '--output',
  'pvc://results/resnet/2026-08/scores.jsonl',
  '--shards',
  '8',
  '--parallelism',
  '4',
];

export const DEPLOY_EXAMPLES: readonly DeployExample[] = [
  { file: 'deploy/kserve/cluster-serving-runtime.yaml', args: ['deploy', 'kserve-runtime'] },
  {
    file: 'deploy/kserve/inferenceservice-standard-keda.yaml',
    args: ['deploy', 'kserve', ...KSERVE, '--deployment-mode', 'standard', ...SCALE],
  },
  {
    file: 'deploy/kserve/inferenceservice-knative.yaml',
    args: ['deploy', 'kserve', ...KSERVE, '--deployment-mode', 'knative', ...SCALE],
  },
  {
    file: 'deploy/kserve/inferenceservice-knative-grpc.yaml',
    args: ['deploy', 'kserve', ...KSERVE, '--deployment-mode', 'knative', '--protocol', 'grpc-v2', ...SCALE],
  },
  { file: 'deploy/k8s/batchserve-keda.yaml', args: ['deploy', 'k8s', ...K8S, '--autoscaler', 'keda', ...SCALE] },
  { file: 'deploy/k8s/batchserve-hpa.yaml', args: ['deploy', 'k8s', ...K8S, '--autoscaler', 'hpa', ...SCALE] },
  { file: 'deploy/k8s/batch-predict-job.yaml', args: ['deploy', 'k8s-job', ...JOB] },
];
