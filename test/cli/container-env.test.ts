import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Command } from 'commander';
import { registerServe } from '../../src/cli/serve-command.js';
import { serverConfigSchema } from '../../src/server/server-config.js';
import { affineRequest, call, packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { BIN, cleanEnv, jsonLines, runChild, serveChild, spawnChild } from './container-child.js';

/** The rule the README and `serve --help` state: `--model-store` → BATCHSERVE_MODEL_STORE. */
const variableFor = (long: string): string => `BATCHSERVE_${long.slice(2).toUpperCase().replaceAll('-', '_')}`;

function serveCommand(): Command {
  const program = new Command('batchserve');
  registerServe(program);
  return program.commands.find((command) => command.name() === 'serve') as Command;
}

test('every serve flag has its BATCHSERVE_* variable, and --help names each', () => {
  const serve = serveCommand();
  // Help wraps its columns: compare with the line breaks taken out.
  const help = serve.helpInformation().replace(/\s+/g, ' ');
  for (const option of serve.options) {
    const long = option.long as string;
    if (option.negate) {
      assert.equal(long, '--no-auth');
      assert.equal(option.envVar, undefined, 'a defined variable must not switch auth off whatever its value');
      assert.match(option.description, /BATCHSERVE_AUTH=false/);
      continue;
    }
    assert.equal(option.envVar, variableFor(long), long);
    assert.ok(help.includes(`(env: ${variableFor(long)})`), `--help names ${variableFor(long)}`);
  }
  // Every server.yaml key that is one setting has a flag, so a container can set it.
  const flags = new Set(serve.options.map((option) => option.long));
  const fileOnly = new Set(['allowed_urls', 'model_policies', 'auth', 'tls', 'tracing']);
  for (const key of Object.keys(serverConfigSchema.fields).filter((name) => !fileOnly.has(name))) {
    assert.ok(flags.has(`--${key.replaceAll('_', '-')}`), `server.yaml's ${key} has a flag`);
  }
  for (const key of Object.keys(serverConfigSchema.fields.tls.fields)) {
    assert.ok(flags.has(`--tls-${key.replaceAll('_', '-')}`), `server.yaml's tls.${key} has a flag`);
  }
  assert.ok(flags.has('--key-file') && flags.has('--no-auth'), 'auth.key_file and auth.enabled have theirs');
  assert.deepEqual(Object.keys(serverConfigSchema.fields.tracing.fields), ['otlp_endpoint', 'sample_ratio']);
  assert.ok(flags.has('--otlp-endpoint') && flags.has('--trace-sample-ratio'), 'the tracing keys have theirs');
});

test('variables set what flags set: a flag wins over its variable, a variable over server.yaml', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  const config = join(dir, 'server.yaml');
  await writeFile(config, 'max_request_size: 1000000\nmodel_control: explicit\nlog_level: debug\n');
  const served = await serveChild(t, ['--model-control', 'none'], {
    env: cleanEnv({
      BATCHSERVE_CONFIG: config,
      BATCHSERVE_MODEL_STORE: dirname(archive),
      BATCHSERVE_MODELS: 'all',
      BATCHSERVE_MAX_REQUEST_SIZE: '200',
      BATCHSERVE_MODEL_CONTROL: 'explicit',
      BATCHSERVE_LOG_LEVEL: 'warn',
      BATCHSERVE_AUTH: 'false',
      BATCHSERVE_STARTUP_FORMAT: 'text',
      BATCHSERVE_STATE_FILE: join(dir, 'state.json'),
      // The flags in serveChild (--port 0 …) win over these.
      BATCHSERVE_PORT: '1',
    }),
  });
  assert.match(served.stdout(), /^batchserve \S+ serving on 127\.0\.0\.1\n/, 'BATCHSERVE_STARTUP_FORMAT=text');
  const infer = `${served.urls.inference}/v2/models/affine/infer`;
  assert.equal((await call(infer, { body: affineRequest([[1, 2, 3, 4]]) })).status, 200);
  const tooLarge = await call(infer, { body: affineRequest([[1, 2, 3, 4]]) + ' '.repeat(200) });
  assert.equal(tooLarge.status, 413, 'BATCHSERVE_MAX_REQUEST_SIZE over the file');
  const load = await call(`${served.urls.inference}/v2/repository/models/affine/load`, { body: '{}' });
  assert.equal(load.status, 403, '--model-control none over BATCHSERVE_MODEL_CONTROL');
  assert.equal((await call(`${served.urls.management}/models`)).status, 200, 'BATCHSERVE_AUTH=false');
  served.process.kill('SIGTERM');
  assert.equal(await served.exit, 0);
  const logs = jsonLines(served.stderr());
  assert.ok(
    logs.some((line) => String(line.msg).includes('authentication is disabled')),
    'warned about --no-auth',
  );
  assert.ok(!logs.some((line) => line.level === 20), 'BATCHSERVE_LOG_LEVEL=warn over the file: no debug lines');
  assert.ok(!logs.some((line) => line.msg === 'model loaded'), 'nor info');
});

test('a bad or empty variable is refused with one line naming the variable', async () => {
  const run = (env: Record<string, string>, args: string[] = []) =>
    runChild(process.execPath, [BIN, 'serve', '--models', 'a=missing.mar', ...args], { env: cleanEnv(env) });
  const [port, flag, empty, auth, duration] = await Promise.all([
    run({ BATCHSERVE_PORT: 'eighty' }),
    run({ BATCHSERVE_PORT: '8080' }, ['--port', 'eighty']),
    run({ BATCHSERVE_HOST: ' ' }),
    run({ BATCHSERVE_AUTH: 'no' }),
    run({ BATCHSERVE_DRAIN_TIMEOUT: 'soon' }),
  ]);
  assert.equal(port.code, 2);
  assert.equal(port.stderr, 'batchserve: BATCHSERVE_PORT: expected an integer, got "eighty" [BS_ERR_USAGE]\n');
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /^batchserve: --port: expected an integer/);
  assert.equal(empty.code, 2);
  assert.match(empty.stderr, /^batchserve: BATCHSERVE_HOST is set but empty/);
  assert.equal(auth.code, 2);
  assert.match(auth.stderr, /^batchserve: BATCHSERVE_AUTH: expected true or false, got "no" \[BS_ERR_USAGE\]/);
  assert.equal(duration.code, 2);
  assert.match(duration.stderr, /^batchserve: BATCHSERVE_DRAIN_TIMEOUT: expected a duration/);
});

test('the start-up block: one JSON log line when stdout is not a terminal, text on a terminal or when asked', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  const json = await serveChild(t, ['--models', `affine=${archive}`, '--no-auth', '--state-file', join(dir, 's.json')]);
  const [line, ...rest] = jsonLines(json.stdout());
  assert.deepEqual(rest, []);
  assert.equal(line?.msg, 'serving');
  assert.equal(line?.level, 30);
  assert.equal(line?.pid, json.process.pid);
  assert.deepEqual(line?.urls, json.urls);
  assert.match(json.urls.metrics, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
  const [model] = line?.models as Record<string, unknown>[];
  assert.equal(model?.name, 'affine');
  assert.equal(model?.maxBatchSize, 8);
  json.process.kill('SIGTERM');
  assert.equal(await json.exit, 0);
  jsonLines(json.stderr());

  // A terminal (util-linux `script` gives the child one): the text block, for people.
  const command = [process.execPath, BIN, 'serve', '--models', `affine=${archive}`, '--no-auth']
    .concat([
      '--port',
      '0',
      '--management-port',
      '0',
      '--metrics-port',
      '0',
      '--grpc-port',
      '0',
      '--state-file',
      join(dir, 't.json'),
    ])
    .map((word) => `'${word}'`)
    .join(' ');
  const probe = await runChild('script', ['-qec', 'true', '/dev/null']).catch(() => ({ code: 1 }));
  assert.equal(probe.code, 0, "util-linux's script gives the child a terminal");
  const terminal = spawnChild('script', ['-qfec', command, '/dev/null']);
  t.after(() => terminal.process.kill('SIGKILL'));
  // Through the terminal, stderr arrives on stdout too: the log lines carry the server's pid.
  const pid = await terminal.waitFor(
    (stdout) => (/ {2}models\r?\n/.test(stdout) ? /"pid":(\d+)/.exec(stdout)?.[1] : undefined),
    'the text block and a log line',
  );
  assert.match(terminal.stdout(), /batchserve \S+ serving on 127\.0\.0\.1\r?\n {2}inference {3}http:/);
  process.kill(Number(pid), 'SIGTERM');
  assert.equal(await terminal.exit, 0);
});
