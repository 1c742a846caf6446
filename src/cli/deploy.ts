import { writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { UsageError } from '../core/errors.js';
import type { Autoscaler, DeploymentMode, KServeProtocol } from '../deploy/deploy-options.js';
import { releaseImage } from '../deploy/image-reference.js';
import { jobManifests, jobNotes, type JobOptions } from '../deploy/job.js';
import type { KubernetesObject } from '../deploy/k8s-objects.js';
import { k8sManifests, kserveManifests, kserveRuntimeManifests, renderManifests } from '../deploy/manifests.js';
import { BATCHSERVE_VERSION } from '../version.js';
import { integerOption } from './options.js';

interface ResourceFlags {
  cpu?: string;
  memory?: string;
  output?: string;
}

export interface DeployRuntimeFlags extends ResourceFlags {
  image?: string;
}

export interface DeployKServeFlags extends DeployRuntimeFlags {
  name: string;
  storageUri: string;
  namespace?: string;
  deploymentMode: DeploymentMode;
  protocol: KServeProtocol;
  minReplicas: string;
  maxReplicas: string;
  targetQueueDepth: string;
  gpu?: string;
  prometheusUrl?: string;
  runtime: boolean;
}

export interface DeployK8sFlags extends ResourceFlags {
  name: string;
  image: string;
  namespace?: string;
  autoscaler: Autoscaler;
  replicas?: string;
  minReplicas: string;
  maxReplicas: string;
  targetQueueDepth: string;
  gpu?: string;
  prometheusUrl?: string;
}

export interface DeployJobFlags {
  name: string;
  archive: string;
  input: string;
  /** The scores' pvc:// URI; the YAML's file is `manifest`. */
  output: string;
  shards: string;
  parallelism?: string;
  namespace?: string;
  image?: string;
  fetchImage?: string;
  fetchSecret?: string;
  serviceAccount?: string;
  gpu?: string;
  cpu?: string;
  memory?: string;
  manifest?: string;
}

export async function runDeployRuntime(flags: DeployRuntimeFlags, command: Command): Promise<void> {
  const objects = kserveRuntimeManifests({
    image: flags.image ?? releaseImage(BATCHSERVE_VERSION),
    cpu: flags.cpu,
    memory: flags.memory,
  });
  await emit(objects, command, flags.output);
}

export async function runDeployKServe(flags: DeployKServeFlags, command: Command): Promise<void> {
  const objects = kserveManifests(
    {
      name: flags.name,
      namespace: flags.namespace,
      storageUri: flags.storageUri,
      deploymentMode: flags.deploymentMode,
      protocol: flags.protocol,
      minReplicas: integerOption(flags.minReplicas, '--min-replicas', 0),
      maxReplicas: integerOption(flags.maxReplicas, '--max-replicas', 1),
      targetQueueDepth: integerOption(flags.targetQueueDepth, '--target-queue-depth', 1),
      gpu: flags.gpu === undefined ? undefined : integerOption(flags.gpu, '--gpu', 1),
      cpu: flags.cpu,
      memory: flags.memory,
      image: flags.image ?? releaseImage(BATCHSERVE_VERSION),
      prometheusUrl: flags.prometheusUrl,
    },
    flags.runtime,
  );
  await emit(objects, command, flags.output);
}

export async function runDeployK8s(flags: DeployK8sFlags, command: Command): Promise<void> {
  const objects = k8sManifests({
    name: flags.name,
    namespace: flags.namespace,
    image: flags.image,
    autoscaler: flags.autoscaler,
    replicas: flags.replicas === undefined ? undefined : integerOption(flags.replicas, '--replicas', 1),
    minReplicas: integerOption(flags.minReplicas, '--min-replicas', 1),
    maxReplicas: integerOption(flags.maxReplicas, '--max-replicas', 1),
    targetQueueDepth: integerOption(flags.targetQueueDepth, '--target-queue-depth', 1),
    gpu: flags.gpu === undefined ? undefined : integerOption(flags.gpu, '--gpu', 1),
    cpu: flags.cpu,
    memory: flags.memory,
    prometheusUrl: flags.prometheusUrl,
  });
  await emit(objects, command, flags.output);
}

export async function runDeployJob(flags: DeployJobFlags, command: Command): Promise<void> {
  const shards = integerOption(flags.shards, '--shards', 1);
  const options: JobOptions = {
    name: flags.name,
    namespace: flags.namespace,
    archive: flags.archive,
    input: flags.input,
    output: flags.output,
    shards,
    parallelism: flags.parallelism === undefined ? undefined : integerOption(flags.parallelism, '--parallelism', 1),
    image: flags.image ?? releaseImage(BATCHSERVE_VERSION),
    fetchImage: flags.fetchImage,
    fetchSecret: flags.fetchSecret,
    serviceAccount: flags.serviceAccount,
    gpu: flags.gpu === undefined ? undefined : integerOption(flags.gpu, '--gpu', 1),
    cpu: flags.cpu,
    memory: flags.memory,
  };
  const objects = jobManifests(options);
  await emit(objects, command, flags.manifest, { fileFlag: '--manifest', notes: jobNotes(options) });
}

/** Writes the YAML to stdout or the file `fileFlag` names, under the header and `notes`. */
async function emit(
  objects: readonly KubernetesObject[],
  command: Command,
  output: string | undefined,
  { fileFlag = '--output', notes = [] }: { fileFlag?: string; notes?: readonly string[] } = {},
): Promise<void> {
  const yaml = renderManifests(objects, [...header(command, fileFlag), ...notes]);
  if (output === undefined) {
    process.stdout.write(yaml);
    return;
  }
  await writeFile(output, yaml).catch((error: unknown) => {
    throw new UsageError(
      `${fileFlag}: cannot write ${output}: ${error instanceof Error ? error.message : String(error)}`,
    );
  });
}

/** The command that wrote the file, from the flags given (not their defaults), so it can be run again. */
function header(command: Command, fileFlag: string): string[] {
  const words = ['batchserve', command.parent?.name() ?? 'deploy', command.name()];
  for (const option of command.options) {
    const key = option.attributeName();
    if (option.long === fileFlag || command.getOptionValueSource(key) !== 'cli') continue;
    const value: unknown = command.getOptionValue(key);
    words.push(option.long as string, ...(value === true ? [] : [shellWord(String(value))]));
  }
  return [`Generated by: ${words.join(' ')}`, 'Change the flags and run it again rather than editing this file.'];
}

function shellWord(value: string): string {
  return /^[\w@%+=:,./-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}
