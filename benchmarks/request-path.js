// Which src files one request passes, from the socket to the session and back: a real server
// (in this process, its instance in a worker thread as served by default) answers warm-up
// requests, then V8's precise coverage counts, in every thread, the functions one more request
// calls (request-path-hook.cjs). Prints the files per thread with the functions that ran.
// Usage: npm run build && node -r ./benchmarks/request-path-hook.cjs benchmarks/request-path.js [v2-json|v2-binary|torchserve]
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BroadcastChannel } from 'node:worker_threads';
import { pino } from 'pino';
import { request } from 'undici';
import { packArchive } from '../dist/src/archive/pack.js';
import { validateServerConfig } from '../dist/src/server/server-config.js';
import { startServer } from '../dist/src/server/server.js';
import { writeIdentityModel } from './identity-model.js';

const kind = process.argv[2] ?? 'v2-json';
const dir = await mkdtemp(join(tmpdir(), 'request-path-'));
try {
  await writeIdentityModel(join(dir, 'identity.onnx'));
  await writeFile(join(dir, 'config.yaml'), 'max_batch_size: 8\n');
  const { path } = await packArchive({
    modelName: 'identity',
    serializedFile: join(dir, 'identity.onnx'),
    configFile: join(dir, 'config.yaml'),
    exportPath: dir,
  });
  const server = await startServer({
    config: validateServerConfig(
      {
        port: 0,
        management_port: 0,
        metrics_port: 0,
        grpc_port: 0,
        models: [`identity=${path}`],
        state_file: join(dir, 'state.json'),
        work_dir: join(dir, 'work'),
      },
      'request-path',
    ),
    logger: pino({ level: 'silent' }),
  });
  const row = Array.from({ length: 16 }, (_, index) => index / 16);
  const send = async () => {
    const binary = Buffer.from(new Float32Array(row).buffer);
    const header = Buffer.from(
      JSON.stringify({
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 16], parameters: { binary_data_size: 64 } }],
      }),
    );
    const answer =
      kind === 'torchserve'
        ? await request(`${server.urls.inference}/predictions/identity`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ x: [row] }),
          })
        : kind === 'v2-binary'
          ? await request(`${server.urls.inference}/v2/models/identity/infer`, {
              method: 'POST',
              headers: {
                'content-type': 'application/octet-stream',
                'inference-header-content-length': String(header.length),
              },
              body: Buffer.concat([header, binary]),
            })
          : await request(`${server.urls.inference}/v2/models/identity/infer`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 16], data: row }] }),
            });
    await answer.body.arrayBuffer();
    if (answer.statusCode !== 200) throw new Error(`status ${answer.statusCode}`);
  };
  for (let index = 0; index < 50; index++) await send();
  const commands = new BroadcastChannel('request-path');
  const reports = new BroadcastChannel('request-path-report');
  const threads = [];
  reports.onmessage = ({ data }) => threads.push(data);
  commands.postMessage('reset');
  await new Promise((resolve) => setTimeout(resolve, 300));
  await send();
  await new Promise((resolve) => setTimeout(resolve, 100));
  commands.postMessage('take');
  await new Promise((resolve) => setTimeout(resolve, 500));
  commands.close();
  reports.close();
  await server.close();
  const all = new Set(threads.flatMap((thread) => Object.keys(thread.files)));
  console.log(JSON.stringify({ request: kind, files: all.size, threads }, null, 1));
} finally {
  await rm(dir, { recursive: true, force: true });
}
