import { posix } from 'node:path';
import { UsageError } from '../core/errors.js';
import { SCRATCH, SECURITY_CONTEXT, resources } from './batchserve-container.js';
import {
  checkNamespace,
  checkResources,
  DNS_1123_LABEL,
  DNS_1123_SUBDOMAIN,
  requestedResources,
} from './deploy-options.js';
import { selectorLabels } from './deployment.js';
import { cudaImage, parseImageReference } from './image-reference.js';
import type { Container, KubernetesObject, PodSecurityContext, Volume, VolumeMount } from './k8s-objects.js';

/**
 * `batchserve deploy k8s-job`: a Kubernetes Indexed Job in which pod I runs
 * `batchserve predict --shard I/N --resume` on a dataset, each writing its own shard beside
 * the output on a PersistentVolumeClaim, for `predict merge` to join afterwards.
 */

/**
 * KServe's storage initializer: the downloader KServe runs for an InferenceService's
 * `storageUri` (s3://, gs://, https://, …), with arguments `SRC_URI DEST_DIR`. v0.20.0 is the
 * release before the CRDs in test/fixtures/k8s.
 */
export const DEFAULT_FETCH_IMAGE = 'kserve/storage-initializer:v0.20.0';
export const MAX_SHARDS = 10_000;
/** Tries of one shard after its first: a shard that keeps failing is marked failed alone. */
export const BACKOFF_LIMIT_PER_INDEX = 2;
/** A finished Job (and its pods' logs) stays a day, then Kubernetes deletes it; the shards stay on the claim. */
export const TTL_SECONDS_AFTER_FINISHED = 86_400;
/** Set by the Job controller in each pod of an Indexed Job; Kubernetes expands `$(…)` in args. */
export const COMPLETION_INDEX = '$(JOB_COMPLETION_INDEX)';
/** `predict` exits 2 for what another try cannot fix: a flag, a dataset the model cannot take, a checkpoint of another job. */
export const USAGE_EXIT_CODE = 2;

/** Where each claim is mounted: `/mnt/pvc/<claim>`. */
export const PVC_ROOT = '/mnt/pvc';
/** The emptyDir the fetched archive and input are downloaded into, `/mnt/fetch/archive` and `/mnt/fetch/input`. */
export const FETCH_ROOT = '/mnt/fetch';
const FETCH_VOLUME = 'fetch';
const PREDICT_CONTAINER = 'predict';
/**
 * The fetched files' modification time, the same in every pod. `predict` identifies a job by
 * its archive's and input's path, size and mtime: a retried pod resumes its shard, and
 * `predict merge` joins the shards, only when these agree, and each pod downloads its own copy.
 */
export const PINNED_MTIME = '@0';

export interface JobOptions {
  /** The Job; its pods are `<name>-<index>-<suffix>` with host name `<name>-<index>`. */
  readonly name: string;
  readonly namespace?: string | undefined;
  /** `pvc://CLAIM/PATH`, or `s3://`, `gs://`, `https://` fetched by an init container. */
  readonly archive: string;
  readonly input: string;
  /** `pvc://CLAIM/PATH/out.jsonl`: the shards are written beside it. */
  readonly output: string;
  /** The Job's completions: one pod per shard. */
  readonly shards: number;
  /** Pods at once; default all of them. */
  readonly parallelism?: number | undefined;
  /** batchserve's image; with `gpu` its `-cuda` tag. */
  readonly image: string;
  /** The downloader's image, for fetched URIs only (default DEFAULT_FETCH_IMAGE). */
  readonly fetchImage?: string | undefined;
  /** A Secret whose keys become the downloader's environment (AWS_ACCESS_KEY_ID, …). */
  readonly fetchSecret?: string | undefined;
  readonly serviceAccount?: string | undefined;
  readonly gpu?: number | undefined;
  readonly cpu?: string | undefined;
  readonly memory?: string | undefined;
}

type Role = 'archive' | 'input' | 'output';

/** A URI of the Job: a path on a claim, or something the downloader fetches. */
export type JobUri =
  | { readonly kind: 'pvc'; readonly claim: string; readonly path: string }
  | {
      readonly kind: 'fetch';
      readonly uri: string;
      /** The downloader puts a folder's (or an unpacked archive's) contents in its destination, a file under its own name. */
      readonly file: string | undefined;
    };

const PVC_URI = /^pvc:\/\/([^/]*)\/(.*)$/;
const FETCH_URI = /^(s3|gs|https):\/\/([^/?#]+)\/([^?#]*)(?:[?#].*)?$/;
/** What KServe's downloader unpacks into its destination (Python's mimetypes: zip, or tar with or without compression). */
const UNPACKED = /\.(zip|tar|tar\.(gz|z|bz2|xz|br)|tgz|taz|tz|tbz2|txz)$/i;

/** `--archive`, `--input` or `--output` as a claim and path, or a URI to fetch; anything else is a usage error. */
export function parseJobUri(uri: string, role: Role): JobUri {
  const flag = `--${role}`;
  if (/\s/.test(uri) || uri.includes('$')) {
    throw new UsageError(
      `${flag}: "${uri}" has whitespace or '$' (Kubernetes expands $(…) in a container's arguments)`,
    );
  }
  const pvc = PVC_URI.exec(uri);
  if (pvc) {
    const claim = pvc[1] as string;
    const path = (pvc[2] as string).replace(/\/+$/, '');
    if (!DNS_1123_SUBDOMAIN.test(claim)) {
      throw new UsageError(
        `${flag}: "${claim}" in ${uri} is not a PersistentVolumeClaim name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.')`,
      );
    }
    if (path === '' || path.split('/').some((segment) => segment === '' || segment === '.' || segment === '..')) {
      throw new UsageError(
        `${flag}: expected pvc://CLAIM/PATH with a path inside the claim (no '.', '..' or '//'), got "${uri}"`,
      );
    }
    if (role === 'output' && uri.endsWith('/')) {
      throw new UsageError(`${flag}: name the output file (pvc://CLAIM/PATH/out.jsonl), not a folder: "${uri}"`);
    }
    return { kind: 'pvc', claim, path };
  }
  if (role === 'output') {
    throw new UsageError(
      `${flag}: the shards must outlive the pods that write them, so the output goes on a PersistentVolumeClaim: pvc://CLAIM/PATH/out.jsonl, got "${uri}"`,
    );
  }
  const fetched = FETCH_URI.exec(uri);
  const key = fetched?.[3] ?? '';
  if (!fetched || key.replace(/\/+$/, '') === '') {
    throw new UsageError(
      `${flag}: expected pvc://CLAIM/PATH, or s3://BUCKET/KEY, gs://BUCKET/KEY or https://HOST/PATH for an init container to fetch, got "${uri}"`,
    );
  }
  const folder = key.endsWith('/');
  if (folder && fetched[1] === 'https') {
    throw new UsageError(`${flag}: an https:// URI names one file (the downloader cannot list a folder), got "${uri}"`);
  }
  const name = posix.basename(key);
  return { kind: 'fetch', uri, file: folder || UNPACKED.test(name) ? undefined : name };
}

/** Checks the options, throwing one usage error that names the flag. */
export function checkJobOptions(options: JobOptions): void {
  if (!Number.isSafeInteger(options.shards) || options.shards < 1 || options.shards > MAX_SHARDS) {
    throw new UsageError(`--shards: expected an integer from 1 to ${MAX_SHARDS}, got ${options.shards}`);
  }
  // The pods' host names are <name>-<index>, which must stay a 63-character DNS label.
  const max = 63 - 1 - String(options.shards - 1).length;
  if (!DNS_1123_LABEL.test(options.name) || options.name.length > max) {
    throw new UsageError(
      `--name: expected a DNS-1123 label (lower-case letters, digits and '-', starting and ending with a letter or digit) of at most ${max} characters, so that the pods' host names ${options.name}-<index> stay DNS labels, got "${options.name}"`,
    );
  }
  checkNamespace(options.namespace);
  const parallelism = options.parallelism ?? options.shards;
  if (!Number.isSafeInteger(parallelism) || parallelism < 1 || parallelism > options.shards) {
    throw new UsageError(
      `--parallelism: expected an integer from 1 to --shards (${options.shards}), got ${parallelism}`,
    );
  }
  const uris = (['archive', 'input', 'output'] as const).map((role) => parseJobUri(options[role], role));
  const fetching = uris.some((uri) => uri.kind === 'fetch');
  for (const [flag, value] of [
    ['--fetch-image', options.fetchImage],
    ['--fetch-secret', options.fetchSecret],
  ] as const) {
    if (value !== undefined && !fetching) {
      throw new UsageError(`${flag}: nothing is fetched (--archive and --input are on claims); drop the flag`);
    }
  }
  if (options.fetchImage !== undefined) parseImageReference(options.fetchImage, '--fetch-image');
  for (const [flag, value, what] of [
    ['--fetch-secret', options.fetchSecret, 'Secret'],
    ['--service-account', options.serviceAccount, 'ServiceAccount'],
  ] as const) {
    if (value !== undefined && !DNS_1123_SUBDOMAIN.test(value)) {
      throw new UsageError(
        `${flag}: expected a ${what} name (a DNS-1123 subdomain: lower-case letters, digits, '-' and '.'), got "${value}"`,
      );
    }
  }
  checkResources(options);
  if (options.gpu !== undefined) cudaImage(options.image, '--image');
  else parseImageReference(options.image, '--image');
}

/** Where the pod finds `--archive`, `--input` and `--output`, and the volumes and downloads that put them there. */
interface Placement {
  readonly archive: string;
  readonly input: string;
  readonly output: string;
  /** The output claim's mount, and the folder the shards go in when it is below the claim's root. */
  readonly outputMount: VolumeMount;
  readonly outputFolder: string | undefined;
  readonly volumes: Volume[];
  readonly mounts: VolumeMount[];
  readonly fetches: { readonly role: 'archive' | 'input'; readonly uri: string; readonly dest: string }[];
}

function place(options: JobOptions): Placement {
  const output = parseJobUri(options.output, 'output') as Extract<JobUri, { kind: 'pvc' }>;
  const claims = new Map<string, { volume: string; readOnly: boolean }>([
    [output.claim, { volume: 'output', readOnly: false }],
  ]);
  const fetches: Placement['fetches'][number][] = [];
  const where = (role: 'archive' | 'input'): string => {
    const uri = parseJobUri(options[role], role);
    if (uri.kind === 'pvc') {
      if (!claims.has(uri.claim)) claims.set(uri.claim, { volume: role, readOnly: true });
      return `${PVC_ROOT}/${uri.claim}/${uri.path}`;
    }
    const dest = `${FETCH_ROOT}/${role}`;
    fetches.push({ role, uri: uri.uri, dest });
    return uri.file === undefined ? dest : `${dest}/${uri.file}`;
  };
  const archive = where('archive');
  const input = where('input');
  const volumes: Volume[] = [...SCRATCH.volumes];
  const mounts: VolumeMount[] = [...SCRATCH.volumeMounts];
  if (fetches.length > 0) {
    volumes.push({ name: FETCH_VOLUME, emptyDir: {} });
    mounts.push({ name: FETCH_VOLUME, mountPath: FETCH_ROOT, readOnly: true });
  }
  for (const [claim, { volume, readOnly }] of claims) {
    volumes.push({ name: volume, persistentVolumeClaim: { claimName: claim, ...(readOnly ? { readOnly } : {}) } });
    mounts.push({ name: volume, mountPath: `${PVC_ROOT}/${claim}`, ...(readOnly ? { readOnly } : {}) });
  }
  const folder = posix.dirname(output.path);
  return {
    archive,
    input,
    output: `${PVC_ROOT}/${output.claim}/${output.path}`,
    outputMount: { name: 'output', mountPath: `${PVC_ROOT}/${output.claim}` },
    outputFolder: folder === '.' ? undefined : `${PVC_ROOT}/${output.claim}/${folder}`,
    volumes,
    mounts,
    fetches,
  };
}

/** `predict`'s arguments in pod `$(JOB_COMPLETION_INDEX)`. */
export function predictArgs(placement: Pick<Placement, 'archive' | 'input' | 'output'>, shards: number): string[] {
  return [
    'predict',
    placement.archive,
    '--input',
    placement.input,
    '--output',
    placement.output,
    '--shard',
    `${COMPLETION_INDEX}/${shards}`,
    // A retried pod continues its shard from the checkpoint; with none it starts afresh, and a
    // shard already finished (the Job applied again) is reported complete without loading the model.
    '--resume',
  ];
}

/** What a downloader may use: KServe's own defaults for its storage initializer. */
const FETCH_RESOURCES = { requests: { cpu: '100m', memory: '100Mi' }, limits: { memory: '1Gi' } };
/** mkdir, find and touch. */
const TOOL_RESOURCES = { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } };

/**
 * The output's folder first (`predict` refuses an --output whose folder does not exist; made
 * first, an unwritable claim fails before any download). Then one downloader per fetched URI
 * (`SRC_URI DEST_DIR`, as KServe runs it), then the pin: every fetched file and folder gets the
 * same mtime in every pod, so that the job is the same job.
 */
function initContainers(options: JobOptions, placement: Placement, image: string): Container[] {
  const folder: Container[] =
    placement.outputFolder === undefined
      ? []
      : [
          {
            name: 'output-folder',
            image,
            command: ['mkdir'],
            args: ['-p', placement.outputFolder],
            resources: TOOL_RESOURCES,
            securityContext: SECURITY_CONTEXT,
            volumeMounts: [placement.outputMount],
          },
        ];
  if (placement.fetches.length === 0) return folder;
  const writable: VolumeMount[] = [...SCRATCH.volumeMounts, { name: FETCH_VOLUME, mountPath: FETCH_ROOT }];
  const fetchers = placement.fetches.map(({ role, uri, dest }): Container => ({
    name: `fetch-${role}`,
    image: options.fetchImage ?? DEFAULT_FETCH_IMAGE,
    args: [uri, dest],
    ...(options.fetchSecret === undefined ? {} : { envFrom: [{ secretRef: { name: options.fetchSecret } }] }),
    resources: FETCH_RESOURCES,
    securityContext: SECURITY_CONTEXT,
    volumeMounts: writable,
  }));
  const pin: Container = {
    name: 'pin-mtimes',
    image,
    command: ['find'],
    args: [FETCH_ROOT, '-mindepth', '1', '-exec', 'touch', '-m', '-d', PINNED_MTIME, '{}', '+'],
    resources: TOOL_RESOURCES,
    securityContext: SECURITY_CONTEXT,
    volumeMounts: writable,
  };
  return [...folder, ...fetchers, pin];
}

/** The Job; `options` are checked first. */
export function buildJob(options: JobOptions): KubernetesObject {
  checkJobOptions(options);
  const placement = place(options);
  const image = options.gpu === undefined ? options.image : cudaImage(options.image, '--image');
  const labels = { ...selectorLabels(options.name), 'app.kubernetes.io/component': 'batch-predict' };
  const init = initContainers(options, placement, image);
  const predict: Container = {
    name: PREDICT_CONTAINER,
    image,
    args: predictArgs(placement, options.shards),
    resources: resources({ ...requestedResources(options), gpu: options.gpu }),
    securityContext: SECURITY_CONTEXT,
    volumeMounts: placement.mounts,
  };
  // The claims' files belong to the image's group, so the non-root user can write the shards.
  const podSecurityContext: PodSecurityContext = {
    fsGroup: SECURITY_CONTEXT.runAsGroup,
    fsGroupChangePolicy: 'OnRootMismatch',
  };
  const job: KubernetesObject = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: options.name,
      ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
      labels,
    },
    spec: {
      completionMode: 'Indexed',
      completions: options.shards,
      parallelism: options.parallelism ?? options.shards,
      backoffLimitPerIndex: BACKOFF_LIMIT_PER_INDEX,
      podFailurePolicy: {
        rules: [
          {
            action: 'FailIndex',
            onExitCodes: { containerName: PREDICT_CONTAINER, operator: 'In', values: [USAGE_EXIT_CODE] },
          },
          // Preemption, eviction and node drains are retried without using up the shard's tries.
          { action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] },
        ],
      },
      // A replacement starts only once the pod it replaces has stopped: one writer per shard.
      podReplacementPolicy: 'Failed',
      ttlSecondsAfterFinished: TTL_SECONDS_AFTER_FINISHED,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          // predict never calls the Kubernetes API.
          automountServiceAccountToken: false,
          ...(options.serviceAccount === undefined ? {} : { serviceAccountName: options.serviceAccount }),
          securityContext: podSecurityContext,
          ...(init.length > 0 ? { initContainers: init } : {}),
          containers: [predict],
          volumes: placement.volumes,
        },
      },
    },
  };
  // A copy that shares no object between its branches, so the YAML repeats them rather than writing anchors.
  return JSON.parse(JSON.stringify(job)) as KubernetesObject;
}

/** `batchserve deploy k8s-job` writes this one object. */
export function jobManifests(options: JobOptions): KubernetesObject[] {
  return [buildJob(options)];
}

/** `out.jsonl` → `out.shard-*-of-N.jsonl`, as `predict --shard` names its outputs. */
export function shardGlob(output: string, shards: number): string {
  const extension = posix.extname(output);
  const stem = output.slice(0, output.length - extension.length);
  return `${stem}.shard-*-of-${shards}${extension}`;
}

/**
 * The comment at the top of the YAML: what each pod writes, and how the shards are joined once
 * the Job is complete. The merge is not part of the Job: Kubernetes has no Job that waits for
 * another, and joining is one sequential pass over files already on the claim.
 */
export function jobNotes(options: JobOptions): string[] {
  checkJobOptions(options);
  const { output } = place(options);
  const claim = (parseJobUri(options.output, 'output') as Extract<JobUri, { kind: 'pvc' }>).claim;
  const shards = shardGlob(output, options.shards);
  const parallelism = options.parallelism ?? options.shards;
  const namespace = options.namespace === undefined ? '' : ` -n ${options.namespace}`;
  const join = /\.(parquet|pq)$/i.test(output)
    ? [`read the Parquet shards ${shards} together as one dataset (predict merge does not concatenate Parquet).`]
    : [
        `join the shards wherever the claim "${claim}" is mounted at ${PVC_ROOT}/${claim}:`,
        `  batchserve predict merge --output ${output} ${shards}`,
      ];
  return [
    `An Indexed Job of ${options.shards} pods (${parallelism} at a time): pod I runs predict --shard I/${options.shards} --resume`,
    `and writes ${shards.replace('*', 'I')} on the claim "${claim}".`,
    `When it is complete (kubectl wait${namespace} --for=condition=complete --timeout=24h job/${options.name}),`,
    ...join,
  ];
}
