import { Option, type Command } from 'commander';
import type { DeployJobFlags, DeployK8sFlags, DeployKServeFlags, DeployRuntimeFlags } from './deploy.js';

/**
 * Flags only: `batchserve deploy kserve | kserve-runtime | k8s | k8s-job` write manifests as
 * YAML. The defaults that need the library (images, Prometheus URL) are applied there; the help
 * names them.
 */
export function registerDeploy(program: Command): void {
  const deploy = program
    .command('deploy')
    .description('write Kubernetes and KServe manifests that run batchserve, as YAML on stdout or --output');

  withResources(
    deploy
      .command('kserve')
      .description('a KServe InferenceService on the batchserve runtime: Standard mode scaled by KEDA, or Knative')
      .requiredOption(
        '--name <name>',
        'the InferenceService, and the name its model is served under (a DNS-1035 label)',
      )
      .requiredOption(
        '--storage-uri <uri>',
        'the archive (s3://, gs://, pvc://, https://, …); KServe puts it in /mnt/models',
      )
      .option('--namespace <namespace>', 'the namespace; also narrows the autoscaling query to it')
      .addOption(
        new Option(
          '--deployment-mode <mode>',
          'Standard (a Deployment, scaled by KEDA) or Knative (scaled on concurrency)',
        )
          .choices(['standard', 'knative'])
          .default('standard'),
      )
      .addOption(
        new Option(
          '--protocol <protocol>',
          'what KServe routes to, one per InferenceService: v2 (REST on 8080) or grpc-v2 (gRPC on 8001)',
        )
          .choices(['v2', 'grpc-v2'])
          .default('v2'),
      )
      .option('--min-replicas <count>', 'fewest replicas (0 allowed with knative)', '1')
      .option('--max-replicas <count>', 'most replicas', '4')
      .option(
        '--target-queue-depth <rows>',
        'pending rows one replica should hold (standard) or requests in flight per replica (knative); measure it with bench',
        '16',
      )
      .option(
        '--prometheus-url <url>',
        'the Prometheus KEDA queries (standard; default http://prometheus-operated.monitoring.svc:9090)',
      )
      .option('--image <image>', "the runtime's image (default ghcr.io/batchserve/batchserve:VERSION)")
      .option('--runtime', 'also write the ClusterServingRuntime, before the InferenceService', false),
  ).action(async (flags: DeployKServeFlags, command: Command) => {
    const { runDeployKServe } = await import('./deploy.js');
    await runDeployKServe(flags, command);
  });

  withResources(
    deploy
      .command('kserve-runtime')
      .description('the ClusterServingRuntime "batchserve" alone, as deploy/kserve/cluster-serving-runtime.yaml')
      .option('--image <image>', 'the image (default ghcr.io/batchserve/batchserve:VERSION)'),
    { gpu: false },
  ).action(async (flags: DeployRuntimeFlags, command: Command) => {
    const { runDeployRuntime } = await import('./deploy.js');
    await runDeployRuntime(flags, command);
  });

  withResources(
    deploy
      .command('k8s')
      .description('a Deployment and Service of batchserve, scaled on pending rows by KEDA or an HPA')
      .requiredOption('--name <name>', 'the Deployment and Service, and the name the model is served under')
      .requiredOption('--image <image>', "an image built FROM batchserve's with the archives in /mnt/models")
      .option('--namespace <namespace>', 'the namespace; also narrows the autoscaling query to it')
      .addOption(
        new Option('--autoscaler <kind>', 'KEDA ScaledObject, autoscaling/v2 HPA on an external metric, or none')
          .choices(['keda', 'hpa', 'none'])
          .default('keda'),
      )
      .option('--replicas <count>', 'a fixed replica count (--autoscaler none; default 1)')
      .option('--min-replicas <count>', 'fewest replicas', '1')
      .option('--max-replicas <count>', 'most replicas', '4')
      .option('--target-queue-depth <rows>', 'pending rows one replica should hold; measure it with bench', '16')
      .option(
        '--prometheus-url <url>',
        'the Prometheus KEDA queries (keda; default http://prometheus-operated.monitoring.svc:9090)',
      ),
  ).action(async (flags: DeployK8sFlags, command: Command) => {
    const { runDeployK8s } = await import('./deploy.js');
    await runDeployK8s(flags, command);
  });

  withResources(
    deploy
      .command('k8s-job')
      .description(
        'an Indexed Job that scores a dataset with predict --shard, one shard per pod, for predict merge to join',
      )
      .requiredOption('--name <name>', 'the Job (a DNS-1123 label); its pods are <name>-<index>')
      .requiredOption(
        '--archive <uri>',
        'the model archive: pvc://CLAIM/PATH (mounted), or s3://, gs://, https:// (fetched by an init container)',
      )
      .requiredOption('--input <uri>', 'the dataset, as --archive; a folder (of images) ends with /')
      .requiredOption(
        '--output <uri>',
        'pvc://CLAIM/PATH/out.jsonl: the shards go beside it, out.shard-I-of-N.jsonl (a claim, since they outlive the pods)',
      )
      .requiredOption('--shards <count>', 'N, the slices of the input: one pod each (1 to 10000)')
      .option('--parallelism <count>', 'pods running at once (default: --shards)')
      .option('--namespace <namespace>', 'the namespace, where the claims and secrets are')
      .option('--image <image>', "batchserve's image (default ghcr.io/batchserve/batchserve:VERSION)")
      .option(
        '--fetch-image <image>',
        "the downloader for s3://, gs://, https://, run with args SRC_URI DEST_DIR (default KServe's kserve/storage-initializer:v0.20.0)",
      )
      .option(
        '--fetch-secret <secret>',
        "a Secret whose keys become the downloader's environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, …)",
      )
      .option('--service-account <name>', "the pods' ServiceAccount (e.g. for IRSA or GKE workload identity)"),
    { per: 'pod', output: '--manifest <file>' },
  ).action(async (flags: DeployJobFlags, command: Command) => {
    const { runDeployJob } = await import('./deploy.js');
    await runDeployJob(flags, command);
  });
}

/**
 * Resources and output, common to every deploy command; `gpu` where there is a pod to give
 * GPUs to. `output` names the flag for the YAML's file (k8s-job's `--output` is the scores').
 */
function withResources(
  command: Command,
  { gpu = true, per = 'replica', output = '--output <file>' }: { gpu?: boolean; per?: string; output?: string } = {},
): Command {
  if (gpu) command.option('--gpu <count>', `GPUs per ${per}: an nvidia.com/gpu limit and the -cuda image`);
  return command
    .option('--cpu <quantity>', `CPU requested per ${per}, e.g. 2 or 500m (default 1; no CPU limit)`)
    .option('--memory <quantity>', `memory requested and limited per ${per}, e.g. 4Gi (default 2Gi)`)
    .option(output, 'write the YAML to this file instead of stdout');
}
