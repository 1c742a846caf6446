import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmod, cp, mkdir, readdir, readFile, rename, stat, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { basename, dirname, join, posix } from 'node:path';
import { affineRequest, call, packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { cleanEnv, jsonLines, REPO, runChild, snapshotTree, startServing, type Served } from './container-child.js';
import { SERVING_NODE_FLAGS } from '../../src/core/serving-node-flags.js';

// No Docker engine runs where these tests run, so the image is never built here. Instead the
// Dockerfile is read as data: its runtime stage's files are laid out as its COPY lines say, and
// its ENV, ENTRYPOINT and CMD (and the args KServe's ServingRuntime passes) are run against real
// archives. Where Linux namespaces are available (root), they run exactly, in a private mount
// and network namespace set up like the container: /mnt/models a read-only mount, /tmp empty,
// the user of USER, ports 8080-8082 and 8001. Elsewhere the container's paths are mapped into temp
// folders and its ports to free ones, as `docker run -v -p` would.

/** The args the KServe ServingRuntime (deploy/) gives the container; `{{.Name}}` is the InferenceService's name. */
const KSERVE_ARGS = (
  'serve --host 0.0.0.0 --port 8080 --management-port 8081 --metrics-port 8082 --grpc-port 8001 --model-store /mnt/models ' +
  '--models all --model-name {{.Name}} --work-dir /tmp/batchserve --key-file /tmp/batchserve.key --drain-timeout 30s'
).split(' ');
const ISVC_NAME = 'sentiment';
const require = createRequire(import.meta.url);

// --- the Dockerfile as data ---------------------------------------------------------------

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

interface Stage {
  readonly from: string;
  readonly name: string | undefined;
  readonly instructions: readonly Instruction[];
}

interface Dockerfile {
  /** ARGs before the first FROM, with their defaults. */
  readonly args: ReadonlyMap<string, string>;
  readonly stages: readonly Stage[];
}

/** Instructions with continuation lines joined and comments dropped, split into stages. */
function parseDockerfile(text: string): Dockerfile {
  const logical: string[] = [];
  let pending = '';
  for (const line of text.split('\n')) {
    if (/^\s*#/.test(line)) continue;
    const continued = /\\\s*$/.test(line);
    pending += `${line.replace(/\\\s*$/, '')} `;
    if (continued) continue;
    if (pending.trim() !== '') logical.push(pending.trim().replace(/\s+/g, ' '));
    pending = '';
  }
  const args = new Map<string, string>();
  const stages: { from: string; name: string | undefined; instructions: Instruction[] }[] = [];
  for (const line of logical) {
    const [keyword = '', ...rest] = line.split(' ');
    const instruction = { keyword: keyword.toUpperCase(), args: rest.join(' ') };
    if (instruction.keyword === 'FROM') {
      const [from = '', as, name] = rest;
      stages.push({ from, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else if (stages.length === 0 && instruction.keyword === 'ARG') {
      const [key = '', value = ''] = instruction.args.split('=');
      args.set(key, value);
    } else {
      stages.at(-1)?.instructions.push(instruction);
    }
  }
  return { args, stages };
}

/** ${NAME} from the ARG defaults, or the build args given. */
function substitute(text: string, file: Dockerfile, buildArgs: Record<string, string>): string {
  return text.replace(/\$\{(\w+)\}/g, (_all, name: string) => buildArgs[name] ?? file.args.get(name) ?? '');
}

function stage(file: Dockerfile, name: string): Stage {
  const found = file.stages.find((candidate) => candidate.name === name);
  assert.ok(found, `the Dockerfile has a stage "${name}"`);
  return found;
}

/** The final stage and the stages it is built on (base first), for a build-arg VARIANT. */
function runtimeChain(file: Dockerfile, buildArgs: Record<string, string> = {}): Stage[] {
  const chain = [file.stages.at(-1) as Stage];
  for (;;) {
    const base = substitute(chain[0]?.from ?? '', file, buildArgs);
    const parent = file.stages.find((candidate) => candidate.name === base);
    if (!parent) return chain;
    chain.unshift(parent);
  }
}

const instructions = (stages: readonly Stage[], keyword: string): string[] =>
  stages.flatMap((one) => one.instructions.filter((i) => i.keyword === keyword).map((i) => i.args));

/** `ENV A=1 B="two words"` → { A: '1', B: 'two words' }. */
function parseEnv(stages: readonly Stage[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of instructions(stages, 'ENV')) {
    for (const [, key, quoted, plain] of line.matchAll(/(\w+)=(?:"([^"]*)"|(\S*))/g)) {
      env[key as string] = quoted ?? plain ?? '';
    }
  }
  return env;
}

/** The JSON (exec) form of ENTRYPOINT or CMD; the shell form would put a shell between the signals and Node. */
function execForm(stages: readonly Stage[], keyword: 'ENTRYPOINT' | 'CMD'): string[] {
  const line = instructions(stages, keyword).at(-1);
  assert.ok(line, `the image has a ${keyword}`);
  return JSON.parse(line) as string[];
}

interface Copy {
  readonly from: string | undefined;
  readonly sources: readonly string[];
  /** Absolute, resolved against the WORKDIR of its line. */
  readonly dest: string;
}

function copies(one: Stage, initialWorkdir = '/'): Copy[] {
  let workdir = initialWorkdir;
  const found: Copy[] = [];
  for (const { keyword, args } of one.instructions) {
    if (keyword === 'WORKDIR') workdir = posix.resolve(workdir, args);
    if (keyword !== 'COPY') continue;
    const words = args.split(' ');
    const from = words.find((word) => word.startsWith('--from='))?.slice('--from='.length);
    const paths = words.filter((word) => !word.startsWith('--'));
    const dest = paths.pop() as string;
    found.push({ from, sources: paths, dest: posix.resolve(workdir, dest) + (dest.endsWith('/') ? '/' : '') });
  }
  return found;
}

function workdirOf(one: Stage): string {
  return instructions([one], 'WORKDIR').reduce((dir, next) => posix.resolve(dir, next), '/');
}

/**
 * Lays out in `app` what the runtime stage puts in the package folder: its COPY lines, from
 * this checkout (the build context) or this checkout's dist/ (what the build stage makes with
 * the same `npm run build`). `npm ci --omit=dev` becomes a link to this checkout's
 * node_modules, from the same package-lock (a superset: dev dependencies too).
 */
async function layOutImage(file: Dockerfile, appRoot: string, app: string): Promise<void> {
  const build = stage(file, 'build');
  const buildRoot = workdirOf(build);
  const [runtime] = runtimeChain(file).slice(-1);
  for (const copy of copies(runtime as Stage)) {
    assert.ok(copy.dest.startsWith(appRoot), `${copy.dest} is inside ${appRoot}`);
    for (const source of copy.sources) {
      let local: string;
      if (copy.from === 'build') {
        assert.ok(source.startsWith(`${buildRoot}/`), `${source} comes from the build's package folder`);
        local = join(REPO, source.slice(buildRoot.length + 1));
      } else {
        assert.equal(copy.from, undefined, 'the runtime copies only from the context and the build stage');
        local = join(REPO, source);
      }
      const into = join(app, copy.dest.slice(appRoot.length));
      const isFolder = (await stat(local)).isDirectory();
      const target =
        isFolder || !(copy.dest.endsWith('/') || copy.sources.length > 1) ? into : join(into, basename(source));
      await mkdir(dirname(target), { recursive: true });
      await cp(local, target, { recursive: true });
    }
  }
  await symlink(join(REPO, 'node_modules'), join(app, 'node_modules'), 'dir');
}

/** The ENTRYPOINT: `node`, the serving V8 flags, then the CLI's script (also `batchserve` on PATH). */
function entrypoint(file: Dockerfile): { nodeFlags: string[]; script: string } {
  const [node, ...rest] = execForm(runtimeChain(file), 'ENTRYPOINT');
  assert.equal(node, 'node');
  const script = rest.at(-1);
  assert.ok(script, 'the ENTRYPOINT names the CLI script');
  return { nodeFlags: rest.slice(0, -1), script };
}

/** `ln -s <target> /usr/local/bin/batchserve`: what `batchserve` on the image's PATH runs. */
function linkedScript(file: Dockerfile): string {
  const runs = instructions(runtimeChain(file), 'RUN').join(' ');
  const link = /ln -s (\S+) \/usr\/local\/bin\/batchserve(?:\s|$)/.exec(runs)?.[1];
  assert.ok(link, 'batchserve is linked onto PATH in /usr/local/bin');
  return link;
}

/** .dockerignore's rules as this file uses them: `*` and plain top-level names, `!` re-includes. */
async function dockerIgnored(): Promise<(path: string) => boolean> {
  const rules = (await readFile(join(REPO, '.dockerignore'), 'utf8'))
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const include = line.startsWith('!');
      const pattern = line.replace(/^!/, '').replace(/\/$/, '');
      assert.match(pattern, /^(\*|[\w.-]+)$/, `.dockerignore rule "${line}" is one this test understands`);
      return { include, pattern };
    });
  return (path) => {
    let ignored = false;
    for (const { include, pattern } of rules) {
      if (pattern === '*' || path === pattern || path.startsWith(`${pattern}/`)) ignored = !include;
    }
    return ignored;
  };
}

const readDockerfile = async (): Promise<Dockerfile> =>
  parseDockerfile(await readFile(join(REPO, 'Dockerfile'), 'utf8'));

// --- rehearsals ----------------------------------------------------------------------------

/** A store of affine v1 and v2, and the same model as one .mar file. */
async function stores(t: TestContext): Promise<{ folder: string; single: string }> {
  const dir = await tempDir(t);
  const folder = join(dir, 'models');
  await mkdir(folder);
  await rename(await packAffine(join(dir, 'v1'), { version: '1' }), join(folder, 'affine-1.mar'));
  await rename(await packAffine(join(dir, 'v2'), { version: '2', offset: 5 }), join(folder, 'affine-2.mar'));
  const single = join(dir, 'single', 'affine.mar');
  await mkdir(dirname(single));
  await cp(join(folder, 'affine-2.mar'), single);
  // Readable by the image's user when the rehearsal runs as it.
  for (const path of [dir, folder, dirname(single)]) await chmod(path, 0o755);
  return { folder, single };
}

/** The image's package folder laid out in a temp folder, readable by any user. */
async function imageApp(
  t: TestContext,
  file: Dockerfile,
): Promise<{ app: string; appRoot: string; script: string; nodeFlags: string[] }> {
  const { script, nodeFlags } = entrypoint(file);
  const appRoot = posix.dirname(posix.dirname(script));
  const app = join(await tempDir(t), 'app');
  await layOutImage(file, appRoot, app);
  await chmod(dirname(app), 0o755);
  return { app, appRoot, script, nodeFlags };
}

/** Mapped: the container's paths to temp folders, its ports to free ones, as `docker run -v -p` does. */
async function rehearseMapped(
  t: TestContext,
  file: Dockerfile,
  args: readonly string[],
  store: string,
): Promise<Served & { tmp: string }> {
  const { app, appRoot, script, nodeFlags } = await imageApp(t, file);
  const tmp = await tempDir(t);
  const home = await tempDir(t);
  // One rule per value, the first that matches: the store's own path may start with /tmp.
  const rules: [RegExp, string][] = [
    [/^\/mnt\/models$/, store],
    [/^\/tmp\//, `${tmp}/`],
    [new RegExp(`^${appRoot}/`), `${app}/`],
  ];
  const map = (value: string): string => {
    const rule = rules.find(([pattern]) => pattern.test(value));
    return rule ? value.replace(rule[0], rule[1]) : value;
  };
  const portFlags = new Set(['--port', '--management-port', '--metrics-port', '--grpc-port']);
  const mappedArgs = args.map((arg, index) => (portFlags.has(args[index - 1] ?? '') ? '0' : map(arg)));
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    ...Object.fromEntries(Object.entries(parseEnv(runtimeChain(file))).map(([key, value]) => [key, map(value)])),
    // -p: the ports the args do not name.
    BATCHSERVE_PORT: '0',
    BATCHSERVE_MANAGEMENT_PORT: '0',
    BATCHSERVE_METRICS_PORT: '0',
    BATCHSERVE_GRPC_PORT: '0',
  };
  const served = await startServing(t, process.execPath, [...nodeFlags, map(script), ...mappedArgs], {
    env,
    cwd: home,
  });
  return { ...served, tmp };
}

const CONTAINER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * The container's view, as deploy/'s manifests run it, built with util-linux in a private
 * mount and network namespace: the store bound read-only on /mnt/models, the package folder on
 * its path, an empty tmpfs on /tmp, everything else read-only, loopback up, then the image's
 * USER, WORKDIR, ENV and command, exactly. Nothing outside the namespace sees these mounts.
 * This checkout (the app's node_modules link into it) and node's folder are held open first and,
 * where a covering mount hid them (a checkout under /tmp or /home), bound back read-only where
 * they were, so the rehearsal runs wherever the checkout and node are (through /proc/self/fd,
 * which mount must not resolve to the path it names: the covered one).
 */
const NAMESPACE_SCRIPT = `set -e
store=$1; app=$2; approot=$3; user=$4; home=$5; config=$6; repo=$7; nodedir=$8; shift 8
exec 3<"$repo" 4<"$nodedir"
ip link set lo up
mount -t tmpfs tmpfs /mnt && mkdir /mnt/models
mount --bind "$store" /mnt/models && mount -o remount,bind,ro /mnt/models
mount -t tmpfs tmpfs "$(dirname "$approot")" && mkdir "$approot"
mount --bind "$app" "$approot" && mount -o remount,bind,ro "$approot"
mount -t tmpfs tmpfs "$(dirname "$home")" && mkdir "$home" && chown "$user" "$home"
mount -t tmpfs -o mode=1777 tmpfs /tmp
if [ -n "$config" ]; then printf '%s' "$config" > /tmp/server.yaml; fi
for held in "3 $repo" "4 $nodedir"; do
  fd=\${held%% *}; path=\${held#* }
  [ "$(stat -c %d:%i "$path" 2>/dev/null)" = "$(stat -L -c %d:%i /proc/self/fd/$fd)" ] && continue
  mkdir -p "$path" && mount --no-canonicalize --bind /proc/self/fd/$fd "$path" && mount -o remount,bind,ro "$path"
done
exec 3<&- 4<&-
# readOnlyRootFilesystem, with an emptyDir on /tmp: the only place left to write.
mount -o remount,bind,ro /
for dir in /mnt "$(dirname "$approot")" "$(dirname "$home")"; do mount -o remount,ro "$dir"; done
cd "$home"
# Node hands its coverage folder (npm test) to every child; the image has none, and it is read-only here.
unset NODE_V8_COVERAGE
exec setpriv --reuid "\${user%%:*}" --regid "\${user##*:}" --clear-groups "$@"
`;

/** Why this machine cannot build the container's namespaces (undefined: it can). */
function whyNoNamespaces(): string | undefined {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'needs Linux and root (unshare, mount)';
  const probe = spawnSync(
    'unshare',
    ['--mount', '--net', '--', 'sh', '-c', 'ip link set lo up && mount -t tmpfs tmpfs /mnt && command -v setpriv'],
    { stdio: 'ignore' },
  );
  return probe.status === 0 ? undefined : 'unshare --mount --net, ip or setpriv is not usable here';
}

/** Fails, saying why, where this machine cannot build the container's namespaces. */
function assertNamespaces(): void {
  const why = whyNoNamespaces();
  assert.equal(why, undefined, `the rehearsal needs a private mount and network namespace: ${why}`);
}

interface Contained extends Served {
  /** HTTP calls made in turn from inside the container's network namespace. */
  calls(requests: readonly Request[]): Promise<JsonAnswer[]>;
  /** `grpc.health.v1.Health/Check` of the whole server, from inside the namespace: its status. */
  grpcHealth(address: string): Promise<string>;
}

type Request = readonly [url: string, init?: { method?: string; body?: string; headers?: Record<string, string> }];

interface JsonAnswer {
  status: number;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read whatever the route answers
}

/** Fetches, one after the other, from inside the namespace of a pid (nsenter); prints statuses and bodies. */
const FETCH = `(async () => {
  const answers = [];
  for (const [url, init] of JSON.parse(process.argv[1])) {
    const res = await fetch(url, init);
    const text = await res.text();
    let body = text;
    try { body = JSON.parse(text); } catch {}
    answers.push({ status: res.status, body });
  }
  process.stdout.write(JSON.stringify(answers));
})();`;

/** Health/Check from inside the namespace, with this checkout's grpc-js; prints the status. */
const GRPC_HEALTH = `const [grpcJs, protoLoader, healthCheck, address] = process.argv.slice(1);
const grpc = require(grpcJs);
const { protoPath } = require(healthCheck);
const definition = grpc.loadPackageDefinition(require(protoLoader).loadSync(protoPath, { enums: String }));
const client = new definition.grpc.health.v1.Health(address, grpc.credentials.createInsecure());
client.Check({ service: '' }, (error, answer) => {
  if (error) throw error;
  process.stdout.write(answer.status);
  client.close();
});`;

async function rehearseInNamespace(
  t: TestContext,
  file: Dockerfile,
  args: readonly string[],
  store: string,
  extraEnv: Record<string, string> = {},
  config = '',
): Promise<Contained> {
  const { app, appRoot, script, nodeFlags } = await imageApp(t, file);
  const chain = runtimeChain(file);
  const user = instructions(chain, 'USER').at(-1) ?? '0:0';
  const home = workdirOf(chain.at(-1) as Stage);
  const env = { PATH: CONTAINER_PATH, HOME: home, ...parseEnv(chain), ...extraEnv };
  const served = await startServing(
    t,
    'unshare',
    [
      '--mount',
      '--net',
      '--',
      'sh',
      '-c',
      NAMESPACE_SCRIPT,
      'sh',
      store,
      app,
      appRoot,
      user.includes(':') ? user : `${user}:${user}`,
      home,
      config,
      REPO,
      dirname(process.execPath),
      // The ENTRYPOINT, with this machine's node.
      process.execPath,
      ...nodeFlags,
      script,
      ...args,
    ],
    { env },
  );
  const pid = String(served.process.pid);
  return {
    ...served,
    calls: async (requests) => {
      const run = await runChild(
        'nsenter',
        ['--target', pid, '--net', '--', process.execPath, '-e', FETCH, JSON.stringify(requests)],
        { env: cleanEnv() },
      );
      assert.equal(run.code, 0, run.stderr);
      return JSON.parse(run.stdout) as JsonAnswer[];
    },
    grpcHealth: async (address) => {
      const modules = ['@grpc/grpc-js', '@grpc/proto-loader', 'grpc-health-check'].map((name) => require.resolve(name));
      const run = await runChild(
        'nsenter',
        ['--target', pid, '--net', '--', process.execPath, '-e', GRPC_HEALTH, ...modules, address],
        { env: cleanEnv() },
      );
      assert.equal(run.code, 0, run.stderr);
      return run.stdout;
    },
  };
}

interface StartupRecord {
  readonly msg: string;
  readonly host: string;
  readonly urls: { inference: string; management: string; metrics: string; grpc: string };
  readonly keyFile?: string;
  readonly workDir: string;
  readonly models: readonly { name: string; version: string; archive: string }[];
}

/** The start-up line: the container's stdout is a pipe, so it is one JSON log line. */
function startupRecord(served: Served): StartupRecord {
  const lines = jsonLines(served.stdout());
  assert.equal(lines.length, 1, 'stdout holds the start-up line alone');
  assert.equal(lines[0]?.msg, 'serving');
  return lines[0] as unknown as StartupRecord;
}

const INFER_BODY = affineRequest([[1, 2, 3, 4]]);
const INFER = { method: 'POST', body: INFER_BODY, headers: { 'content-type': 'application/json' } };

// --- tests ---------------------------------------------------------------------------------

test('the Dockerfile: node 20 slim, npm ci then build, production dependencies, a CUDA 12 variant, non-root, the CLI under the serving flags as ENTRYPOINT', async () => {
  const file = await readDockerfile();
  assert.match(file.args.get('NODE_IMAGE') ?? '', /^node:20(\.\d+)*-(bookworm-)?slim$/);
  assert.match(file.args.get('CUDA_IMAGE') ?? '', /^nvidia\/cuda:12\.[\d.]+-cudnn-runtime-ubuntu[\d.]+$/);
  assert.equal(file.args.get('VARIANT'), 'cpu');

  const build = stage(file, 'build');
  assert.equal(build.from, '${NODE_IMAGE}');
  const buildRuns = instructions([build], 'RUN');
  assert.ok(
    buildRuns.some((run) => /^npm ci\b/.test(run)) && buildRuns.includes('npm run build'),
    buildRuns.join('\n'),
  );

  const cpu = runtimeChain(file);
  const cuda = runtimeChain(file, { VARIANT: 'cuda' });
  assert.equal(substitute(cpu[0]?.from ?? '', file, {}), file.args.get('NODE_IMAGE'));
  assert.equal(substitute(cuda[0]?.from ?? '', file, {}), file.args.get('CUDA_IMAGE'));
  const install = instructions(cpu, 'RUN').find((run) => run.includes('npm ci --omit=dev')) ?? '';
  assert.ok(install, 'the runtime installs production dependencies only');
  // The CUDA variant downloads onnxruntime's CUDA providers; .npmrc keeps the CPU build from it.
  assert.match(
    install,
    /if \[ "\$VARIANT" = cuda \]; then export ONNXRUNTIME_NODE_INSTALL=cuda12; fi && npm rebuild [^&]*onnxruntime-node/,
  );
  assert.match(await readFile(join(REPO, '.npmrc'), 'utf8'), /^onnxruntime-node-install=skip$/m);

  const user = instructions(cpu, 'USER').at(-1) ?? '';
  assert.match(user, /^\d+(:\d+)?$/, 'USER is numeric, so runAsNonRoot can check it');
  assert.notEqual(Number(user.split(':')[0]), 0);
  assert.deepEqual(instructions(cpu, 'EXPOSE').join(' ').split(' ').sort(), ['8001', '8080', '8081', '8082']);
  // Node with the serving flags, as the bin's shebang starts it.
  assert.deepEqual(entrypoint(file).nodeFlags, [...SERVING_NODE_FLAGS]);
  assert.equal(execForm(cpu, 'CMD')[0], 'serve');
  assert.equal(parseEnv(cpu).BATCHSERVE_HOST, '0.0.0.0');
  // The link points into the folder where the package (package.json) was installed.
  const manifest = copies(stage(file, 'runtime')).find((copy) => copy.sources.includes('package.json'));
  assert.equal(entrypoint(file).script, `${manifest?.dest.replace(/\/$/, '')}/bin/batchserve.js`);
  assert.equal(linkedScript(file), entrypoint(file).script, '`batchserve` on PATH is the same CLI');
});

test('.dockerignore sends exactly what the Dockerfile copies from the context, and keeps out builds, keys and .git', async () => {
  const file = await readDockerfile();
  const ignored = await dockerIgnored();
  const fromContext = file.stages.flatMap((one) => copies(one)).filter((copy) => copy.from === undefined);
  for (const source of fromContext.flatMap((copy) => copy.sources)) {
    assert.equal(ignored(source), false, `${source} reaches the build`);
    await stat(join(REPO, source));
  }
  for (const path of ['node_modules', 'dist', 'reports', 'coverage', 'demo-out', '.git', 'batchserve.key', 'test']) {
    assert.equal(ignored(path), true, `${path} stays out of the build context`);
  }
});

test("deploy/'s ServingRuntime passes the container exactly these args, as the image's user", async () => {
  const text = await readFile(join(REPO, 'deploy', 'kserve', 'cluster-serving-runtime.yaml'), 'utf8');
  const { parse } = await import('yaml');
  const runtime = parse(text) as {
    spec: { containers: { args: string[]; securityContext?: { runAsUser?: number } }[] };
  };
  const [container] = runtime.spec.containers;
  assert.deepEqual(container?.args, KSERVE_ARGS);
  const user = instructions(runtimeChain(await readDockerfile()), 'USER').at(-1) ?? '';
  assert.equal(container?.securityContext?.runAsUser, Number(user.split(':')[0]));
});

test("the image's ENTRYPOINT, CMD and ENV serve a model store (paths and ports mapped)", async (t) => {
  const file = await readDockerfile();
  const { folder } = await stores(t);
  const before = await snapshotTree(folder);
  const chain = runtimeChain(file);
  const served = await rehearseMapped(t, file, execForm(chain, 'CMD'), folder);
  const record = startupRecord(served);
  assert.deepEqual(
    record.models.map((model) => `${model.name}:${model.version}`),
    ['affine:1', 'affine:2'],
  );
  assert.equal(record.host, '0.0.0.0');
  assert.equal(record.keyFile, join(served.tmp, 'batchserve.key'));
  assert.ok(record.workDir.startsWith(join(served.tmp, 'batchserve', `batchserve-${served.process.pid}-`)));
  const answer = await call(`${served.urls.inference.replace('0.0.0.0', '127.0.0.1')}/v2/models/affine/infer`, {
    body: INFER_BODY,
  });
  assert.equal(answer.status, 200);
  assert.deepEqual(answer.body.outputs[0].data, [3, 5, 7, 9], 'the first version loaded is the default');
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  jsonLines(served.stderr());
  assert.deepEqual(await readdir(join(served.tmp, 'batchserve')), [], 'the work folder is gone after the drain');
  assert.deepEqual(await snapshotTree(folder), before, 'nothing was written into the model store');
});

test("KServe's container args serve a store that is one .mar file under the InferenceService's name (paths and ports mapped)", async (t) => {
  const file = await readDockerfile();
  const { single } = await stores(t);
  const before = await snapshotTree(dirname(single));
  const args = KSERVE_ARGS.map((arg) => arg.replace('{{.Name}}', ISVC_NAME));
  const served = await rehearseMapped(t, file, args, single);
  const record = startupRecord(served);
  assert.deepEqual(
    record.models.map((model) => `${model.name}:${model.version}`),
    [`${ISVC_NAME}:2`],
  );
  const base = served.urls.inference.replace('0.0.0.0', '127.0.0.1');
  const answer = await call(`${base}/v2/models/${ISVC_NAME}/infer`, { body: INFER_BODY });
  assert.equal(answer.status, 200);
  assert.equal(answer.body.model_name, ISVC_NAME);
  assert.deepEqual(answer.body.outputs[0].data, [7, 9, 11, 13]);
  assert.equal((await call(`${base}/v2/models/affine`)).status, 404, "the archive's own name is not served");
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  assert.deepEqual(await snapshotTree(dirname(single)), before, 'nothing was written next to the archive');
});

test("exactly KServe's container args, in a namespace like the container's: read-only /mnt/models, /tmp, USER, ports 8080-8082 and 8001", async (t) => {
  assertNamespaces();
  const file = await readDockerfile();
  const { folder } = await stores(t);
  const before = await snapshotTree(folder);
  const args = KSERVE_ARGS.map((arg) => arg.replace('{{.Name}}', ISVC_NAME));
  const served = await rehearseInNamespace(t, file, args, folder);
  const record = startupRecord(served);
  assert.deepEqual(record.urls, {
    inference: 'http://0.0.0.0:8080',
    management: 'http://0.0.0.0:8081',
    metrics: 'http://0.0.0.0:8082/metrics',
    grpc: 'grpc://0.0.0.0:8001',
  });
  assert.equal(record.keyFile, '/tmp/batchserve.key');
  assert.ok(record.workDir.startsWith('/tmp/batchserve/batchserve-'));
  assert.deepEqual(
    record.models.map((model) => [model.name, model.version, model.archive]),
    [
      [ISVC_NAME, '1', '/mnt/models/affine-1.mar'],
      [ISVC_NAME, '2', '/mnt/models/affine-2.mar'],
    ],
  );
  const [ready, answer, v1, metrics, management] = await served.calls([
    ['http://127.0.0.1:8080/v2/health/ready'],
    [`http://127.0.0.1:8080/v2/models/${ISVC_NAME}/infer`, INFER],
    [`http://127.0.0.1:8080/v2/models/${ISVC_NAME}/versions/1/infer`, INFER],
    ['http://127.0.0.1:8082/metrics'],
    ['http://127.0.0.1:8081/models'],
  ]);
  assert.equal(ready?.status, 200);
  assert.equal(answer?.status, 200);
  assert.equal(answer?.body.model_name, ISVC_NAME);
  assert.equal(answer?.body.model_version, '1', 'the first version loaded is the default');
  assert.deepEqual(v1?.body.outputs[0].data, [3, 5, 7, 9]);
  assert.match(metrics?.body, new RegExp(`batchserve_requests_total\\{[^}]*model="${ISVC_NAME}"`));
  assert.equal(management?.status, 401, 'the management API wants the token');
  assert.equal(await served.grpcHealth('127.0.0.1:8001'), 'SERVING');
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  jsonLines(served.stderr());
  assert.deepEqual(await snapshotTree(folder), before, 'nothing was written into the model store');
});

test("the image's CMD, exactly, in the container's namespace: register-by-URL into the read-only /mnt/models is refused before any fetch", async (t) => {
  assertNamespaces();
  const file = await readDockerfile();
  const { folder } = await stores(t);
  const before = await snapshotTree(folder);
  // As `docker run -e BATCHSERVE_CONFIG=…` with a mounted file: downloads allowed from anywhere.
  const config = "allowed_urls: ['^http://127\\.0\\.0\\.1:9/']\nauth:\n  token: t0ken\n";
  const chain = runtimeChain(file);
  const served = await rehearseInNamespace(
    t,
    file,
    execForm(chain, 'CMD'),
    folder,
    { BATCHSERVE_CONFIG: '/tmp/server.yaml' },
    config,
  );
  assert.equal(startupRecord(served).urls.inference, 'http://0.0.0.0:8080');
  const [refused, infer] = await served.calls([
    [
      `http://127.0.0.1:8081/models?url=${encodeURIComponent('http://127.0.0.1:9/models/other.mar')}`,
      { method: 'POST', headers: { authorization: 'Bearer t0ken' } },
    ],
    ['http://127.0.0.1:8080/v2/models/affine/infer', INFER],
  ]);
  assert.equal(refused?.status, 403);
  assert.equal(refused?.body.code, 'BS_ERR_MODEL_STORE_READ_ONLY');
  assert.equal(infer?.status, 200);
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  assert.deepEqual(await snapshotTree(folder), before);
});
