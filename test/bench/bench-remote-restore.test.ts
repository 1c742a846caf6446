import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { getJson } from '../../src/bench/model-queries.js';
import { managementToken } from '../../src/cli/management-client.js';
import { cleanEnv, runChild } from '../cli/container-child.js';
import { startTestServer } from '../fixtures/server.js';
import { packSimArchive } from '../fixtures/sim-archive.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

test("bench --url --management-url sweeps someone else's server, then puts it back as it found it", async (t) => {
  const dir = await tempDir(t);
  const archive = await packSimArchive(dir, {
    fixedCost: '1ms',
    rowCost: '100us',
    maxBatchSize: 4,
    config: 'dynamic_batching: {max_queue_delay: 3ms}\n',
  });
  const server = await startTestServer(t, { models: [`sim=${archive}`] });
  const tokenFile = join(dir, 'token');
  await writeFile(tokenFile, 'test-token');
  const run = await new Promise<{ code: number; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [
        BIN,
        'bench',
        ...['--url', server.urls.inference, '--model', 'sim'],
        ...['--management-url', server.urls.management, '--token-file', tokenFile],
        ...['--batch-sizes', '1,8', '--delays', '0,1ms', '--concurrency', '2'],
        ...['--window', '100ms', '--warmup', '50ms', '--duration', '200ms'],
      ],
      (error, _stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stderr }),
    );
  });
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /bench: put sim back as found: max_batch_size 4, max_queue_delay 3ms, 1 instance\n/);
  const config = server.repository.get('sim')?.config;
  assert.equal(config?.max_batch_size, 4, 'the last point swept was B=8');
  assert.equal(config?.dynamic_batching.max_queue_delay, 3000, 'the last point swept was 1 ms');
  const described = (await getJson(`${server.urls.management}/models/sim`, { token: 'test-token' })) as {
    batchSize: number;
    maxBatchDelay: number;
  }[];
  assert.equal(described[0]?.batchSize, 4);
  assert.equal(described[0]?.maxBatchDelay, 3);
});

test('bench --management-url with no token reads the key file serve wrote in its folder, and says so', async (t) => {
  const dir = await tempDir(t);
  const archive = await packSimArchive(dir, { fixedCost: '1ms', rowCost: '100us', maxBatchSize: 4 });
  // No token in the config: the server generates one and writes it where `serve` does by default.
  const server = await startTestServer(t, {
    models: [`sim=${archive}`],
    auth: { key_file: join(dir, 'batchserve.key') },
  });
  const run = await runChild(
    process.execPath,
    [
      BIN,
      'bench',
      ...['--url', server.urls.inference, '--model', 'sim', '--management-url', server.urls.management],
      ...['--batch-sizes', '1,2', '--concurrency', '1'],
      ...['--window', '100ms', '--warmup', '50ms', '--duration', '200ms'],
    ],
    { cwd: dir, env: cleanEnv() },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /^bench: management token from batchserve\.key$/m);
  assert.match(run.stderr, /bench: put sim back as found: max_batch_size 4/);
});

test('the management token: a flag or $BATCHSERVE_TOKEN first, then $BATCHSERVE_KEY_FILE, TorchServe key files too', async (t) => {
  const dir = await tempDir(t);
  const keyFile = join(dir, 'key_file.json');
  await writeFile(
    keyFile,
    JSON.stringify({ management: { key: 'm-key' }, inference: { key: 'i-key' }, API: { key: 'a' } }),
  );
  const saved = {
    BATCHSERVE_TOKEN: process.env.BATCHSERVE_TOKEN,
    BATCHSERVE_KEY_FILE: process.env.BATCHSERVE_KEY_FILE,
  };
  t.after(() => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
  delete process.env.BATCHSERVE_TOKEN;
  process.env.BATCHSERVE_KEY_FILE = keyFile;
  assert.deepEqual(await managementToken({}), { token: 'm-key', file: keyFile });
  assert.deepEqual(await managementToken({ token: 'flag' }), { token: 'flag' });
  await writeFile(keyFile, '{"inference": {"key": "i-key"}}');
  await assert.rejects(managementToken({}), { code: 'BS_ERR_MANAGEMENT_CALL' });
  process.env.BATCHSERVE_KEY_FILE = join(dir, 'none');
  assert.deepEqual(await managementToken({}), { token: undefined });
  await assert.rejects(managementToken({ tokenFile: join(dir, 'none') }), { code: 'BS_ERR_MANAGEMENT_CALL' });
});
