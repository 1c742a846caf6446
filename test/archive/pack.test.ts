import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { unpackArchive } from '../../src/archive/extract.js';
import { MANIFEST_PATH, parseManifest } from '../../src/archive/manifest.js';
import { packArchive, type PackOptions } from '../../src/archive/pack.js';
import { openArchive } from '../../src/archive/source.js';
import { verifyArchive } from '../../src/archive/verify.js';
import { ARCHIVE_FORMATS } from '../../src/archive/format.js';
import { BatchserveError } from '../../src/errors.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';

const HANDLER_SOURCE = `export async function postprocess(outputs, requests, context) {
  return context.builtins.tensor.postprocess(outputs, requests, context);
}
`;

async function project(dir: string): Promise<PackOptions & { files: Record<string, string> }> {
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  await writeFile(join(dir, 'handler.js'), HANDLER_SOURCE);
  await writeFile(join(dir, 'labels.txt'), 'a\nb\nc\nd\n');
  await mkdir(join(dir, 'vocab', 'nested'), { recursive: true });
  await writeFile(join(dir, 'vocab', 'nested', 'words.bin'), Buffer.from([0, 1, 2, 255]));
  await writeFile(join(dir, 'model-config.yaml'), 'max_batch_size: 8\nlabels_file: labels.txt\n');
  return {
    modelName: 'affine',
    version: '2.1',
    serializedFile: model,
    handler: join(dir, 'handler.js'),
    configFile: join(dir, 'model-config.yaml'),
    extraFiles: [join(dir, 'labels.txt'), join(dir, 'vocab')],
    exportPath: join(dir, 'out'),
    files: {
      'affine.onnx': model,
      'handler.js': join(dir, 'handler.js'),
      'labels.txt': join(dir, 'labels.txt'),
      'vocab/nested/words.bin': join(dir, 'vocab', 'nested', 'words.bin'),
    },
  };
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof BatchserveError, String(error));
    return error.code;
  }
  assert.fail('expected an error');
}

for (const format of ARCHIVE_FORMATS) {
  test(`pack → unpack gives identical bytes (${format})`, async (t) => {
    const dir = await tempDir(t);
    const options = await project(dir);
    const packed = await packArchive({ ...options, archiveFormat: format });
    assert.equal(packed.path, join(dir, 'out', format === 'dir' ? 'affine' : 'affine.mar'));
    assert.equal(packed.config.max_batch_size, 8);
    assert.deepEqual(
      packed.config.inputs,
      [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }],
      'inferred from the model',
    );

    const source = await openArchive(packed.path);
    const order = source.entries.map((entry) => entry.path);
    await source.close();
    if (format !== 'dir') assert.equal(order.at(-1), MANIFEST_PATH, 'the manifest is written last');

    const target = join(dir, 'unpacked');
    await unpackArchive(packed.path, target);
    for (const [archivePath, original] of Object.entries(options.files)) {
      assert.deepEqual(await readFile(join(target, archivePath)), await readFile(original), archivePath);
    }
    const manifest = parseManifest(await readFile(join(target, MANIFEST_PATH), 'utf8'), target);
    assert.equal(manifest.formatVersion, 1);
    assert.equal(manifest.runtime, 'onnxruntime');
    assert.deepEqual(manifest.model, {
      modelName: 'affine',
      serializedFile: 'affine.onnx',
      handler: 'handler.js',
      modelVersion: '2.1',
      configFile: 'model-config.yaml',
      extraFiles: 'labels.txt,vocab/nested/words.bin',
    });
    assert.deepEqual(
      manifest.files.map((file) => file.path).sort(),
      [...Object.keys(options.files), 'model-config.yaml'].sort(),
    );
    assert.equal((await verifyArchive(packed.path)).ok, true);
  });
}

test('round trip as a property: any extra-file bytes come back unchanged', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  let run = 0;
  await fc.assert(
    fc.asyncProperty(fc.uint8Array({ maxLength: 4096 }), fc.constantFrom(...ARCHIVE_FORMATS), async (bytes, format) => {
      run += 1;
      const extra = join(dir, `blob-${run}.bin`);
      await writeFile(extra, bytes);
      const packed = await packArchive({
        modelName: `m${run}`,
        serializedFile: model,
        extraFiles: [extra],
        exportPath: join(dir, 'out'),
        archiveFormat: format,
      });
      const target = join(dir, `unpacked-${run}`);
      await unpackArchive(packed.path, target);
      assert.deepEqual(new Uint8Array(await readFile(join(target, `blob-${run}.bin`))), bytes);
    }),
    { numRuns: 12 },
  );
});

test('flipping one byte makes verify fail', async (t) => {
  const dir = await tempDir(t);
  const packed = await packArchive({ ...(await project(dir)), archiveFormat: 'zip-store' });
  assert.equal((await verifyArchive(packed.path)).ok, true);
  const bytes = await readFile(packed.path);
  const at = bytes.indexOf(Buffer.from('a\nb\nc\nd\n'));
  assert.ok(at > 0, 'stored entries are uncompressed');
  bytes[at] = 'z'.charCodeAt(0);
  await writeFile(packed.path, bytes);
  const report = await verifyArchive(packed.path);
  assert.equal(report.ok, false);
  assert.deepEqual(
    report.files.filter((file) => file.status !== 'ok').map((file) => [file.path, file.status]),
    [['labels.txt', 'mismatch']],
  );
});

test('an existing output is an error unless forced', async (t) => {
  const dir = await tempDir(t);
  const options = await project(dir);
  const first = await packArchive(options);
  assert.equal(await codeOf(packArchive(options)), 'BS_ERR_OUTPUT_EXISTS');
  const second = await packArchive({ ...options, version: '3', force: true });
  assert.equal(second.path, first.path);
  assert.equal(second.manifest.model.modelVersion, '3');
  assert.deepEqual((await readdir(join(dir, 'out'))).sort(), ['affine.mar'], 'no temporary files left behind');
});

test('bad inputs are refused before anything is written', async (t) => {
  const dir = await tempDir(t);
  const options = await project(dir);
  assert.equal(await codeOf(packArchive({ ...options, modelName: '../evil' })), 'BS_ERR_INVALID_MODEL_NAME');
  assert.equal(await codeOf(packArchive({ ...options, modelName: '-dash' })), 'BS_ERR_INVALID_MODEL_NAME');
  assert.equal(await codeOf(packArchive({ ...options, serializedFile: join(dir, 'nope.onnx') })), 'BS_ERR_INPUT_FILE');

  await writeFile(join(dir, 'not-a-model.onnx'), 'hello');
  assert.equal(
    await codeOf(packArchive({ ...options, serializedFile: join(dir, 'not-a-model.onnx') })),
    'BS_ERR_MODEL_LOAD',
  );

  await writeFile(join(dir, 'wrong-shape.yaml'), 'inputs:\n  - { name: x, datatype: FP32, shape: [-1, 5] }\n');
  assert.equal(
    await codeOf(packArchive({ ...options, configFile: join(dir, 'wrong-shape.yaml') })),
    'BS_ERR_MODEL_SIGNATURE_MISMATCH',
  );
  await writeFile(join(dir, 'typo.yaml'), 'max_batch_sise: 8\n');
  assert.equal(await codeOf(packArchive({ ...options, configFile: join(dir, 'typo.yaml') })), 'BS_ERR_CONFIG_INVALID');
  assert.equal(await codeOf(packArchive({ ...options, extraFiles: [] })), 'BS_ERR_USAGE', 'labels_file not packed');
  assert.equal(
    await codeOf(
      packArchive({ ...options, extraFiles: [...(options.extraFiles ?? []), join(dir, 'model-config.yaml')] }),
    ),
    'BS_ERR_USAGE',
    'an extra file would shadow the generated config',
  );
  assert.equal(await stat(join(dir, 'out')).catch(() => 'absent'), 'absent');
});

test('handlers: only known hooks, importable, TypeScript compiled on import', async (t) => {
  const dir = await tempDir(t);
  const options = await project(dir);
  const handler = async (name: string, source: string): Promise<string> => {
    await writeFile(join(dir, name), source);
    return join(dir, name);
  };
  const unknownHook = await handler(
    'unknown.js',
    'export function preprocess() {}\nexport function postProcess() {}\n',
  );
  assert.equal(await codeOf(packArchive({ ...options, handler: unknownHook })), 'BS_ERR_HANDLER_INVALID');
  const notAFunction = await handler('value.js', 'export const inference = 42;\n');
  assert.equal(await codeOf(packArchive({ ...options, handler: notAFunction })), 'BS_ERR_HANDLER_INVALID');
  const brokenImport = await handler('broken.js', "import './does-not-exist.js';\nexport function preprocess() {}\n");
  assert.equal(await codeOf(packArchive({ ...options, handler: brokenImport })), 'BS_ERR_HANDLER_INVALID');
  assert.equal(await codeOf(packArchive({ ...options, handler: 'no-such-builtin' })), 'BS_ERR_HANDLER_INVALID');

  const typescript = await handler(
    'typed.ts',
    'export function postprocess(outputs: Record<string, unknown>, requests: unknown[]): unknown[] {\n  return requests.map(() => outputs);\n}\n',
  );
  const packed = await packArchive({ ...options, handler: typescript });
  assert.equal(packed.manifest.model.handler, 'typed.ts');
  const builtin = await packArchive({ ...options, handler: 'image-classifier', force: true });
  assert.equal(builtin.manifest.model.handler, 'image-classifier');
  assert.ok(!builtin.manifest.files.some((file) => file.path.endsWith('.js')), 'built-ins are not copied in');
});

test('a real model whose constant weights compress hundreds to one is not mistaken for a zip bomb', async (t) => {
  const dir = await tempDir(t);
  const { costModel } = await import('../fixtures/onnx-models.js');
  const model = await writeModel(dir, 'cost.onnx', costModel());
  const packed = await packArchive({ modelName: 'cost', serializedFile: model, exportPath: dir });
  const source = await openArchive(packed.path);
  const entry = source.entry('cost.onnx');
  await source.close();
  assert.ok(entry && entry.size / entry.compressedSize > 200, 'compresses beyond the ratio limit');
  await unpackArchive(packed.path, join(dir, 'out'));
  assert.deepEqual(await readFile(join(dir, 'out', 'cost.onnx')), await readFile(model));
});
