import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { importTorchServeArchive } from '../../src/archive/import-torchserve.js';
import { readArchiveContents } from '../../src/archive/read.js';
import { openArchive } from '../../src/archive/source.js';
import { affineModel } from '../fixtures/onnx-models.js';
import { rawZip, type RawZipEntry } from '../fixtures/raw-zip.js';
import { affine, affineRequest, call, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';

const BIN = fileURLToPath(new URL('../../../bin/batchserve.js', import.meta.url));

function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/**
 * The layout torch-model-archiver 0.12 writes (pytorch/serve, model-archiver): every file
 * flat at the root, a folder of extra files under its own name, and MAR-INF/MANIFEST.json
 * with runtime python and the model's names, no sizes or hashes.
 */
function torchServeMar(model: Record<string, string>, files: readonly RawZipEntry[]): Buffer {
  const manifest = { createdOn: '04/12/2026 10:00:00', runtime: 'python', model, archiverVersion: '0.12.0' };
  return rawZip([...files, { name: 'MAR-INF/MANIFEST.json', data: JSON.stringify(manifest, null, 2) }]);
}

const ONNX = { name: 'affine.onnx', data: Buffer.from(affineModel()), method: 'deflate' as const };
const TORCHSERVE_CONFIG = [
  'minWorkers: 2',
  'maxWorkers: 4',
  'batchSize: 4',
  'maxBatchDelay: 5',
  'responseTimeout: 120',
  'deviceType: cpu',
  '',
].join('\n');

async function writeMar(t: TestContext, bytes: Buffer): Promise<{ dir: string; mar: string }> {
  const dir = await tempDir(t);
  const mar = join(dir, 'affine.mar');
  await writeFile(mar, bytes);
  return { dir, mar };
}

test('a torch-model-archiver .mar with an ONNX model: import packs it with its config keys mapped and its extra files, says what differs, and it serves', async (t) => {
  const { dir, mar } = await writeMar(
    t,
    torchServeMar(
      {
        modelName: 'affine',
        serializedFile: 'affine.onnx',
        handler: 'image_classifier',
        modelVersion: '2.0',
        configFile: 'model-config.yaml',
      },
      [
        ONNX,
        { name: 'model-config.yaml', data: TORCHSERVE_CONFIG },
        { name: 'index_to_name.json', data: '{"0": ["n02123045", "cat"], "1": "dog", "2": "owl", "3": "fox"}' },
        { name: 'assets/vocab.txt', data: 'a\nb\n' },
      ],
    ),
  );
  const { pack, differences } = await importTorchServeArchive({ source: mar, exportPath: join(dir, 'store') });

  assert.equal(pack.manifest.model.modelName, 'affine');
  assert.equal(pack.manifest.model.modelVersion, '2.0');
  assert.equal(pack.manifest.model.handler, 'tensor');
  assert.equal(pack.config.max_batch_size, 4);
  assert.equal(pack.config.dynamic_batching.max_queue_delay, 5_000);
  assert.deepEqual(
    pack.config.instances.map((group) => group.count),
    [2],
  );
  assert.deepEqual(pack.manifest.files.map((file) => file.path).sort(), [
    'affine.onnx',
    'assets/vocab.txt',
    'index_to_name.json',
    'index_to_name.txt',
    'model-config.yaml',
  ]);
  assert.equal(pack.config.labels_file, 'index_to_name.txt');
  assert.ok(
    differences.some((line) => /index_to_name.json's 4 class names written to index_to_name.txt/.test(line)),
    differences.join('\n'),
  );
  assert.ok(
    differences.some((line) => /built-in "image_classifier" handler is not run/.test(line)),
    differences.join('\n'),
  );
  assert.ok(
    differences.some((line) => /"maxWorkers", "responseTimeout", "deviceType" not carried/.test(line)),
    differences.join('\n'),
  );

  // Our reader takes what import wrote, hashes and all; the server answers with it.
  const source = await openArchive(pack.path);
  t.after(() => source.close());
  assert.equal((await readArchiveContents(source)).manifest.model.modelName, 'affine');
  const server = await startTestServer(t, { models: [`affine=${pack.path}`] });
  const answer = await call(`${server.urls.inference}/v2/models/affine/infer`, {
    body: affineRequest([[1, 2, 3, 4]]),
  });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.deepEqual(answer.body.outputs[0].data, affine([[1, 2, 3, 4]]));
  // TorchServe's class names label the classification extension's answer.
  const scores = affine([[1, 2, 3, 4]]);
  const best = scores.indexOf(Math.max(...scores));
  const classified = await call(`${server.urls.inference}/v2/models/affine/infer`, {
    body: affineRequest([[1, 2, 3, 4]], { outputs: [{ name: 'y', parameters: { classification: 1 } }] }),
  });
  assert.deepEqual(classified.body.outputs[0].data, [
    `${scores[best]?.toFixed(6)}:${best}:${['cat', 'dog', 'owl', 'fox'][best]}`,
  ]);
});

test('import refuses an index_to_name.json it cannot read as class names, in one line', async (t) => {
  for (const [data, why] of [
    ['{"0": "cat"', /index_to_name.json is not JSON/],
    ['["cat", "dog"]', /index_to_name.json is not an object of class indices/],
    ['{"0": "cat", "2": "owl"}', /index_to_name.json has no name for class 1 \(keys must be the indices 0 to 1/],
  ] as const) {
    const { dir, mar } = await writeMar(
      t,
      torchServeMar({ modelName: 'affine', serializedFile: 'affine.onnx', handler: 'image_classifier' }, [
        ONNX,
        { name: 'index_to_name.json', data },
      ]),
    );
    await assert.rejects(importTorchServeArchive({ source: mar, exportPath: join(dir, 'store') }), (error: Error) => {
      assert.match(error.message, why);
      assert.ok(!error.message.includes('\n'));
      return true;
    });
    assert.deepEqual(await readdir(dir), ['affine.mar'], 'nothing written');
  }
});

test('import refuses a PyTorch serialized file, and a Python handler unless --handler replaces it, in one line each, writing nothing', async (t) => {
  const { dir, mar: pt } = await writeMar(
    t,
    torchServeMar({ modelName: 'resnet', serializedFile: 'resnet18.pt', handler: 'image_classifier' }, [
      { name: 'resnet18.pt', data: 'PK-not-really-torchscript' },
    ]),
  );
  const store = join(dir, 'store');
  const refused = await cli(['model-archive', 'import', pt, '--export-path', store]);
  assert.equal(refused.code, 1, refused.stderr);
  assert.equal(refused.stderr.trim().split('\n').length, 1, refused.stderr);
  assert.match(refused.stderr, /"resnet18\.pt" is not ONNX.*torch\.onnx\.export.*\[BS_ERR_ARCHIVE_TORCHSERVE\]$/m);

  const python = join(dir, 'python.mar');
  await writeFile(
    python,
    torchServeMar({ modelName: 'affine', serializedFile: 'affine.onnx', handler: 'my_handler' }, [
      ONNX,
      { name: 'my_handler.py', data: 'def handle(data, context):\n    return data\n' },
    ]),
  );
  const noHandler = await cli(['model-archive', 'import', python, '--export-path', store]);
  assert.equal(noHandler.code, 1, noHandler.stderr);
  assert.equal(noHandler.stderr.trim().split('\n').length, 1, noHandler.stderr);
  assert.match(noHandler.stderr, /handler "my_handler" is Python.*--handler.*\[BS_ERR_ARCHIVE_TORCHSERVE\]$/m);
  assert.deepEqual(await readdir(store).catch(() => []), [], 'nothing written');

  const replaced = await cli(['model-archive', 'import', python, '--export-path', store, '--handler', 'tensor']);
  assert.equal(replaced.code, 0, replaced.stderr);
  assert.match(replaced.stdout, /^differs: its handler "my_handler" is not run: "tensor" serves the model instead$/m);
  assert.match(replaced.stdout, /^differs: 1 Python file\(s\) not carried \("my_handler\.py"\)/m);
  assert.match(replaced.stdout, /^imported .*python\.mar as .*affine\.mar \(zip, /m);
});

test('inspect, verify and serve name a torch-model-archiver .mar for what it is and the command that converts it', async (t) => {
  const { mar } = await writeMar(
    t,
    torchServeMar({ modelName: 'affine', serializedFile: 'affine.onnx', handler: 'image_classifier' }, [ONNX]),
  );
  for (const command of [
    ['model-archive', 'inspect', mar],
    ['model-archive', 'verify', mar],
  ]) {
    const run = await cli(command);
    assert.equal(run.code, 1, run.stderr);
    assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
    assert.match(
      run.stderr,
      /was made by torch-model-archiver.*`batchserve model-archive import .*affine\.mar`.*\[BS_ERR_ARCHIVE_TORCHSERVE\]$/m,
      command[1],
    );
  }
  await assert.rejects(startTestServer(t, { models: [`affine=${mar}`] }), { code: 'BS_ERR_ARCHIVE_TORCHSERVE' });
});
