import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { copyFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect, type TLSSocket } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { Client } from 'undici';
import { waitForStartupUrls } from '../../src/server/startup-block.js';
import type { ApiAddresses } from '../../src/server/server.js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { affineRequest, packAffine } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { grpcTls, pem, servedCertificate, tlsFile } from '../fixtures/tls.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));
const serial = (name: string): string => new X509Certificate(pem(name)).serialNumber;

interface LogLine {
  level: number;
  msg: string;
  err?: string;
  serial?: string;
}

/** `batchserve serve` as a child, its JSON log lines gathered as they come. */
function serve(t: TestContext, args: readonly string[]): { child: ChildProcess; logs: LogLine[] } {
  const child = spawn(process.execPath, [BIN, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  t.after(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const logs: LogLine[] = [];
  let partial = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) if (line.startsWith('{')) logs.push(JSON.parse(line) as LogLine);
  });
  return { child, logs };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  for (let tries = 0; !condition(); tries++) {
    assert.ok(tries < 3000, `waited too long for ${what}`);
    await new Promise((wait) => setTimeout(wait, 10));
  }
}

/**
 * Keep-alive clients sending one request after another until stopped: undici Clients (one
 * connection each) on the inference port, grpc-js channels on the gRPC port. Counts every
 * answer, every failure and every connection undici saw close.
 */
function startLoad(urls: ApiAddresses, httpClients: number, grpcChannels: number) {
  const counts = { ok: 0, failed: [] as string[], disconnects: 0 };
  let running = true;
  const clients = Array.from({ length: httpClients }, () => {
    const client = new Client(urls.inference, { connect: { ca: pem('ca.pem') }, keepAliveTimeout: 60_000 });
    client.on('disconnect', () => (counts.disconnects += running ? 1 : 0));
    return client;
  });
  const channels = Array.from({ length: grpcChannels }, () => new InferenceClient(urls.grpc, grpcTls()));
  const body = affineRequest([[1, 2, 3, 4]]);
  const httpLoop = async (client: Client): Promise<void> => {
    while (running) {
      try {
        const answer = await client.request({
          path: '/v2/models/affine/infer',
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        await answer.body.dump();
        if (answer.statusCode === 200) counts.ok += 1;
        else counts.failed.push(`HTTP ${answer.statusCode}`);
      } catch (error) {
        counts.failed.push((error as NodeJS.ErrnoException).code ?? String(error));
      }
    }
  };
  const grpcLoop = async (channel: InferenceClient): Promise<void> => {
    while (running) {
      const answer = await channel.call('ModelInfer', {
        model_name: 'affine',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
        raw_input_contents: [Buffer.from(new Float32Array([1, 2, 3, 4]).buffer)],
      });
      if (answer.error) counts.failed.push(`gRPC ${answer.error.code} ${answer.error.details}`);
      else counts.ok += 1;
    }
  };
  const loops = Promise.all([...clients.map(httpLoop), ...channels.map(grpcLoop)]);
  return {
    counts,
    async stop(): Promise<void> {
      running = false;
      await loops;
      await Promise.all(clients.map((client) => client.close()));
      channels.forEach((channel) => channel.close());
    },
  };
}

/** A TLS connection made now and kept: the certificate it got, and an HTTP request on it later. */
async function openConnection(url: string): Promise<TLSSocket> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port), ca: pem('ca.pem'), ALPNProtocols: ['http/1.1'] });
  await new Promise((ready, fail) => socket.once('secureConnect', ready).once('error', fail));
  return socket;
}

function liveOn(socket: TLSSocket): Promise<string> {
  return new Promise((done, fail) => {
    socket.once('data', (chunk: Buffer) => done(chunk.toString('latin1').split('\r\n')[0] ?? ''));
    socket.once('error', fail);
    socket.write('GET /v2/health/live HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n');
  });
}

test('SIGHUP swaps the certificates under load: no request fails, no connection drops, new connections get the new certificate; a bad swap is logged and changes nothing', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(join(dir, 'model'));
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  await copyFile(tlsFile('server.pem'), cert);
  await copyFile(tlsFile('server-key.pem'), key);
  const { child, logs } = serve(t, [
    ...['--models', `affine=${archive}`, '--tls-cert', cert, '--tls-key', key],
    ...['--port', '0', '--management-port', '0', '--metrics-port', '0', '--grpc-port', '0'],
    ...['--key-file', join(dir, 'batchserve.key'), '--state-file', join(dir, 'state.json'), '--work-dir', dir],
    ...['--startup-format', 'json', '--keep-alive-timeout', '60s'],
  ]);
  const urls = await waitForStartupUrls(child);
  const scrape = urls.metrics;
  const sockets = [await openConnection(urls.inference)];
  t.after(() => sockets.forEach((socket) => socket.destroy()));
  const before = sockets[0]?.getPeerCertificate().serialNumber;
  assert.equal(before, serial('server.pem'));

  const load = startLoad(urls, 8, 2);
  try {
    await until(() => load.counts.ok >= 200, 'load before the swap');
    const atSwap = load.counts.ok;
    await copyFile(tlsFile('server-renewed.pem'), cert);
    await copyFile(tlsFile('server-renewed-key.pem'), key);
    child.kill('SIGHUP');
    await until(() => logs.some((line) => line.msg.startsWith('TLS certificates reloaded')), 'the reload');
    const reloaded = logs.find((line) => line.msg.startsWith('TLS certificates reloaded'));
    assert.equal(reloaded?.serial, serial('server-renewed.pem'));
    await until(() => load.counts.ok >= atSwap + 200, 'load after the swap');

    for (const [url, protocol] of [
      [urls.inference, 'http/1.1'],
      [urls.management, 'http/1.1'],
      [scrape, 'http/1.1'],
      [urls.grpc.replace('grpcs:', 'https:'), 'h2'],
    ] as const) {
      assert.equal((await servedCertificate(url, protocol)).serialNumber, serial('server-renewed.pem'), url);
    }
    // The connection made before the swap keeps its certificate, and is still served.
    assert.match(await liveOn(sockets[0] as TLSSocket), /^HTTP\/1\.1 200/);

    // A swap to files that do not go together: one error line naming the key, and the renewed certificate stays.
    await copyFile(tlsFile('server-key.pem'), key);
    child.kill('SIGHUP');
    await until(() => logs.some((line) => line.msg.startsWith('TLS reload failed')), 'the failed reload');
    const failed = logs.find((line) => line.msg.startsWith('TLS reload failed'));
    assert.equal(failed?.level, 50);
    assert.equal(failed?.err, `TLS private key ${key} is not the key of the certificate ${cert}`);
    const atFailure = load.counts.ok;
    await until(() => load.counts.ok >= atFailure + 100, 'load after the failed reload');
    assert.equal((await servedCertificate(urls.inference)).serialNumber, serial('server-renewed.pem'));
  } finally {
    await load.stop();
  }
  t.diagnostic(`${load.counts.ok} requests answered across two SIGHUPs, ${load.counts.failed.length} failed`);
  assert.deepEqual(load.counts.failed, []);
  assert.equal(load.counts.disconnects, 0, 'no keep-alive connection was dropped');
  assert.ok(
    logs.every((line) => line.level < 50 || line.msg.startsWith('TLS reload failed')),
    'no other error logged',
  );
});

test('serve with a key that is not the certificate’s stops at once with one line naming the file', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(join(dir, 'model'));
  const child = spawn(
    process.execPath,
    [
      ...[BIN, 'serve', '--models', `affine=${archive}`, '--port', '0', '--management-port', '0'],
      ...['--metrics-port', '0', '--grpc-port', '0', '--key-file', join(dir, 'key'), '--state-file', join(dir, 's')],
      ...['--tls-cert', tlsFile('server.pem'), '--tls-key', tlsFile('client-key.pem')],
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  const code = await new Promise((done) => child.once('exit', done));
  assert.equal(code, 1);
  assert.equal(stdout, '');
  assert.equal(
    stderr,
    `batchserve: TLS private key ${tlsFile('client-key.pem')} is not the key of the certificate ${tlsFile('server.pem')} [BS_ERR_TLS_FILE]\n`,
  );
});
