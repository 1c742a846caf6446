import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchReport } from '../../src/bench/report-types.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

function bench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'bench', ...args], (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

interface Received {
  readonly method: string;
  readonly url: string;
  readonly contentType: string | undefined;
  readonly body: string;
}

/**
 * What a Flask development server is: one request at a time, each taking `serviceMs`, the rest
 * waiting their turn. It answers 201 (any 2xx is a success) and keeps what it was sent.
 */
async function sequentialServer(t: TestContext, serviceMs: number): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  const waiting: [IncomingMessage, ServerResponse][] = [];
  let busy = false;
  const next = (): void => {
    const turn = waiting.shift();
    if (!turn) return;
    busy = true;
    const [req, res] = turn;
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        contentType: req.headers['content-type'],
        body: Buffer.concat(chunks).toString('utf8'),
      });
      setTimeout(() => {
        res.writeHead(201, { 'content-type': 'application/json' }).end('{"label":"cat"}');
        busy = false;
        next();
      }, serviceMs);
    });
  };
  const server = createServer((req, res) => {
    waiting.push([req, res]);
    if (!busy) next();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.after(() => {
    server.closeAllConnections();
    server.close();
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/predict?v=1`, received };
}

test('--protocol http-json benches a plain server one request at a time: same load, same report, no fit', async (t) => {
  const dir = await tempDir(t);
  const { url, received } = await sequentialServer(t, 4);
  const input = join(dir, 'request.json');
  const body = '{"image": "cat.png", "top_k": 3}';
  await writeFile(input, body);
  const files = { json: join(dir, 'r.json'), html: join(dir, 'r.html'), csv: join(dir, 'r.csv') };
  const run = await bench([
    ...['--protocol', 'http-json', '--url', url, '--input', input, '--content-type', 'application/json; charset=utf-8'],
    ...['--concurrency', '1,4', '--requests', '40', '--window', '100ms', '--warmup', '50ms', '--duration', '20s'],
    ...['--json', files.json, '--html', files.html, '--csv', files.csv],
  ]);
  assert.equal(run.code, 0, run.stderr);

  // Every request was the file, as it is, with its content type, POSTed to the URL given.
  assert.ok(received.length >= 80, `${received.length} requests`);
  for (const request of received) {
    assert.deepEqual(request, {
      method: 'POST',
      url: '/predict?v=1',
      contentType: 'application/json; charset=utf-8',
      body,
    });
  }

  const report = JSON.parse(await readFile(files.json, 'utf8')) as BenchReport;
  assert.equal(report.target.protocol, 'http-json');
  assert.equal(report.target.url, url);
  assert.equal(report.points.length, 2);
  for (const point of report.points) {
    assert.deepEqual([point.requests, point.errorCount], [40, 0], JSON.stringify(point.errors));
    assert.ok(point.throughput > 0 && point.latency.p50 > 0);
    assert.equal(point.server, undefined, 'no settings bench could see');
    assert.equal(point.serverSide, undefined, 'no statistics');
  }
  // Served one at a time, 4 clients wait ~4 service times each: the latency a batching server removes.
  const [one, four] = report.points.map((point) => point.latency.p50);
  assert.ok((four ?? 0) > 2 * (one ?? Infinity), `p50 ${one} ms at c=1, ${four} ms at c=4`);
  assert.equal(report.fit, undefined);
  assert.deepEqual(report.speedup, []);

  assert.match(run.stdout, /server: no fit, a plain HTTP server \(--protocol http-json\) reports no batch statistics/);
  assert.match(run.stdout, /│ — +│ c=4 +│/);
  assert.doesNotMatch(run.stdout, /fewer than two batch sizes|ceiling/);
  assert.ok((await readFile(files.html, 'utf8')).includes('reports no batch statistics'));
  const [head = '', row = ''] = (await readFile(files.csv, 'utf8')).split('\r\n');
  assert.ok(
    head.startsWith('max_batch_size,max_queue_delay_us,instances,load_kind') && row.startsWith(',,,concurrency'),
  );
});

test('--protocol http-json refuses what it cannot do, in one line each', async () => {
  const plain = ['--protocol', 'http-json', '--url', 'http://127.0.0.1:1/predict', '--concurrency', '1'];
  const runs = await Promise.all([
    bench(plain),
    bench([...plain, '--input', 'x.json', '--batch-sizes', '1,8', '--delays', '0,2ms']),
    bench([...plain, '--input', 'x.json', '--management-url', 'http://127.0.0.1:2']),
    bench(['model.mar', '--protocol', 'http-json', '--input', 'x.json', '--concurrency', '1']),
    bench(['--url', 'grpc://127.0.0.1:1', '--protocol', 'http-json', '--input', 'x.json', '--concurrency', '1']),
    bench(['--url', 'http://127.0.0.1:1', '--model', 'm', '--content-type', 'text/plain', '--concurrency', '1']),
  ]);
  for (const run of runs) {
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
    assert.match(run.stderr, /BS_ERR_USAGE/);
  }
  const [noInput, sweep, management, archive, grpc, contentType] = runs.map((run) => run.stderr);
  assert.match(noInput ?? '', /give --input FILE/);
  assert.match(sweep ?? '', /takes no --batch-sizes, --delays/);
  assert.match(management ?? '', /takes no --management-url/);
  assert.match(archive ?? '', /not an archive/);
  assert.match(grpc ?? '', /sends HTTP/);
  assert.match(contentType ?? '', /--content-type is for --protocol http-json/);
});
