import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { MANIFEST_PATH } from '../../src/archive/manifest.js';
import { packArchive } from '../../src/archive/pack.js';
import { MODEL_CONFIG_FILE } from '../../src/config/model-config.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

/**
 * A folder archive whose stored config is rewritten after packing, its hash recomputed: what an
 * archive packed by an older version (before the bounds) or edited by hand looks like to serve.
 */
async function archiveWithStoredConfig(dir: string, name: string, edit: (yaml: string) => string): Promise<string> {
  const model = await writeModel(dir, `${name}.onnx`, affineModel([4], 'batch', 1));
  const packed = await packArchive({
    modelName: name,
    version: '1',
    serializedFile: model,
    exportPath: join(dir, 'store'),
    archiveFormat: 'dir',
  });
  const configPath = join(packed.path, MODEL_CONFIG_FILE);
  const yaml = edit(await readFile(configPath, 'utf8'));
  await writeFile(configPath, yaml);
  const manifestPath = join(packed.path, MANIFEST_PATH);
  const manifest = JSON.parse(await readFile(manifestPath, 'utf8')) as {
    files: { path: string; size: number; sha256: string }[];
  };
  for (const file of manifest.files) {
    if (file.path !== MODEL_CONFIG_FILE) continue;
    file.size = Buffer.byteLength(yaml);
    file.sha256 = createHash('sha256').update(yaml).digest('hex');
  }
  await writeFile(manifestPath, JSON.stringify(manifest));
  return packed.path;
}

const threads = (count: number) => (yaml: string) => yaml.replace(/intra_op_threads: 0/, `intra_op_threads: ${count}`);

test('serve refuses an archive whose stored config asks for 100000 threads; the model beside it serves', async (t) => {
  const dir = await tempDir(t, 'batchserve-bounds-');
  const bad = await archiveWithStoredConfig(dir, 'threads', threads(100_000));
  const good = await packAffine(join(dir, 'good'));
  const server = await startTestServer(t, { models: [`threads=${bad}`, `affine=${good}`], work_dir: dir });
  assert.equal(server.startupFailures.length, 1);
  assert.equal(server.startupFailures[0]?.spec, `threads=${bad}`);
  assert.match(
    server.startupFailures[0]?.message ?? '',
    /model-config\.yaml: runtime\.intra_op_threads: expected a value from 0 to 256, got 100000 \[BS_ERR_CONFIG_INVALID\]$/,
  );
  assert.equal((await call(`${server.urls.inference}/v2/models/affine/ready`)).status, 200);
  assert.notEqual((await call(`${server.urls.inference}/v2/models/threads/ready`)).status, 200);
});

test('serve refuses more threads than 4 per core of its own machine, even under the fixed ceiling', async (t) => {
  const dir = await tempDir(t, 'batchserve-bounds-');
  const many = availableParallelism() * 4 + 1;
  const bad = await archiveWithStoredConfig(dir, 'threads', threads(many));
  const good = await packAffine(join(dir, 'good'));
  const server = await startTestServer(t, { models: [`threads=${bad}`, `affine=${good}`], work_dir: dir });
  assert.equal(server.startupFailures.length, 1);
  assert.match(
    server.startupFailures[0]?.message ?? '',
    new RegExp(`runtime\\.intra_op_threads: expected at most .*got ${many} `),
  );
});

test('a batch size raised through the management API is held to the same ceiling', async (t) => {
  const dir = await tempDir(t, 'batchserve-bounds-');
  const server = await startTestServer(t, { models: [`affine=${await packAffine(dir)}`], work_dir: dir });
  const answer = await call(`${server.urls.management}/models/affine?batch_size=1000000`, {
    method: 'PUT',
    headers: { authorization: 'Bearer test-token' },
  });
  assert.equal(answer.status, 400);
  assert.equal(answer.body.code, 'BS_ERR_USAGE');
  assert.match(answer.body.error, /max_batch_size: expected a value from 0 to 65536, got 1000000/);
  assert.equal(server.repository.list()[0]?.config.max_batch_size, 8);
});
