import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { unlinkSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { unpackArchive } from '../../src/archive/extract.js';
import { MANIFEST_PATH, parseManifest } from '../../src/archive/manifest.js';
import { packArchive, type PackOptions, type PackProgress } from '../../src/archive/pack.js';
import { openArchive } from '../../src/archive/source.js';
import { verifyArchive } from '../../src/archive/verify.js';
import { ARCHIVE_FORMATS } from '../../src/archive/format.js';
import { BatchserveError } from '../../src/core/errors.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { readTree } from '../fixtures/archive-workspace.js';
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
  const builtin = await packArchive({ ...options, handler: 'tensor', force: true });
  assert.equal(builtin.manifest.model.handler, 'tensor');
  assert.ok(!builtin.manifest.files.some((file) => file.path.endsWith('.js')), 'built-ins are not copied in');
});

test('the image-classifier handler is refused at pack for a model it cannot resize images into, until the config fixes the size', async (t) => {
  const dir = await tempDir(t);
  const { tinyImageClassifier } = await import('../fixtures/onnx-models.js');
  const model = await writeModel(dir, 'image.onnx', tinyImageClassifier('height', 'width'));
  const options = { modelName: 'image', serializedFile: model, handler: 'image-classifier', exportPath: dir };
  assert.equal(await codeOf(packArchive(options)), 'BS_ERR_HANDLER_INVALID');
  assert.deepEqual(await readdir(dir), ['image.onnx'], 'no archive written');
  const affine = await writeModel(dir, 'affine.onnx', affineModel([4]));
  assert.equal(await codeOf(packArchive({ ...options, serializedFile: affine })), 'BS_ERR_HANDLER_INVALID');
  await writeFile(join(dir, 'sized.yaml'), 'inputs:\n  - { name: input, datatype: FP32, shape: [-1, 3, 32, 32] }\n');
  const packed = await packArchive({ ...options, configFile: join(dir, 'sized.yaml') });
  assert.deepEqual(packed.config.inputs[0]?.shape, [-1, 3, 32, 32]);
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

test('a default pack: a zip, reported by its real size and sha256, with progress through every phase', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const events: PackProgress[] = [];
  const packed = await packArchive({
    modelName: 'plain',
    serializedFile: model,
    exportPath: dir,
    onProgress: (progress) => events.push(progress),
  });
  assert.equal(packed.format, 'zip');
  assert.equal(packed.path, join(dir, 'plain.mar'));
  const bytes = await readFile(packed.path);
  assert.equal(packed.size, bytes.length);
  assert.equal(packed.sha256, createHash('sha256').update(bytes).digest('hex'));
  assert.equal('extraFiles' in packed.manifest.model, false, 'no extraFiles key without extra files');
  assert.equal(packed.manifest.model.modelVersion, '1.0');
  assert.equal(packed.manifest.model.handler, 'tensor');

  assert.deepEqual(events[0], { phase: 'checking', doneBytes: 0, totalBytes: 0 });
  const hashed = packed.manifest.files.reduce((total, file) => total + file.size, 0);
  const hashing = events.filter((event) => event.phase === 'hashing');
  assert.ok(hashing.length >= packed.manifest.files.length);
  assert.ok(hashing.every((event) => event.totalBytes === hashed));
  assert.ok(hashing.every((event, i) => i === 0 || event.doneBytes > (hashing[i - 1] as PackProgress).doneBytes));
  assert.equal(hashing.at(-1)?.doneBytes, hashed);
  const manifestSize = (await sourceEntrySize(packed.path, MANIFEST_PATH)) as number;
  const writing = events.filter((event) => event.phase === 'writing');
  assert.ok(writing.length > 0, 'writing progress reported');
  assert.ok(
    writing.every((event) => event.totalBytes === hashed + manifestSize && event.doneBytes <= event.totalBytes),
  );
  assert.deepEqual([...new Set(events.map((event) => event.phase))], ['checking', 'hashing', 'writing']);
});

test('a directory archive is a directory; its size is its bytes and its sha256 the manifest’s', async (t) => {
  const dir = await tempDir(t);
  const options = await project(dir);
  const packed = await packArchive({ ...options, archiveFormat: 'dir' });
  assert.equal(packed.format, 'dir');
  assert.ok((await stat(packed.path)).isDirectory());
  const tree = await readTree(packed.path);
  assert.equal(
    packed.size,
    [...tree.values()].reduce((total, bytes) => total + bytes.length, 0),
  );
  assert.equal(
    packed.sha256,
    createHash('sha256')
      .update(tree.get(MANIFEST_PATH) as Buffer)
      .digest('hex'),
  );

  await writeFile(join(dir, 'labels.txt'), 'w\nx\ny\nz\n');
  const again = await packArchive({ ...options, archiveFormat: 'dir', force: true });
  assert.equal(await readFile(join(again.path, 'labels.txt'), 'utf8'), 'w\nx\ny\nz\n');
  assert.deepEqual(await readdir(join(dir, 'out')), ['affine'], 'nothing else left in the export folder');
});

test('archives are written 0o644 whatever the umask', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const previous = process.umask(0);
  try {
    const packed = await packArchive({ modelName: 'umask', serializedFile: model, exportPath: dir });
    assert.equal((await stat(packed.path)).mode & 0o777, 0o644);
  } finally {
    process.umask(previous);
  }
});

test('extra files: missing, special, linked or reserved ones are refused; folders go in sorted', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const base = { modelName: 'extras', serializedFile: model, exportPath: join(dir, 'out') };
  const missing = join(dir, 'missing.txt');
  await assert.rejects(packArchive({ ...base, extraFiles: [missing] }), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_INPUT_FILE');
    assert.ok(error.message.includes(missing), error.message);
    return true;
  });
  assert.equal(await codeOf(packArchive({ ...base, extraFiles: ['/dev/null'] })), 'BS_ERR_INPUT_FILE');

  await mkdir(join(dir, 'linked'));
  await writeFile(join(dir, 'linked', 'real.txt'), 'r');
  await symlink(join(dir, 'linked', 'real.txt'), join(dir, 'linked', 'alias.txt'));
  assert.equal(await codeOf(packArchive({ ...base, extraFiles: [join(dir, 'linked')] })), 'BS_ERR_INPUT_FILE');

  await mkdir(join(dir, 'MAR-INF'));
  await writeFile(join(dir, 'MAR-INF', 'MANIFEST.json'), '{}');
  await assert.rejects(
    packArchive({ ...base, extraFiles: [join(dir, 'MAR-INF')] }),
    (error: Error & { code?: string }) => {
      assert.equal(error.code, 'BS_ERR_USAGE');
      assert.ok(error.message.includes('"MAR-INF/MANIFEST.json"'), error.message);
      return true;
    },
  );
  assert.equal(await stat(join(dir, 'out')).catch(() => 'absent'), 'absent');

  await mkdir(join(dir, 'vocab', 'sub'), { recursive: true });
  for (const name of ['c.txt', 'B.txt', 'a.txt', 'sub/d.txt']) await writeFile(join(dir, 'vocab', name), name);
  const packed = await packArchive({ ...base, extraFiles: [join(dir, 'vocab')] });
  assert.equal(packed.manifest.model.extraFiles, 'vocab/a.txt,vocab/B.txt,vocab/c.txt,vocab/sub/d.txt');
});

test('an existing output is named in the refusal, a missing model in its error', async (t) => {
  const dir = await tempDir(t);
  const options = await project(dir);
  const first = await packArchive(options);
  await assert.rejects(packArchive(options), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_OUTPUT_EXISTS');
    assert.ok(error.message.includes(first.path), error.message);
    return true;
  });
  const missing = join(dir, 'nope.onnx');
  await assert.rejects(packArchive({ ...options, serializedFile: missing }), (error: Error) =>
    error.message.includes(missing),
  );
  await assert.rejects(packArchive({ ...options, modelName: '../evil' }), (error: Error) =>
    error.message.includes('"../evil"'),
  );
});

for (const format of ['zip', 'dir'] as const) {
  test(`a failure while writing (${format}) leaves nothing behind`, async (t) => {
    const dir = await tempDir(t);
    const options = await project(dir);
    const model = options.serializedFile as string;
    // Once everything is hashed, the model vanishes before the archive is written.
    const onProgress = (progress: PackProgress): void => {
      if (progress.phase === 'hashing' && progress.doneBytes === progress.totalBytes) unlinkSync(model);
    };
    await assert.rejects(packArchive({ ...options, archiveFormat: format, onProgress }));
    assert.deepEqual(await readdir(join(dir, 'out')), []);
  });
}

async function sourceEntrySize(location: string, path: string): Promise<number | undefined> {
  const source = await openArchive(location);
  try {
    return source.entry(path)?.size;
  } finally {
    await source.close();
  }
}

test('pack refuses a file it would store under a name every reader refuses, and writes nothing', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  for (const name of [
    'CON',
    'aux.txt',
    'notes.txt:evil',
    'trail.',
    'trail ',
    'a<b',
    'what?.txt',
    'all*.txt',
    'tab\there',
  ]) {
    const folder = await mkdtemp(join(dir, 'extra-'));
    await writeFile(join(folder, name), 'x');
    const exportPath = join(folder, 'out');
    for (const extra of [join(folder, name), folder]) {
      assert.equal(
        await codeOf(packArchive({ modelName: 'm', serializedFile: model, exportPath, extraFiles: [extra] })),
        'BS_ERR_ARCHIVE_UNSAFE_PATH',
        `${JSON.stringify(name)} given as ${extra === folder ? 'its folder' : 'itself'}`,
      );
    }
    assert.equal(await stat(exportPath).catch(() => 'absent'), 'absent');
  }
});
