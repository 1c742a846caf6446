import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEMO_MODEL_PATH } from '../../src/runtime/demo-model.js';
import { modelFiles, withManifest } from '../fixtures/archive-workspace.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { rawZip } from '../fixtures/raw-zip.js';
import { tempDir } from '../fixtures/temp.js';
import { runCli as cli, type CliRun as Run } from '../fixtures/cli.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const EXAMPLE = join(ROOT, 'examples', 'orientation');

function packDemo(out: string, ...extra: string[]): Promise<Run> {
  return cli([
    'model-archive',
    'pack',
    '--model-name',
    'orientation',
    '--serialized-file',
    DEMO_MODEL_PATH,
    '--handler',
    'image-classifier',
    '--config-file',
    join(EXAMPLE, 'model-config.yaml'),
    '--extra-files',
    join(EXAMPLE, 'labels.txt'),
    '--export-path',
    out,
    ...extra,
  ]);
}

/** An expected failure prints exactly one line on stderr, naming its code. */
function assertOneLineError(run: Run, exitCode: number, code: string): void {
  assert.equal(run.code, exitCode, run.stderr);
  const lines = run.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, run.stderr);
  assert.match(lines[0] ?? '', new RegExp(`^batchserve: .*\\[${code}\\]$`));
}

test('pack → inspect → verify on the demo model; a flipped byte fails verify', async (t) => {
  const out = await tempDir(t);
  const packed = await packDemo(out, '--archive-format', 'zip-store');
  assert.equal(packed.code, 0, packed.stderr);
  assert.equal(packed.stderr, '', 'no spinner noise when stderr is not a terminal');
  assert.match(packed.stdout, /^packed .*orientation\.mar \(zip-store, [\d.]+ KiB, 3 files, sha256 [0-9a-f]{64}\)\n$/);
  const archive = join(out, 'orientation.mar');

  const inspected = await cli(['model-archive', 'inspect', '--json', archive]);
  assert.equal(inspected.code, 0, inspected.stderr);
  const report = JSON.parse(inspected.stdout) as {
    model: { inputs: unknown[]; outputs: unknown[] };
    config: { inputs: unknown[]; max_batch_size: number };
    manifest: { model: { handler: string } };
  };
  assert.deepEqual(report.model.inputs, [{ name: 'x', datatype: 'FP32', shape: [-1, 3, -1, -1] }]);
  assert.deepEqual(report.model.outputs, [{ name: 'softmax_0.tmp_0', datatype: 'FP32', shape: [-1, 2] }]);
  assert.deepEqual(report.config.inputs, [{ name: 'x', datatype: 'FP32', shape: [-1, 3, 48, 192] }]);
  assert.equal(report.manifest.model.handler, 'image-classifier');

  const human = await cli(['model-archive', 'inspect', archive]);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, /softmax_0\.tmp_0/);
  assert.match(human.stdout, /\[-1, 3, 48, 192\]/);

  const verified = await cli(['model-archive', 'verify', archive]);
  assert.equal(verified.code, 0, verified.stderr);
  assert.match(verified.stdout, /all 3 files match the manifest/);

  const bytes = await readFile(archive);
  const at = bytes.indexOf(Buffer.from('180'));
  bytes[at] = (bytes[at] as number) ^ 0xff;
  await writeFile(archive, bytes);
  const tampered = await cli(['verify', archive], { bin: 'model-archive.js' });
  assertOneLineError(tampered, 1, 'BS_ERR_ARCHIVE_INTEGRITY');
  assert.match(tampered.stderr, /labels\.txt: mismatch/);
});

test('usage errors exit 2 with one line', async () => {
  const missing = await cli(['model-archive', 'pack', '--serialized-file', 'x.onnx']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /required option '--model-name <name>' not specified/);
  assert.equal((await cli(['model-archive', 'pack', '--bogus'])).code, 2);
  assert.equal((await cli(['model-archive', 'unpack'])).code, 2);
  assert.equal((await cli(['model-archive', 'init', '--template', 'nope'])).code, 2);
  const badName = await cli(['model-archive', 'pack', '--model-name', '../x', '--serialized-file', DEMO_MODEL_PATH]);
  assertOneLineError(badName, 2, 'BS_ERR_INVALID_MODEL_NAME');
  assert.equal((await cli(['--help'])).code, 0);
  assert.equal(
    (await cli(['--version'])).stdout.trim(),
    (JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version,
  );
});

test('a config error names the file and the key', async (t) => {
  const dir = await tempDir(t);
  const config = join(dir, 'model-config.yaml');
  await writeFile(config, 'max_batch_size: 4\ndynamic_batching:\n  max_queue_dealy: 5ms\n');
  const run = await cli([
    'model-archive',
    'pack',
    '--model-name',
    'm',
    '--serialized-file',
    await writeModel(dir, 'm.onnx', affineModel()),
    '--config-file',
    config,
    '--export-path',
    dir,
  ]);
  assertOneLineError(run, 1, 'BS_ERR_CONFIG_INVALID');
  assert.ok(run.stderr.includes(`${config}: dynamic_batching.max_queue_dealy: unknown key`));
  assert.deepEqual((await readdir(dir)).sort(), ['m.onnx', 'model-config.yaml'], 'nothing written');
});

test('unpack extracts once and refuses to overwrite without --force', async (t) => {
  const out = await tempDir(t);
  assert.equal((await packDemo(out)).code, 0);
  const target = join(out, 'unpacked');
  const first = await cli(['model-archive', 'unpack', join(out, 'orientation.mar'), '--output', target]);
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual((await readdir(target)).sort(), [
    'MAR-INF',
    'ch_ppocr_mobile_v2.0_cls_infer.onnx',
    'labels.txt',
    'model-config.yaml',
  ]);
  assert.deepEqual(
    await readFile(join(target, 'ch_ppocr_mobile_v2.0_cls_infer.onnx')),
    await readFile(DEMO_MODEL_PATH),
  );
  assertOneLineError(
    await cli(['model-archive', 'unpack', join(out, 'orientation.mar'), '--output', target]),
    1,
    'BS_ERR_OUTPUT_EXISTS',
  );
  assert.equal(
    (await cli(['model-archive', 'unpack', join(out, 'orientation.mar'), '--output', target, '--force'])).code,
    0,
  );
});

test('init writes a template that packs as it is', async (t) => {
  const dir = await tempDir(t);
  const init = await cli(['model-archive', 'init', '--template', 'tensor', '--dir', dir]);
  assert.equal(init.code, 0, init.stderr);
  assert.deepEqual((await readdir(dir)).sort(), ['handler.js', 'model-config.yaml']);
  assertOneLineError(await cli(['model-archive', 'init', '--dir', dir]), 1, 'BS_ERR_OUTPUT_EXISTS');
  assert.equal((await cli(['model-archive', 'init', '--dir', dir, '--force'])).code, 0);
  const model = await writeModel(dir, 'affine.onnx', affineModel());
  const pack = await cli([
    'model-archive',
    'pack',
    '--model-name',
    'affine',
    '--serialized-file',
    model,
    '--handler',
    join(dir, 'handler.js'),
    '--config-file',
    join(dir, 'model-config.yaml'),
    '--export-path',
    dir,
  ]);
  assert.equal(pack.code, 0, pack.stderr);

  const image = await tempDir(t);
  assert.equal((await cli(['model-archive', 'init', '--template', 'image-classifier', '--dir', image])).code, 0);
  assert.deepEqual((await readdir(image)).sort(), ['handler.js', 'labels.txt', 'model-config.yaml']);
});

test('over-long entry names end unpack with one line and exit 1, never a stack and 70', async (t) => {
  const dir = await tempDir(t);
  const archiveWith = async (file: string, name: string): Promise<string> => {
    const files = withManifest(new Map([...modelFiles(), [name, Buffer.from('x')]]));
    await writeFile(join(dir, file), rawZip([...files].map(([path, data]) => ({ name: path, data }))));
    return join(dir, file);
  };
  const long = await archiveWith('long.mar', 'a'.repeat(5000));
  for (const command of ['inspect', 'verify']) {
    assertOneLineError(await cli(['model-archive', command, long]), 1, 'BS_ERR_ARCHIVE_UNSAFE_PATH');
  }
  const out = join(dir, 'out');
  assertOneLineError(await cli(['model-archive', 'unpack', long, '--output', out]), 1, 'BS_ERR_ARCHIVE_UNSAFE_PATH');
  // Within the name rule (4 segments of 250 bytes), but not under a target 3,400 bytes deep:
  // together they pass Linux's PATH_MAX of 4,096.
  const legal = await archiveWith('legal.mar', Array.from({ length: 4 }, () => 'b'.repeat(250)).join('/'));
  const deep = join(dir, ...Array.from({ length: 17 }, () => 'd'.repeat(200)), 'out');
  assertOneLineError(await cli(['model-archive', 'unpack', legal, '--output', deep]), 1, 'BS_ERR_ARCHIVE_UNSAFE_PATH');
  assert.equal((await cli(['model-archive', 'unpack', legal, '--output', out])).code, 0, 'it unpacks where it fits');
});
