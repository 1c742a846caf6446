import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { BenchReport } from '../../src/bench/report-types.js';
import { packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { serverTls, tlsFile } from '../fixtures/tls.js';
import { runCli as cli } from '../fixtures/cli.js';

const CA = ['--tls-ca', tlsFile('ca.pem')];
const CLIENT = ['--tls-cert', tlsFile('client.pem'), '--tls-key', tlsFile('client-key.pem')];
const SHORT = ['--concurrency', '2', '--requests', '40', '--window', '100ms', '--warmup', '50ms', '--duration', '10s'];

test('the management commands speak TLS: --tls-ca trusts the server, --tls-cert/--tls-key answer its request for a client certificate', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir)}`],
    tls: serverTls({ client_ca: tlsFile('ca.pem') }),
  });
  const tokenFile = join(dir, 'token');
  await writeFile(tokenFile, 'test-token\n');
  const target = ['--management-url', server.urls.management, '--token-file', tokenFile];

  const shown = await cli(['traffic', 'show', 'affine', ...target, ...CA, ...CLIENT]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /^affine: default version 1; loaded 1 \(ready\)/);

  const refusals = await Promise.all([
    cli(['traffic', 'show', 'affine', ...target, ...CLIENT]),
    cli(['traffic', 'show', 'affine', ...target, ...CA]),
    cli([
      'canary',
      'status',
      'affine',
      ...target,
      ...CA,
      '--tls-cert',
      tlsFile('other-client.pem'),
      '--tls-key',
      tlsFile('other-client-key.pem'),
    ]),
  ]);
  for (const [index, run] of refusals.entries()) {
    assert.equal(run.code, 1, `${index}: ${run.stderr}`);
    assert.match(
      run.stderr,
      /^batchserve: cannot reach the management API at https:\/\/127\.0\.0\.1:\d+: .+ \[BS_ERR_MANAGEMENT_CALL\]\n$/,
      `${index}`,
    );
  }
  // Without the CA the reason is the certificate; a missing key file is named.
  assert.match(
    refusals[0]?.stderr ?? '',
    /unable to verify the first certificate|UNABLE_TO_VERIFY|self.signed|local issuer/i,
  );
  const unpaired = await cli(['traffic', 'show', 'affine', ...target, ...CA, '--tls-cert', tlsFile('client.pem')]);
  assert.deepEqual(
    [unpaired.code, unpaired.stderr],
    [2, 'batchserve: --tls-cert and --tls-key go together: a client certificate and its key [BS_ERR_USAGE]\n'],
  );
  const missing = await cli(['traffic', 'show', 'affine', ...target, '--tls-ca', join(dir, 'none.pem')]);
  assert.deepEqual(
    [missing.code, missing.stderr],
    [1, `batchserve: TLS CA ${join(dir, 'none.pem')}: ENOENT [BS_ERR_TLS_FILE]\n`],
  );
});

test('bench drives an https:// and a grpcs:// server with --tls-ca, and sweeps it through an https management port that wants a client certificate', async (t) => {
  const dir = await tempDir(t);
  const server = await startTestServer(t, {
    models: [`affine=${await packAffine(dir)}`],
    tls: serverTls({ client_ca: tlsFile('ca.pem') }),
  });
  const tokenFile = join(dir, 'token');
  await writeFile(tokenFile, 'test-token\n');
  const bench = async (args: string[], index: number): Promise<BenchReport> => {
    const json = join(dir, `report-${index}.json`);
    const run = await cli(['bench', ...args, '--model', 'affine', ...CA, ...SHORT, '--json', json]);
    assert.equal(run.code, 0, `${args.join(' ')}: ${run.stderr}`);
    return JSON.parse(await readFile(json, 'utf8')) as BenchReport;
  };
  // The sweep runs after the others: while it holds the batch size at 4, a bench without
  // --management-url finds the server away from the point it asks for and refuses.
  const runs = await Promise.all(
    [
      ['--url', server.urls.inference, '--protocol', 'v2-json'],
      ['--url', server.urls.grpc],
      ['--url', server.urls.grpc, '--protocol', 'grpc-stream'],
    ].map(bench),
  );
  runs.push(
    await bench(
      [
        ...['--url', server.urls.inference, '--management-url', server.urls.management, '--token-file', tokenFile],
        ...['--batch-sizes', '4', '--delays', '1ms', ...CLIENT],
      ],
      3,
    ),
  );
  assert.deepEqual(
    runs.map((report) => report.target.protocol),
    ['v2-json', 'grpc', 'grpc-stream', 'v2-binary'],
  );
  for (const report of runs) {
    const [point] = report.points;
    assert.deepEqual([point?.requests, point?.errorCount], [40, 0], JSON.stringify(point?.errors));
  }
  assert.equal(runs[3]?.points[0]?.server?.maxBatchSize, 4, 'the sweep set the batch size over the management port');

  const untrusted = await cli(['bench', '--url', server.urls.inference, '--model', 'affine', ...SHORT]);
  assert.equal(untrusted.code, 2, untrusted.stderr);
  assert.match(
    untrusted.stderr,
    /^batchserve: cannot reach https:\/\/127\.0\.0\.1:\d+\/v2\/models\/affine\S*: unable to verify the first certificate/,
  );
  const archive = await cli(['bench', join(dir, 'store', 'affine.mar'), ...CA, ...SHORT]);
  assert.deepEqual(
    [archive.code, archive.stderr.trim()],
    [2, 'batchserve: --tls-ca, --tls-cert and --tls-key are for a server at --url [BS_ERR_USAGE]'],
  );
});
