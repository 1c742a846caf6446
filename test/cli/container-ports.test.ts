import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { startTestServer, packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { BIN, holdPort, runChild } from './container-child.js';

const APIS = [
  ['--port', 'inference', 'BATCHSERVE_PORT'],
  ['--management-port', 'management', 'BATCHSERVE_MANAGEMENT_PORT'],
  ['--metrics-port', 'metrics', 'BATCHSERVE_METRICS_PORT'],
  ['--grpc-port', 'grpc', 'BATCHSERVE_GRPC_PORT'],
] as const;

test('a taken port fails serve before any model loads: one line naming the port and its API, exit 69', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  const held = await holdPort(t);
  const runs = APIS.map(async ([flag, api, variable]) => {
    const ports = new Map<string, string>([
      ['--port', '0'],
      ['--management-port', '0'],
      ['--metrics-port', '0'],
      ['--grpc-port', '0'],
      [flag, String(held)],
    ]);
    const keyFile = join(dir, `${api}.key`);
    const workDir = join(dir, `work-${api}`);
    const run = await runChild(process.execPath, [
      BIN,
      'serve',
      '--models',
      `affine=${archive}`,
      ...[...ports].flat(),
      '--key-file',
      keyFile,
      '--work-dir',
      workDir,
    ]);
    assert.equal(run.code, 69, run.stderr);
    assert.equal(run.stdout, '');
    // One line, and only it: no "model loaded" log came before.
    assert.match(
      run.stderr,
      new RegExp(
        `^batchserve: port ${held} \\(${api}\\) on 127\\.0\\.0\\.1 is in use; .*${flag} or ${variable}.* \\[BS_ERR_PORT_IN_USE\\]\\n$`,
      ),
    );
    await assert.rejects(stat(keyFile), 'no token was written');
    await assert.rejects(stat(workDir), 'no work folder was made');
  });
  await Promise.all(runs);
});

test('startServer refuses a taken port with PortInUseError before it makes a work folder', async (t) => {
  const dir = await tempDir(t);
  const held = await holdPort(t);
  const workDir = join(dir, 'work');
  await assert.rejects(
    startTestServer(t, { models: [`affine=${await packAffine(dir)}`], metrics_port: held, work_dir: workDir }),
    (error: Error & { code?: string; exitCode?: number }) =>
      error.code === 'BS_ERR_PORT_IN_USE' && error.exitCode === 69 && /port \d+ \(metrics\)/.test(error.message),
  );
  await assert.rejects(stat(workDir));
});

test('two APIs on one port is a config error, named before anything binds', async () => {
  const run = await runChild(process.execPath, [
    BIN,
    'serve',
    '--models',
    'a=a.mar',
    '--port',
    '9',
    '--metrics-port',
    '9',
  ]);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /metrics_port: 9 is port already; each API needs its own port \[BS_ERR_CONFIG_INVALID\]/);
});
