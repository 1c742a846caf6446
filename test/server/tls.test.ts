import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { generateKeyPairSync, X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { status } from '@grpc/grpc-js';
import OpenAI from 'openai';
import { fetch, request, type Dispatcher } from 'undici';
import type { BatchServer } from '../../src/server/server.js';
import { validateServerConfig } from '../../src/server/server-config.js';
import { firstCommands } from '../../src/server/first-commands.js';
import { parseStartupUrls, renderStartupBlock, renderStartupLine } from '../../src/server/startup-block.js';
import { InferenceClient } from '../fixtures/grpc-client.js';
import { affine, affineRequest, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { grpcTls, identity, pem, serverTls, tlsAgent, tlsFile } from '../fixtures/tls.js';

const TOKEN = { authorization: 'Bearer test-token' };
const ROW = [1, 2, 3, 4];

async function tlsServer(t: TestContext, tls: Record<string, unknown> = serverTls()): Promise<BatchServer> {
  const archive = await packAffine(join(await tempDir(t), 'v1'));
  return startTestServer(t, { models: [`affine=${archive}`], tls });
}

/** A GET or POST through `dispatcher`; the status, or the error's code when the call fails. */
async function statusOf(
  url: string,
  dispatcher: Dispatcher,
  options: { body?: string; headers?: Record<string, string> } = {},
): Promise<number | string> {
  try {
    const response = await request(url, {
      dispatcher,
      method: options.body === undefined ? 'GET' : 'POST',
      headers: { 'content-type': 'application/json', ...options.headers },
      ...(options.body === undefined ? {} : { body: options.body }),
    });
    await response.body.dump();
    return response.statusCode;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? String(error);
  }
}

const grpcInfer = {
  model_name: 'affine',
  inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 4] }],
  raw_input_contents: [Buffer.from(new Float32Array(ROW).buffer)],
};

test('every port speaks TLS: undici over https with the CA, grpc-js over TLS, the openai client with a CA; the start-up block says so', async (t) => {
  const server = await tlsServer(t);
  const { urls } = server;
  assert.match(urls.inference, /^https:\/\/127\.0\.0\.1:\d+$/);
  assert.match(urls.management, /^https:\/\//);
  assert.match(urls.metrics, /^https:\/\//);
  assert.match(urls.grpc, /^grpcs:\/\/127\.0\.0\.1:\d+$/);

  const agent = tlsAgent();
  t.after(() => agent.close());
  const infer = await request(`${urls.inference}/v2/models/affine/infer`, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: affineRequest([ROW]),
  });
  assert.equal(infer.statusCode, 200);
  assert.deepEqual(((await infer.body.json()) as { outputs: { data: number[] }[] }).outputs[0]?.data, affine([ROW]));
  assert.equal(await statusOf(`${urls.management}/models`, agent, { headers: TOKEN }), 200);
  assert.equal(await statusOf(`${urls.metrics}/metrics`, agent), 200);
  // Over ::1 and by name too: the certificate names localhost, 127.0.0.1 and ::1.
  const byName = urls.inference.replace('127.0.0.1', 'localhost');
  assert.equal(await statusOf(`${byName}/v2/health/ready`, agent), 200);

  // Without the CA the server is not trusted; in clear text it is not understood.
  const untrusting = tlsAgent({ ca: pem('other-ca.pem') });
  t.after(() => untrusting.close());
  assert.equal(await statusOf(`${urls.inference}/v2/health/ready`, untrusting), 'UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  const plain = await statusOf(urls.inference.replace('https:', 'http:') + '/v2/health/ready', tlsAgent());
  assert.notEqual(plain, 200);

  // TLS 1.0 and 1.1 are refused by the server (the client offers them at any security level).
  const refusal = await new Promise<string>((done) => {
    const { port } = new URL(urls.inference);
    const socket = connect({
      host: '127.0.0.1',
      port: Number(port),
      ca: pem('ca.pem'),
      minVersion: 'TLSv1',
      maxVersion: 'TLSv1.1',
      ciphers: 'DEFAULT@SECLEVEL=0',
    });
    socket.once('secureConnect', () => done(`connected over ${socket.getProtocol()}`));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
  });
  assert.equal(refusal, 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION');

  const grpc = new InferenceClient(urls.grpc, grpcTls());
  t.after(() => grpc.close());
  const answer = await grpc.call('ModelInfer', grpcInfer);
  assert.equal(answer.error, undefined);
  const output = Buffer.from(answer.response.raw_output_contents[0] as Buffer);
  assert.deepEqual(Array.from(new Float32Array(output.buffer, output.byteOffset, 4)), affine([ROW]));

  const openai = new OpenAI({
    baseURL: `${urls.inference}/v1`,
    apiKey: 'unused',
    maxRetries: 0,
    fetch: ((input: string, init: Record<string, unknown>) => fetch(input, { ...init, dispatcher: agent })) as never,
  });
  const models = await openai.models.list();
  assert.deepEqual(
    models.data.map((model) => model.id),
    ['affine'],
  );

  const config = validateServerConfig({ tls: serverTls() }, 'test');
  const block = renderStartupBlock(server, config);
  assert.match(block, /^ {2}tls {9}\/.*server\.pem on every port, TLS 1\.2\+, reloaded on SIGHUP$/m);
  // As printed, the metrics URL is the scrape URL.
  const printed = { ...urls, metrics: `${urls.metrics}/metrics` };
  assert.deepEqual(parseStartupUrls(block), printed);
  const line = renderStartupLine(server, config);
  assert.deepEqual(parseStartupUrls(line), printed);
  assert.deepEqual(JSON.parse(line).tls, { cert: tlsFile('server.pem') });
  // A CA-issued certificate: its CA is the clients' to name, so the commands name none.
  assert.ok(firstCommands(server, 'batchserve').every((command) => !/--cacert|--tls-ca/.test(command)));
});

test('with a self-signed certificate the start-up commands trust it, and run as printed', async (t) => {
  const server = await tlsServer(t, { cert: tlsFile('self-signed.pem'), key: tlsFile('self-signed-key.pem') });
  const [ready, infer, bench] = firstCommands(server, 'batchserve');
  const cacert = `--cacert ${tlsFile('self-signed.pem')}`;
  assert.ok(ready?.startsWith(`curl ${cacert} -s https://`), ready);
  assert.ok(infer?.includes(`| curl ${cacert} -s https://`) || infer?.startsWith(`curl ${cacert} -s https://`), infer);
  assert.match(bench ?? '', new RegExp(`^batchserve bench --url https://\\S+ --tls-ca ${tlsFile('self-signed.pem')} `));
  const shell = promisify(execFile);
  assert.equal((await shell('bash', ['-c', ready as string])).stdout, '200\n');
  const answer = JSON.parse((await shell('bash', ['-c', infer as string])).stdout) as { outputs: { data: number[] }[] };
  assert.deepEqual(answer.outputs[0]?.data, affine([[0, 0, 0, 0]]));
});

test('mutual TLS: management (and gRPC when named) take only client certificates from the client CA; inference stays open', async (t) => {
  const server = await tlsServer(t, serverTls({ client_ca: tlsFile('ca.pem'), client_auth: ['management', 'grpc'] }));
  const { urls } = server;
  const clients = {
    none: tlsAgent(),
    ours: tlsAgent({ client: identity('client') }),
    other: tlsAgent({ client: identity('other-client') }),
  };
  t.after(() => Promise.all(Object.values(clients).map((agent) => agent.close())));
  const models = `${urls.management}/models`;
  assert.equal(await statusOf(models, clients.ours, { headers: TOKEN }), 200);
  // TLS 1.3: the client learns of the refusal when it reads, as a reset or the server's alert.
  for (const [who, agent] of [
    ['no certificate', clients.none],
    ['a certificate from another CA', clients.other],
  ] as const) {
    const refused = await statusOf(models, agent, { headers: TOKEN });
    assert.match(
      String(refused),
      /^(ECONNRESET|UND_ERR_SOCKET|ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED|ERR_SSL_TLSV1_ALERT_UNKNOWN_CA)$/,
      who,
    );
  }
  assert.equal(await statusOf(`${urls.inference}/v2/health/ready`, clients.none), 200, 'inference needs none');
  assert.equal(await statusOf(`${urls.metrics}/metrics`, clients.none), 200, 'nor metrics');

  const withCertificate = new InferenceClient(urls.grpc, grpcTls(identity('client')));
  const without = new InferenceClient(urls.grpc, grpcTls());
  const foreign = new InferenceClient(urls.grpc, grpcTls(identity('other-client')));
  t.after(() => [withCertificate, without, foreign].forEach((client) => client.close()));
  assert.equal((await withCertificate.call('ModelInfer', grpcInfer)).error, undefined);
  assert.equal(
    (await without.call('ServerLive', {}, {}, { deadline: Date.now() + 5000 })).error?.code,
    status.UNAVAILABLE,
  );
  assert.equal(
    (await foreign.call('ServerLive', {}, {}, { deadline: Date.now() + 5000 })).error?.code,
    status.UNAVAILABLE,
  );
});

test('a TLS file that cannot be used stops the start with BS_ERR_TLS_FILE naming it; the config is checked whole', async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(join(dir, 'v1'));
  const encrypted = join(dir, 'encrypted-key.pem');
  const { privateKey } = generateKeyPairSync('ec', {
    namedCurve: 'P-256',
    privateKeyEncoding: { type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'secret' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  await writeFile(encrypted, privateKey);
  const der = join(dir, 'server.der');
  await writeFile(der, new X509Certificate(pem('server.pem')).raw);
  const cases: [string, Record<string, unknown>, RegExp][] = [
    ['a missing certificate', serverTls({ cert: join(dir, 'none.pem') }), /^TLS certificate \S+none\.pem: ENOENT$/],
    [
      'a key for a certificate',
      serverTls({ cert: tlsFile('server-key.pem') }),
      /^TLS certificate \S+server-key\.pem is not PEM/,
    ],
    ['a DER certificate', serverTls({ cert: der }), /^TLS certificate \S+server\.der is not PEM/],
    [
      "another certificate's key",
      serverTls({ key: tlsFile('server-renewed-key.pem') }),
      /^TLS private key \S+server-renewed-key\.pem is not the key of the certificate \S+server\.pem$/,
    ],
    [
      'an encrypted key',
      serverTls({ key: encrypted }),
      /^TLS private key \S+encrypted-key\.pem is encrypted: give it decrypted/,
    ],
    [
      'a key as the client CA',
      serverTls({ client_ca: tlsFile('client-key.pem') }),
      /^TLS client CA \S+client-key\.pem is not PEM/,
    ],
  ];
  for (const [what, tls, message] of cases) {
    await assert.rejects(
      startTestServer(t, { models: [`affine=${archive}`], tls }),
      (error: Error & { code?: string }) => error.code === 'BS_ERR_TLS_FILE' && message.test(error.message),
      what,
    );
  }
  assert.throws(
    () => validateServerConfig({ tls: { cert: 'a.pem', client_auth: ['inference'] } }, 'server.yaml'),
    (error: Error & { code?: string; problems?: string[] }) =>
      error.code === 'BS_ERR_CONFIG_INVALID' &&
      error.problems?.length === 2 &&
      /^tls: needs both cert and key/.test(error.problems[0] ?? '') &&
      /^tls\.client_auth: client certificates are checked against tls\.client_ca/.test(error.problems[1] ?? ''),
  );
  assert.deepEqual(validateServerConfig({ tls: serverTls({ client_ca: 'ca.pem' }) }, 't').tls?.client_auth, [
    'management',
  ]);
  assert.deepEqual(validateServerConfig({ tls: serverTls() }, 't').tls?.client_auth, []);
});
