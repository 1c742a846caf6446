import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ApiAddresses } from '../../src/server/server.js';
import { parseStartupUrls } from '../../src/server/startup-block.js';
import { affine, affineRequest, call, packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { parseExposition, samplesOf } from '../metrics/prometheus-text.js';
import { waitUntil, within } from '../server/handler-gate.js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { SERVING_NODE_FLAGS } from '../../src/core/serving-node-flags.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));
const FREE_PORTS = ['--port', '0', '--management-port', '0', '--metrics-port', '0', '--grpc-port', '0'];

interface Served {
  child: ChildProcess;
  urls: ApiAddresses;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

/**
 * Starts `batchserve serve` and waits for its start-up block: `node bin/batchserve.js serve`,
 * or with `installed` the bin itself, as the link npm puts on PATH runs it (its shebang starts Node).
 */
async function serve(args: string[], { installed = false } = {}): Promise<Served> {
  const serveArgs = ['serve', ...FREE_PORTS, ...args];
  const [command, commandArgs] = installed ? [BIN, serveArgs] : [process.execPath, [BIN, ...serveArgs]];
  const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close', not 'exit': only then has all of stderr been read.
  const exit = new Promise<number | null>((done) => child.once('close', (code) => done(code)));
  const urls = await new Promise<ApiAddresses>((ready, fail) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const parsed = parseStartupUrls(stdout);
      if (parsed) ready(parsed);
    });
    void exit.then((code) => fail(new Error(`serve exited with ${code}: ${stderr}`)));
  });
  return { child, urls, stdout: () => stdout, stderr: () => stderr, exit };
}

/** A gauge of the served affine model, scraped from the child (the start-up block's URL names the route). */
async function affineGauge(urls: ApiAddresses, name: string): Promise<number | undefined> {
  const text = ((await call(urls.metrics)).body as Buffer).toString('utf8');
  return samplesOf(parseExposition(text), name, { model: 'affine' })[0]?.value;
}

test('SIGTERM drains: admitted requests are answered at once, then the process exits 0', async (t) => {
  const dir = await tempDir(t);
  // Queued requests would wait out the 60 s delay, past the 20 s drain timeout, unless the
  // drain sends them at once: exit code 0 is the proof, with no clock read here.
  const archive = await packAffine(dir, { config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 60s\n' });
  const served = await serve(['--models', `affine=${archive}`, '--no-auth', '--drain-timeout', '20s']);
  t.after(() => served.child.kill('SIGKILL'));
  assert.equal((await call(`${served.urls.inference}/v2/health/ready`)).status, 200);
  // stderr and stdout are separate pipes: the warning may arrive after the start-up block.
  await waitUntil(() => /authentication is disabled/.test(served.stderr()), 'the --no-auth warning is logged');

  const url = `${served.urls.inference}/v2/models/affine/infer`;
  const rows = [
    [1, 2, 3, 4],
    [5, 6, 7, 8],
    [9, 10, 11, 12],
  ];
  const pending = rows.map((row) => call(url, { body: affineRequest([row]) }));
  await waitUntil(async () => (await affineGauge(served.urls, 'batchserve_queue_rows')) === 3, 'all 3 are queued');
  served.child.kill('SIGTERM');
  const answers = await Promise.all(pending);
  answers.forEach((answer, index) => {
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body.outputs[0].data, affine([rows[index] as number[]]));
  });
  assert.equal(await served.exit, 0);
  assert.match(served.stderr(), /drained/);
  await assert.rejects(call(`${served.urls.inference}/v2/health/live`), 'no longer listening');
});

test("serve is one process, under the serving V8 flag; one started right after a kill -9 removes the killed one's work folder", async (t) => {
  const dir = await tempDir(t);
  const workDir = join(dir, 'work');
  const args = ['--models', `affine=${await packAffine(dir)}`, '--no-auth', '--work-dir', workDir];
  const start = async (): Promise<Served> => {
    const served = await serve(args, { installed: true });
    t.after(() => served.child.kill('SIGKILL'));
    return served;
  };
  const folders = (): Promise<string[]> => readdir(workDir);
  let served = await start();
  for (let restart = 1; restart <= 3; restart++) {
    const [folder, ...others] = await folders();
    assert.deepEqual(others, [], `one folder: ${folder}, ${others.join(', ')}`);
    served.child.kill('SIGKILL');
    // At once: no wait for the killed server's exit.
    const next = await start();
    assert.deepEqual(
      (await folders()).filter((name) => name === folder),
      [],
      `restart ${restart}: the killed server's folder is gone`,
    );
    assert.equal(await served.exit, null, 'killed by the signal');
    served = next;
  }
  // The pid in the start-up line is the server's own: the process the bin started, whose folder it is.
  const { pid } = served.child;
  assert.equal(Number(/"pid":(\d+)/.exec(served.stdout())?.[1]), pid);
  assert.equal((await folders()).filter((name) => name.startsWith(`batchserve-${pid}-`)).length, 1);
  const commandLine = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => undefined);
  if (commandLine !== undefined) {
    assert.deepEqual(
      commandLine.split('\0').filter((arg) => arg.startsWith('--initial-old')),
      [...SERVING_NODE_FLAGS],
      'under the flag',
    );
  }
  served.child.kill('SIGINT');
  assert.equal(await served.exit, 0);
  assert.deepEqual(await folders(), [], 'a server that exits removes its own');
});

test('a drain that runs out of time exits 1 at its deadline, without waiting for a stuck handler', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir, {
    handlerSource: `export async function inference(inputs, context) {
  if (inputs.x.data[0] === 7) await new Promise((resolve) => setTimeout(resolve, 60_000));
  return context.builtins.tensor.inference(inputs, context);
}
`,
  });
  const served = await serve(['--models', `affine=${archive}`, '--no-auth', '--drain-timeout', '500ms']);
  t.after(() => served.child.kill('SIGKILL'));
  const stuck = call(`${served.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[7, 0, 0, 0]]) }).then(
    (answer) => answer.status,
    () => 'connection closed',
  );
  await waitUntil(async () => (await affineGauge(served.urls, 'batchserve_instances_busy')) === 1, 'the handler runs');
  served.child.kill('SIGTERM');
  // The handler holds its batch for 60 s: exiting well before that is exiting at the deadline.
  assert.equal(await within(served.exit, 20_000, 'serve exited'), 1);
  assert.equal(await stuck, 'connection closed', 'the stuck request was never answered');
  const line = served
    .stderr()
    .split('\n')
    .find((text) => text.includes('drain timeout passed with requests unanswered'));
  assert.ok(line, served.stderr());
  assert.equal(JSON.parse(line).timeoutMs, 500);
});

test('the management token is generated into a 0600 key file and enforced', async (t) => {
  const dir = await tempDir(t);
  const keyFile = join(dir, 'mgmt.key');
  const served = await serve([
    '--models',
    `affine=${await packAffine(dir)}`,
    '--key-file',
    keyFile,
    '--log-level',
    'warn',
  ]);
  t.after(() => served.child.kill('SIGKILL'));
  assert.equal((await stat(keyFile)).mode & 0o777, 0o600);
  const token = (await readFile(keyFile, 'utf8')).trim();
  assert.ok(token.length >= 32);
  assert.equal((await call(`${served.urls.management}/models`)).status, 401);
  assert.equal(
    (await call(`${served.urls.management}/models`, { headers: { authorization: `Bearer ${token}` } })).status,
    200,
  );
  served.child.kill('SIGINT');
  assert.equal(await served.exit, 0);
});

test('serve refuses bad start-up input with one line and a non-zero exit', async (t) => {
  const dir = await tempDir(t);
  const run = (args: string[]): Promise<{ code: number | null; stderr: string }> =>
    new Promise((done) => {
      const child = spawn(process.execPath, [BIN, 'serve', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.once('close', (code) => done({ code, stderr }));
    });
  const nothing = await run([]);
  assert.equal(nothing.code, 2);
  assert.match(nothing.stderr, /nothing to serve/);
  // Free ports, no token file, no logs: only the refusal on stderr.
  const quiet = [
    '--port',
    '0',
    '--management-port',
    '0',
    '--metrics-port',
    '0',
    '--grpc-port',
    '0',
    '--no-auth',
    '--log-level',
    'silent',
  ];
  const missing = await run(['--models', `x=${join(dir, 'missing.mar')}`, ...quiet]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /BS_ERR_INPUT_FILE/);
  const wrongName = await run(['--models', `other=${await packAffine(dir)}`, ...quiet]);
  assert.equal(wrongName.code, 2);
  assert.match(wrongName.stderr, /holds model "affine"/);
  const badPort = await run(['--models', 'a=b.mar', '--port', 'eighty']);
  assert.equal(badPort.code, 2);
});

test('serve --config reads a server.yaml; flags override it; a bad key is refused', async (t) => {
  const dir = await tempDir(t);
  const { writeFile } = await import('node:fs/promises');
  const config = join(dir, 'server.yaml');
  await writeFile(
    config,
    `models: ["affine=${await packAffine(dir)}"]\nport: 0\nmanagement_port: 0\nmetrics_port: 0\nlog_level: warn\nauth:\n  token: from-config\n`,
  );
  const served = await serve(['--config', config, '--max-request-size', '100']);
  t.after(() => served.child.kill('SIGKILL'));
  assert.equal(
    (await call(`${served.urls.management}/models`, { headers: { authorization: 'Bearer from-config' } })).status,
    200,
  );
  const tooLarge = await call(`${served.urls.inference}/v2/models/affine/infer`, {
    body: affineRequest([[1, 2, 3, 4]]) + ' '.repeat(100),
  });
  assert.equal(tooLarge.status, 413, 'the flag overrode the default request size');
  served.child.kill('SIGTERM');
  assert.equal(await served.exit, 0);

  await writeFile(config, 'port: 0\nmodels: []\nmax_batch_delay: 5\n');
  const bad = spawn(process.execPath, [BIN, 'serve', '--config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  bad.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  assert.equal(await new Promise((done) => bad.once('close', done)), 1);
  assert.match(stderr, /server\.yaml: max_batch_delay: unknown key/);
});

test('SIGTERM with open gRPC streams: admitted requests are answered, streams end with UNAVAILABLE, new calls are refused, exit 0', async (t) => {
  const dir = await tempDir(t);
  // As above: only the drain sends the queued requests before their 60 s delay.
  const archive = await packAffine(dir, { config: 'max_batch_size: 8\ndynamic_batching:\n  max_queue_delay: 60s\n' });
  const served = await serve(['--models', `affine=${archive}`, '--no-auth', '--drain-timeout', '20s']);
  t.after(() => served.child.kill('SIGKILL'));
  const grpc = new InferenceClient(served.urls.grpc);
  t.after(() => grpc.close());
  const request = (value: number, id: string) => ({
    model_name: 'affine',
    id,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
    raw_input_contents: [Buffer.from(new Float32Array([value, 0, 0, 0]).buffer)],
  });
  const stream = grpc.stream();
  const answers: { error: string; id: string }[] = [];
  stream.on('data', (message) => answers.push({ error: message.error_message, id: message.infer_response.id }));
  // The client never finishes its side: the drain ends the stream, with UNAVAILABLE.
  const ended = new Promise<{ code: number }>((done) => stream.on('error', done));
  stream.write(request(1, 's1'));
  stream.write(request(2, 's2'));
  const unary = grpc.call('ModelInfer', request(3, 'u1'));
  await waitUntil(async () => (await affineGauge(served.urls, 'batchserve_queue_rows')) === 3, 'all 3 are queued');
  served.child.kill('SIGTERM');
  const cut = await within(ended, 20_000, 'the stream ends once its answers are written');
  assert.equal(cut.code, 14, 'UNAVAILABLE: what it would send next is not run');
  assert.deepEqual(
    answers.sort((a, b) => a.id.localeCompare(b.id)),
    [
      { error: '', id: 's1' },
      { error: '', id: 's2' },
    ],
  );
  assert.equal((await unary).error, undefined);
  assert.equal(await served.exit, 0);
  const after = await grpc.call('ModelInfer', request(4, 'late'));
  assert.equal(after.error?.code, 14, 'UNAVAILABLE: nothing listens any more');
});

test("serve --ts-config reads TorchServe's config.properties: model_store and load_models load, keys done elsewhere are named at start", async (t) => {
  const dir = await tempDir(t);
  await packAffine(dir);
  const properties = join(dir, 'config.properties');
  const { writeFile } = await import('node:fs/promises');
  await writeFile(
    properties,
    [
      '# TorchServe settings',
      'inference_address=http://127.0.0.1:8080',
      'model_store=' + join(dir, 'store'),
      'load_models=affine.mar',
      'job_queue_size=100',
      'enable_envvars_config=true',
      '',
    ].join('\n'),
  );
  // The ports are the flags' (0): flags win over the file.
  const served = await serve(['--ts-config', properties, '--key-file', join(dir, 'key'), '--log-level', 'warn']);
  t.after(() => served.child.kill('SIGKILL'));
  const answer = await call(`${served.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.deepEqual(answer.body.outputs[0].data, affine([[1, 2, 3, 4]]));
  await waitUntil(() => /enable_envvars_config/.test(served.stderr()), 'the unused key is named');
  assert.match(
    served.stderr(),
    /config.properties: job_queue_size is not read: it is each archive's dynamic_batching.max_queue_size/,
  );
  assert.match(served.stderr(), /config.properties: enable_envvars_config is not used by batchserve/);
});
