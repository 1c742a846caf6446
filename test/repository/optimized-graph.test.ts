import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { MANIFEST_PATH, type ArchiveManifest } from '../../src/archive/manifest.js';
import { packArchive } from '../../src/archive/pack.js';
import { prepareModel } from '../../src/optimize/prepare-model.js';
import { onnxruntimeVersion } from '../../src/runtime/optimized-graph.js';
import { validateServerConfig } from '../../src/server/server-config.js';
import { startServer } from '../../src/server/server.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { affineRequest, call } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

/**
 * An `--optimize` folder archive whose optimised graph is swapped for y = 2x + 100 (the original
 * is y = 2x + 1), so an answer shows which file the server loaded. `edit` changes the manifest.
 */
async function markedArchive(dir: string, edit: (manifest: ArchiveManifest) => ArchiveManifest): Promise<string> {
  const serializedFile = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const configFile = join(dir, 'config.yaml');
  await writeFile(configFile, 'max_batch_size: 8\n');
  const preparedModel = await prepareModel({ serializedFile, configFile, optimize: true });
  const { path, manifest } = await packArchive({
    modelName: 'affine',
    serializedFile,
    configFile,
    exportPath: join(dir, 'store'),
    archiveFormat: 'dir',
    preparedModel,
  });
  const marked = Buffer.from(affineModel([4], 'batch', 100));
  const optimizedFile = manifest.model.optimizedFile as string;
  await writeFile(join(path, optimizedFile), marked);
  const files = manifest.files.map((file) =>
    file.path === optimizedFile
      ? { path: file.path, size: marked.length, sha256: createHash('sha256').update(marked).digest('hex') }
      : file,
  );
  await writeFile(join(path, MANIFEST_PATH), JSON.stringify(edit({ ...manifest, files })));
  return path;
}

async function serve(t: TestContext, archive: string, device = 'cpu'): Promise<{ answer: number[]; logs: string[] }> {
  const logs: string[] = [];
  const server = await startServer({
    config: validateServerConfig(
      {
        port: 0,
        management_port: 0,
        metrics_port: 0,
        grpc_port: 0,
        auth: { token: 't' },
        models: [`affine=${archive}`],
        device,
      },
      'test',
    ),
    logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(line) }),
  });
  t.after(() => server.close());
  const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return { answer: (answer.body as { outputs: { data: number[] }[] }).outputs[0]?.data ?? [], logs };
}

const fallbackLines = (logs: readonly string[]): string[] =>
  logs
    .map((line) => JSON.parse(line) as { msg: string })
    .map((line) => line.msg)
    .filter((msg) => msg.startsWith('serving '));

test('an --optimize archive is served from its optimised graph on cpu with the onnxruntime that saved it', async (t) => {
  const dir = await tempDir(t);
  const archive = await markedArchive(dir, (manifest) => manifest);
  const manifest = JSON.parse(await readFile(join(archive, MANIFEST_PATH), 'utf8')) as ArchiveManifest;
  assert.equal(manifest.model.optimization?.onnxruntimeVersion, onnxruntimeVersion());
  const { answer, logs } = await serve(t, archive);
  assert.deepEqual(answer, [102, 104, 106, 108]);
  assert.deepEqual(fallbackLines(logs), []);
});

test('another onnxruntime version serves the original and says so in one log line', async (t) => {
  const dir = await tempDir(t);
  const archive = await markedArchive(dir, (manifest) => ({
    ...manifest,
    model: { ...manifest.model, optimization: { level: 'extended', onnxruntimeVersion: '0.0.1' } },
  }));
  const { answer, logs } = await serve(t, archive);
  assert.deepEqual(answer, [3, 5, 7, 9]);
  assert.deepEqual(fallbackLines(logs), [
    `serving affine.onnx instead of affine.optimized.onnx: the optimised graph was saved by onnxruntime 0.0.1, this is ${onnxruntimeVersion()}`,
  ]);
});

test('an archive without the optimisation keys (as packed before them) serves its serialized file', async (t) => {
  const dir = await tempDir(t);
  const archive = await markedArchive(dir, (manifest) => {
    const model = { ...manifest.model };
    delete model.optimizedFile;
    delete model.optimization;
    return { ...manifest, model };
  });
  const { answer } = await serve(t, archive);
  assert.deepEqual(answer, [3, 5, 7, 9]);
});
