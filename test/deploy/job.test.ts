import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { UsageError } from '../../src/core/errors.js';
import { SECURITY_CONTEXT } from '../../src/deploy/batchserve-container.js';
import {
  buildJob,
  COMPLETION_INDEX,
  DEFAULT_FETCH_IMAGE,
  jobManifests,
  MAX_SHARDS,
  type JobOptions,
} from '../../src/deploy/job.js';
import type { Container, KubernetesObject } from '../../src/deploy/k8s-objects.js';
import { BATCHSERVE_VERSION } from '../../src/version.js';
import { packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { parseDocuments, schemaProblems } from './schemas.js';

/**
 * `deploy k8s-job`: the Job is valid batch/v1 (Kubernetes 1.30, strict), says what an Indexed
 * Job of predict shards needs, and its pods' commands, run here as the pods would run them,
 * score the input exactly as one `predict` does once their shards are merged.
 */

const ROOT = new URL('../../../', import.meta.url);
const BIN = fileURLToPath(new URL('bin/batchserve.js', ROOT));
const IMAGE = 'ghcr.io/batchserve/batchserve:0.1.0';

const JOB: JobOptions = {
  name: 'score',
  archive: 'pvc://models/resnet/resnet.mar',
  input: 'pvc://datasets/images/2026-08',
  output: 'pvc://results/resnet/scores.jsonl',
  shards: 8,
  image: IMAGE,
};

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function run(file: string, args: readonly string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const cli = (args: readonly string[]): Promise<Run> => run(process.execPath, [BIN, ...args]);

/* eslint-disable @typescript-eslint/no-explicit-any -- manifests are read as the YAML a cluster would get */
const specOf = (job: KubernetesObject): any => job.spec;
const podOf = (job: KubernetesObject): any => specOf(job).template.spec;
/* eslint-enable @typescript-eslint/no-explicit-any */
const containerOf = (job: KubernetesObject): Container => podOf(job).containers[0] as Container;
const initOf = (job: KubernetesObject): Container[] => (podOf(job).initContainers ?? []) as Container[];

test('generated Jobs and deploy/k8s/batch-predict-job.yaml are valid batch/v1 Jobs (Kubernetes 1.30, strict)', async () => {
  const cases: [string, JobOptions][] = [
    ['three claims', JOB],
    [
      'one claim for everything, parallelism, namespace',
      {
        ...JOB,
        archive: 'pvc://scratch/m/resnet.mar',
        input: 'pvc://scratch/in/rows.jsonl',
        output: 'pvc://scratch/out/scores.csv',
        parallelism: 2,
        namespace: 'ml',
      },
    ],
    [
      'fetched archive and input folder, secret, service account, GPU, resources',
      {
        ...JOB,
        archive: 's3://models/resnet/resnet.mar',
        input: 'gs://datasets/images/2026-08/',
        fetchSecret: 's3-credentials',
        serviceAccount: 'batch-scorer',
        gpu: 1,
        cpu: '4',
        memory: '16Gi',
      },
    ],
    [
      'https archive, own downloader, a tar.gz input, most shards, one at a time',
      {
        ...JOB,
        archive: 'https://models.example.com/resnet.mar?version=3',
        input: 's3://datasets/rows.tar.gz',
        fetchImage: 'mirror.example.com/kserve/storage-initializer:v0.20.0',
        shards: MAX_SHARDS,
        parallelism: 1,
        name: 'a'.repeat(58),
      },
    ],
    ['one shard, Parquet', { ...JOB, shards: 1, output: 'pvc://results/scores.parquet' }],
  ];
  for (const [label, options] of cases) {
    for (const object of jobManifests(options)) assert.deepEqual(await schemaProblems(object), [], label);
  }
  const file = await readFile(new URL('deploy/k8s/batch-predict-job.yaml', ROOT), 'utf8');
  const documents = parseDocuments(file) as KubernetesObject[];
  assert.deepEqual(
    documents.map((document) => document.kind),
    ['Job'],
  );
  assert.deepEqual(await schemaProblems(documents[0]), []);
});

/* eslint-disable @typescript-eslint/no-explicit-any -- breaking a Job on purpose */
test('the Job schema refuses a misspelt key and a wrong type', async () => {
  const good = buildJob({ ...JOB, archive: 's3://models/resnet.mar', fetchSecret: 's3' });
  const breakages: [(job: any) => void, RegExp][] = [
    [
      (job) => (job.spec.backofLimitPerIndex = 2),
      /^\/spec: must NOT have additional properties \(backofLimitPerIndex\)$/,
    ],
    [(job) => (job.spec.completions = '8'), /^\/spec\/completions: must be integer/],
    [
      (job) => (job.spec.podFailurePolicy.rules[0].onExitCodes.values = ['2']),
      /^\/spec\/podFailurePolicy\/rules\/0\/onExitCodes\/values\/0: must be integer/,
    ],
    [
      (job) => (job.spec.template.spec.initContainers[1].envFrom[0].secretRef.nme = 's3'),
      /^\/spec\/template\/spec\/initContainers\/1\/envFrom\/0\/secretRef: must NOT have additional properties \(nme\)$/,
    ],
    [
      (job) => (job.spec.template.spec.volumes[2].persistentVolumeClaim.claim = 'results'),
      /^\/spec\/template\/spec\/volumes\/2\/persistentVolumeClaim: must NOT have additional properties \(claim\)$/,
    ],
  ];
  for (const [break_, expected] of breakages) {
    const broken = structuredClone(good);
    break_(broken);
    const problems = await schemaProblems(broken);
    assert.ok(
      problems.some((problem) => expected.test(problem)),
      `${String(break_)}: expected ${String(expected)} among ${JSON.stringify(problems)}`,
    );
  }
});
/* eslint-enable @typescript-eslint/no-explicit-any */

test('an Indexed Job of predict shards: one pod per shard, each retried alone, resuming its shard', () => {
  const job = buildJob({ ...JOB, parallelism: 3 });
  const spec = specOf(job);
  assert.equal(spec.completionMode, 'Indexed');
  assert.equal(spec.completions, 8);
  assert.equal(spec.parallelism, 3);
  assert.equal(specOf(buildJob(JOB)).parallelism, 8, 'parallelism defaults to the shards');
  assert.equal(spec.backoffLimitPerIndex, 2);
  assert.equal(spec.backoffLimit, undefined, 'with backoffLimitPerIndex the Job-wide limit stays unlimited');
  assert.equal(spec.podReplacementPolicy, 'Failed');
  assert.ok(spec.ttlSecondsAfterFinished > 0);
  const pod = podOf(job);
  assert.equal(pod.restartPolicy, 'Never', 'podFailurePolicy and backoffLimitPerIndex need Never');
  assert.equal(pod.automountServiceAccountToken, false);
  assert.deepEqual(pod.securityContext, { fsGroup: 10001, fsGroupChangePolicy: 'OnRootMismatch' });

  const predict = containerOf(job);
  // Exit 2 (a usage error, a checkpoint of another job) fails the index at once; the rule names the container.
  assert.deepEqual(spec.podFailurePolicy.rules[0], {
    action: 'FailIndex',
    onExitCodes: { containerName: predict.name, operator: 'In', values: [2] },
  });
  assert.equal(spec.podFailurePolicy.rules[1].action, 'Ignore');
  assert.deepEqual(predict.args, [
    'predict',
    '/mnt/pvc/models/resnet/resnet.mar',
    '--input',
    '/mnt/pvc/datasets/images/2026-08',
    '--output',
    '/mnt/pvc/results/resnet/scores.jsonl',
    '--shard',
    '$(JOB_COMPLETION_INDEX)/8',
    '--resume',
  ]);
  assert.equal(predict.args[predict.args.indexOf('--shard') + 1], `${COMPLETION_INDEX}/8`);
  assert.equal(predict.command, undefined, "the image's entrypoint is batchserve");
  assert.equal(predict.image, IMAGE);
  assert.deepEqual(predict.securityContext, SECURITY_CONTEXT);
  assert.deepEqual(predict.resources, { requests: { cpu: '1', memory: '2Gi' }, limits: { memory: '2Gi' } });
  // Only the output's claim is writable; each claim is mounted once, /tmp is the scratch emptyDir.
  assert.deepEqual(predict.volumeMounts, [
    { name: 'scratch', mountPath: '/tmp' },
    { name: 'output', mountPath: '/mnt/pvc/results' },
    { name: 'archive', mountPath: '/mnt/pvc/models', readOnly: true },
    { name: 'input', mountPath: '/mnt/pvc/datasets', readOnly: true },
  ]);
  assert.deepEqual(pod.volumes, [
    { name: 'scratch', emptyDir: {} },
    { name: 'output', persistentVolumeClaim: { claimName: 'results' } },
    { name: 'archive', persistentVolumeClaim: { claimName: 'models', readOnly: true } },
    { name: 'input', persistentVolumeClaim: { claimName: 'datasets', readOnly: true } },
  ]);
  // Nothing to fetch: only the shards' folder is made (predict refuses an --output in a folder that is not there).
  assert.deepEqual(initOf(job), [
    {
      name: 'output-folder',
      image: IMAGE,
      command: ['mkdir'],
      args: ['-p', '/mnt/pvc/results/resnet'],
      resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { memory: '64Mi' } },
      securityContext: SECURITY_CONTEXT,
      volumeMounts: [{ name: 'output', mountPath: '/mnt/pvc/results' }],
    },
  ]);
  assert.deepEqual(initOf(buildJob({ ...JOB, output: 'pvc://results/scores.jsonl' })), [], 'the claim is the folder');

  // An archive on the output's claim shares its (writable) mount.
  const shared = buildJob({ ...JOB, archive: 'pvc://results/models/resnet.mar' });
  assert.deepEqual(
    podOf(shared).volumes.map((volume: { name: string }) => volume.name),
    ['scratch', 'output', 'input'],
  );
  assert.equal(containerOf(shared).args[1], '/mnt/pvc/results/models/resnet.mar');

  const gpu = containerOf(buildJob({ ...JOB, gpu: 2 }));
  assert.equal(gpu.image, `${IMAGE}-cuda`);
  assert.equal(gpu.resources?.limits?.['nvidia.com/gpu'], 2);
});

test("fetched URIs: KServe's downloader per URI into an emptyDir, then one mtime for every pod's copy", () => {
  const job = buildJob({
    ...JOB,
    archive: 's3://models/resnet/resnet.mar',
    input: 'gs://datasets/images/2026-08/',
    fetchSecret: 's3-credentials',
    serviceAccount: 'scorer',
  });
  const [folder, archive, input, pin, ...more] = initOf(job) as [Container, Container, Container, Container];
  assert.deepEqual(more, []);
  assert.equal(folder.name, 'output-folder', 'an unwritable claim fails before the downloads');
  for (const [container, uri, dest] of [
    [archive, 's3://models/resnet/resnet.mar', '/mnt/fetch/archive'],
    [input, 'gs://datasets/images/2026-08/', '/mnt/fetch/input'],
  ] as const) {
    assert.equal(container.image, DEFAULT_FETCH_IMAGE);
    assert.deepEqual(container.args, [uri, dest]);
    assert.deepEqual(container.envFrom, [{ secretRef: { name: 's3-credentials' } }]);
    assert.deepEqual(container.securityContext, SECURITY_CONTEXT);
  }
  assert.equal(pin.image, IMAGE);
  assert.deepEqual(
    [...(pin.command ?? []), ...pin.args],
    ['find', '/mnt/fetch', '-mindepth', '1', '-exec', 'touch', '-m', '-d', '@0', '{}', '+'],
  );
  const predict = containerOf(job);
  // A file keeps its name under the destination; a folder's contents are the destination.
  assert.equal(predict.args[1], '/mnt/fetch/archive/resnet.mar');
  assert.equal(predict.args[3], '/mnt/fetch/input');
  assert.deepEqual(predict.volumeMounts?.[1], { name: 'fetch', mountPath: '/mnt/fetch', readOnly: true });
  assert.equal(podOf(job).serviceAccountName, 'scorer');
  // What the downloader unpacks is a folder too; an https URL's query is not part of the name.
  const other = buildJob({ ...JOB, archive: 'https://h.example.com/m/resnet.mar?v=3', input: 's3://d/rows.tar.gz' });
  assert.equal(containerOf(other).args[1], '/mnt/fetch/archive/resnet.mar');
  assert.equal(containerOf(other).args[3], '/mnt/fetch/input');
  assert.equal(initOf(other)[1]?.envFrom, undefined);
});

test('bad options are one usage error that names the flag', () => {
  const cases: [Partial<JobOptions>, RegExp][] = [
    [{ output: 's3://results/scores.jsonl' }, /^--output: the shards must outlive the pods .*pvc:\/\/CLAIM/],
    [{ output: 'pvc://results/scores/' }, /^--output: name the output file/],
    [{ archive: '/models/resnet.mar' }, /^--archive: expected pvc:\/\/CLAIM\/PATH, or s3:\/\/BUCKET\/KEY/],
    [{ input: 'ftp://host/rows.jsonl' }, /^--input: expected pvc:\/\/CLAIM\/PATH/],
    [{ input: 's3://bucket' }, /^--input: expected pvc:\/\/CLAIM\/PATH/],
    [{ input: 'https://host.example.com/data/' }, /^--input: an https:\/\/ URI names one file/],
    [{ archive: 'pvc://Models/resnet.mar' }, /^--archive: "Models" .* is not a PersistentVolumeClaim name/],
    [{ archive: 'pvc://models/' }, /^--archive: expected pvc:\/\/CLAIM\/PATH with a path inside the claim/],
    [{ input: 'pvc://data/../etc/rows.jsonl' }, /^--input: expected pvc:\/\/CLAIM\/PATH with a path inside/],
    [{ input: 'pvc://data/$(HOME)/rows.jsonl' }, /^--input: .* has whitespace or '\$'/],
    [{ shards: 0 }, /^--shards: expected an integer from 1 to 10000, got 0/],
    [{ shards: MAX_SHARDS + 1 }, /^--shards: expected an integer from 1 to 10000/],
    [{ parallelism: 9 }, /^--parallelism: expected an integer from 1 to --shards \(8\), got 9/],
    [{ parallelism: 0 }, /^--parallelism: expected an integer from 1 to --shards/],
    [{ name: 'Score_1' }, /^--name: expected a DNS-1123 label .* at most 61 characters/],
    [{ name: 'a'.repeat(59), shards: 10_000 }, /^--name: .* at most 58 characters, so that the pods' host names/],
    [{ namespace: 'ML' }, /^--namespace: expected a DNS-1123 label/],
    [{ fetchImage: 'kserve/storage-initializer:v0.20.0' }, /^--fetch-image: nothing is fetched/],
    [{ fetchSecret: 's3' }, /^--fetch-secret: nothing is fetched/],
    [{ archive: 's3://m/r.mar', fetchSecret: 'S3 creds' }, /^--fetch-secret: expected a Secret name/],
    [
      { archive: 's3://m/r.mar', fetchImage: 'not an image' },
      /^--fetch-image: "not an image" is not an image reference/,
    ],
    [{ serviceAccount: 'Scorer' }, /^--service-account: expected a ServiceAccount name/],
    [
      { gpu: 1, image: `ghcr.io/batchserve/batchserve@sha256:${'0'.repeat(64)}` },
      /^--image: --gpu selects the -cuda tag/,
    ],
    [{ memory: '4 GB' }, /^--memory: expected a Kubernetes quantity/],
  ];
  for (const [change, expected] of cases) {
    assert.throws(
      () => buildJob({ ...JOB, ...change }),
      (error: unknown) => {
        assert.ok(error instanceof UsageError, String(error));
        assert.match(error.message, expected, JSON.stringify(change));
        assert.doesNotMatch(error.message, /\n/);
        return true;
      },
    );
  }
});

test('deploy k8s-job: YAML on stdout or --manifest, the merge command in its header, bad flags exit 2', async (t) => {
  const base = [
    'deploy',
    'k8s-job',
    '--name',
    'score',
    '--archive',
    'pvc://models/resnet.mar',
    '--input',
    'pvc://data/rows.jsonl',
    '--output',
    'pvc://results/out/scores.jsonl',
    '--shards',
    '4',
  ];
  const plain = await cli([...base, '--namespace', 'ml']);
  assert.equal(plain.code, 0, plain.stderr);
  assert.equal(plain.stderr, '');
  assert.match(plain.stdout, /^# Generated by: batchserve deploy k8s-job --name score .*--shards 4 --namespace ml\n/);
  assert.ok(plain.stdout.includes('kubectl wait -n ml --for=condition=complete --timeout=24h job/score'));
  assert.ok(
    plain.stdout.includes(
      '#   batchserve predict merge --output /mnt/pvc/results/out/scores.jsonl /mnt/pvc/results/out/scores.shard-*-of-4.jsonl\n',
    ),
  );
  const [job] = parseDocuments(plain.stdout) as [KubernetesObject];
  assert.equal(containerOf(job).image, `ghcr.io/batchserve/batchserve:${BATCHSERVE_VERSION}`);

  const manifest = join(await tempDir(t), 'job.yaml');
  const written = await cli([...base, '--manifest', manifest, '--gpu', '1']);
  assert.equal(written.code, 0, written.stderr);
  assert.equal(written.stdout, '');
  const [gpuJob] = parseDocuments(await readFile(manifest, 'utf8')) as [KubernetesObject];
  assert.match(containerOf(gpuJob).image, /-cuda$/);

  const parquet = await cli([...base.slice(0, -4), '--output', 'pvc://results/scores.parquet', '--shards', '2']);
  assert.match(parquet.stdout, /read the Parquet shards \/mnt\/pvc\/results\/scores\.shard-\*-of-2\.parquet together/);

  const cases: [string[], RegExp][] = [
    [[...base.slice(0, -2)], /required option '--shards <count>' not specified/],
    [[...base, '--parallelism', 'all'], /--parallelism: expected an integer ≥ 1, got "all"/],
    [
      [...base.slice(0, -4), '--output', 'gs://results/scores.jsonl', '--shards', '4'],
      /--output: the shards must outlive/,
    ],
    [[...base, '--manifest', '/nonexistent/dir/job.yaml'], /--manifest: cannot write \/nonexistent\/dir\/job\.yaml/],
    [[...base, '--replicas', '2'], /unknown option '--replicas'/],
  ];
  await Promise.all(
    cases.map(async ([args, expected]) => {
      const bad = await cli(args);
      assert.equal(bad.code, 2, `${args.join(' ')}: ${bad.stderr}`);
      assert.equal(bad.stdout, '');
      assert.match(bad.stderr, /^batchserve: [^\n]+\n$/, args.join(' '));
      assert.match(bad.stderr, expected);
    }),
  );
  const help = await cli(['deploy', 'k8s-job', '--help']);
  assert.ok(help.stdout.replace(/\s+/g, ' ').includes(DEFAULT_FETCH_IMAGE), help.stdout);
});

/** The pod's paths (`/mnt/pvc/<claim>`, `/mnt/fetch`) on this machine: each claim and the fetch emptyDir a folder of `root`. */
function localPath(root: string, path: string): string {
  const match = /^\/mnt\/(pvc\/[^/]+|fetch)(\/.*)?$/.exec(path);
  return match ? join(root, match[1] as string, match[2] ?? '') : path;
}

/** A container's command as the kubelet runs it in pod `index`: `$(JOB_COMPLETION_INDEX)` expanded, paths mapped to `root`. */
function podCommand(container: Container, index: number, root: string): string[] {
  return [...(container.command ?? []), ...container.args].map((arg) =>
    localPath(root, arg.replaceAll(COMPLETION_INDEX, String(index))),
  );
}

/** Runs a container's command here: its `command`, or else the image's entrypoint, `batchserve`. */
function exec(container: Container, index: number, root: string): Promise<Run> {
  const [first, ...rest] = podCommand(container, index, root) as [string, ...string[]];
  return container.command === undefined ? cli([first, ...rest]) : run(first, rest);
}

/**
 * Pod `index` of the Job, here: its init containers in order, then predict. The downloaders
 * (KServe's image) cannot run here; `download` stands in for each.
 */
async function runPod(
  job: KubernetesObject,
  index: number,
  root: string,
  download: (fetch: Container) => Promise<void> = () => Promise.reject(new Error('nothing to fetch')),
): Promise<Run> {
  for (const container of initOf(job)) {
    if (container.name.startsWith('fetch-')) {
      await download(container);
      continue;
    }
    const init = await exec(container, index, root);
    if (init.code !== 0) return { ...init, stderr: `${container.name}: ${init.stderr}` };
  }
  return exec(containerOf(job), index, root);
}

async function rows(root: string, count: number): Promise<string> {
  const input = join(root, 'pvc/datasets/rows/rows.jsonl');
  await mkdir(dirname(input), { recursive: true });
  const lines = Array.from({ length: count }, (_, row) => JSON.stringify({ x: [[row, row / 2, -row, 1.5 * row]] }));
  await writeFile(input, `${lines.join('\n')}\n`);
  return input;
}

/** One `predict` of the whole input: what the merged shards must equal. */
async function singleProcess(archive: string, input: string, root: string): Promise<string> {
  const output = join(root, 'single/scores.jsonl');
  await mkdir(dirname(output), { recursive: true });
  const single = await cli(['predict', archive, '--input', input, '--output', output, '--quiet']);
  assert.equal(single.code, 0, single.stderr);
  return readFile(output, 'utf8');
}

async function merge(job: KubernetesObject, root: string, shards: number): Promise<Run> {
  const output = localPath(root, containerOf(job).args[5] as string);
  const files = Array.from({ length: shards }, (_, index) =>
    output.replace(/\.jsonl$/, `.shard-${index}-of-${shards}.jsonl`),
  );
  return cli(['predict', 'merge', '--output', output, ...files]);
}

test('rehearsal: the pods of the Job, run here concurrently, merge into what one predict writes', async (t) => {
  const root = await tempDir(t);
  const shards = 4;
  const archive = await packAffine(join(root, 'pvc/models/affine'));
  const input = await rows(root, 23);
  const job = buildJob({
    name: 'score-affine',
    archive: 'pvc://models/affine/store/affine.mar',
    input: 'pvc://datasets/rows/rows.jsonl',
    output: 'pvc://results/scores/out.jsonl',
    shards,
    image: IMAGE,
  });
  assert.deepEqual(
    initOf(job).map((container) => container.name),
    ['output-folder'],
  );
  const predict = containerOf(job);
  assert.equal(localPath(root, predict.args[1] as string), archive);

  const pods = await Promise.all(Array.from({ length: shards }, (_, index) => runPod(job, index, root)));
  for (const [index, pod] of pods.entries()) assert.equal(pod.code, 0, `pod ${index}: ${pod.stderr}`);
  // Every shard is a contiguous slice, none empty: 23 rows in 4 slices of 5 or 6.
  const sizes = await Promise.all(
    pods.map(async (_, index) => {
      const shard = join(root, `pvc/results/scores/out.shard-${index}-of-${shards}.jsonl`);
      return (await readFile(shard, 'utf8')).split('\n').filter(Boolean).length;
    }),
  );
  assert.deepEqual(sizes, [5, 6, 6, 6]);

  const merged = await merge(job, root, shards);
  assert.equal(merged.code, 0, merged.stderr);
  const expected = await singleProcess(archive, input, root);
  const actual = await readFile(join(root, 'pvc/results/scores/out.jsonl'), 'utf8');
  assert.deepEqual(
    actual.split('\n').map((line) => (line ? JSON.parse(line) : line) as unknown),
    expected.split('\n').map((line) => (line ? JSON.parse(line) : line) as unknown),
  );
  assert.equal(actual, expected);
  assert.equal(expected.split('\n').filter(Boolean).length, 23);

  // The Job applied again (or a pod retried after its shard finished): --resume finds it complete.
  const again = await runPod(job, 2, root);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /^already complete: 6 rows/);
});

test(
  'rehearsal with a fetched archive: each pod downloads its own copy, the pin makes them one job for merge',
  { skip: process.platform !== 'linux' && 'the pin runs GNU find and touch, as in the image' },
  async (t) => {
    const root = await tempDir(t);
    const shards = 3;
    const packed = await packAffine(join(root, 'bucket'));
    const input = await rows(root, 10);
    const job = buildJob({
      name: 'score-affine',
      archive: 's3://models/affine.mar',
      input: 'pvc://datasets/rows/rows.jsonl',
      output: 'pvc://results/scores/out.jsonl',
      shards,
      image: IMAGE,
    });
    const [, fetch, pin] = initOf(job) as [Container, Container, Container];
    const predict = containerOf(job);
    const archive = localPath(root, predict.args[1] as string);
    assert.deepEqual(fetch.args, ['s3://models/affine.mar', '/mnt/fetch/archive']);
    assert.equal(archive, join(localPath(root, fetch.args[1] as string), 'affine.mar'));

    // Pods one after another, each with a fresh emptyDir: the download (a copy), the pin, predict.
    const mtimes: number[] = [];
    const download = async (): Promise<void> => {
      await mkdir(dirname(archive), { recursive: true });
      await copyFile(packed, archive);
      mtimes.push((await stat(archive)).mtimeMs);
    };
    for (let index = 0; index < shards; index++) {
      await rm(join(root, 'fetch'), { recursive: true, force: true });
      const pod = await runPod(job, index, root, download);
      assert.equal(pod.code, 0, `pod ${index}: ${pod.stderr}`);
      assert.equal((await stat(archive)).mtimeMs, 0);
    }
    assert.equal(mtimes.length, shards);
    assert.ok(mtimes.every((mtime) => mtime > 0));

    const merged = await merge(job, root, shards);
    assert.equal(merged.code, 0, merged.stderr);
    assert.equal(
      await readFile(join(root, 'pvc/results/scores/out.jsonl'), 'utf8'),
      await singleProcess(packed, input, root),
    );

    // Why the pin: a pod's fresh download without it is another job to the shard's checkpoint (exit 2).
    await copyFile(packed, archive);
    const unpinned = await exec(predict, 1, root);
    assert.equal(unpinned.code, 2, unpinned.stderr);
    assert.match(unpinned.stderr, /another job.*archive\.mtimeMs/);
    assert.equal((await exec(pin, 1, root)).code, 0);
    const pinned = await exec(predict, 1, root);
    assert.equal(pinned.code, 0, pinned.stderr);
    assert.match(pinned.stdout, /^already complete/);
  },
);
