import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import onnxProto from 'onnx-proto';
import { pino } from 'pino';
import { parseManifest } from '../../src/archive/manifest.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { torchTextFiles, type TorchTextFixture } from '../fixtures/torch-text.js';
import { runCli as cli, type CliRun as Run } from '../fixtures/cli.js';

const { onnx } = onnxProto;

/** y = x · 1e6: its answers (up to 1e6) are beyond float16's largest value, 65504. */
function overflowingModel(): Uint8Array {
  const FLOAT = onnx.TensorProto.DataType.FLOAT;
  const io = (name: string): onnxProto.onnx.IValueInfoProto => ({
    name,
    type: { tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: 'batch' }, { dimValue: 4 }] } } },
  });
  return onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'overflow',
      node: [{ opType: 'Mul', input: ['x', 'scale'], output: ['y'] }],
      initializer: [{ name: 'scale', dataType: FLOAT, dims: [], floatData: [1e6] }],
      input: [io('x')],
      output: [io('y')],
    },
  }).finish();
}

async function manifestOf(archiveDir: string): Promise<ReturnType<typeof parseManifest>> {
  return parseManifest(await readFile(join(archiveDir, 'MAR-INF', 'MANIFEST.json'), 'utf8'), archiveDir);
}

function pack(model: string, out: string, ...extra: string[]): Promise<Run> {
  return cli([
    'model-archive',
    'pack',
    '--model-name',
    'm',
    '--serialized-file',
    model,
    '--export-path',
    out,
    '--archive-format',
    'dir',
    ...extra,
  ]);
}

test('pack --precision fp16 refuses a model whose float16 answers overflow, in one line, writing nothing, --force or not; --accept-accuracy-loss packs it and says so', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'overflow.onnx', overflowingModel());
  const out = join(dir, 'out');

  const refused = await pack(model, out, '--precision', 'fp16');
  assert.equal(refused.code, 1, refused.stderr);
  const lines = refused.stderr.trim().split('\n');
  assert.equal(lines.length, 1, refused.stderr);
  assert.match(lines[0] ?? '', /accuracy gate: the fp16 model differs .* output "y" .*\[BS_ERR_ACCURACY_GATE\]$/);
  assert.deepEqual(await readdir(out).catch(() => []), []);

  // --force only replaces an existing archive: a build script's overwrite must not ship the loss.
  const forced = await pack(model, out, '--precision', 'fp16', '--force');
  assert.equal(forced.code, 1, forced.stderr);
  assert.match(forced.stderr, /\[BS_ERR_ACCURACY_GATE\]$/m);
  assert.deepEqual(await readdir(out).catch(() => []), []);

  const accepted = await pack(model, out, '--precision', 'fp16', '--accept-accuracy-loss');
  assert.equal(accepted.code, 0, accepted.stderr);
  assert.match(accepted.stdout, /accuracy gate FAILED \(packed with --accept-accuracy-loss\)/);
  assert.match(accepted.stdout, /warning: packed anyway \(--accept-accuracy-loss\): output "y"/);
  const manifest = await manifestOf(join(out, 'm'));
  assert.equal(manifest.model.precision, 'fp16');
  assert.equal(manifest.model.accuracy?.passed, false);

  // Serving it says so at start-up, once, as a warning.
  const logged: { level: number; msg: string; model?: string }[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => logged.push(JSON.parse(line)) });
  const server = await startTestServer(t, { models: [`m=${join(out, 'm')}`] }, logger);
  const warned = logged.filter((line) => /failed its accuracy gate/.test(line.msg));
  assert.equal(warned.length, 1, JSON.stringify(logged));
  assert.equal(warned[0]?.model, 'm');
  assert.match(warned[0]?.msg ?? '', /fp16 conversion .*--accept-accuracy-loss/);
  // And the management API's description, which a model registered later is seen through.
  const described = await fetch(`${server.urls.management}/models/m`, {
    headers: { authorization: 'Bearer test-token' },
  });
  const [description] = (await described.json()) as { precision?: string; accuracyGatePassed?: boolean }[];
  assert.equal(description?.precision, 'fp16');
  assert.equal(description?.accuracyGatePassed, false);
});

test('pack --accept-accuracy-loss without --precision is a usage error, in one line, writing nothing', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const out = join(dir, 'out');
  const result = await pack(model, out, '--accept-accuracy-loss');
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr.trim(), /^[^\n]*--accept-accuracy-loss needs --precision[^\n]*$/);
  assert.deepEqual(await readdir(out).catch(() => []), []);
});

test('pack --precision fp16 --optimize: the gate figures, precision and optimisation are in the manifest, inspect and verify', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const out = join(dir, 'out');
  const packed = await pack(model, out, '--precision', 'fp16', '--optimize');
  assert.equal(packed.code, 0, packed.stderr);
  assert.match(
    packed.stdout,
    /accuracy gate passed: 64 random samples, limits max rel error 0\.05, top-1 agreement 0\.98/,
  );
  assert.match(packed.stdout, /the gate ran on seeded random inputs, .* --calibration-data DIR judges it/);
  assert.match(packed.stdout, /session start-up [\d.]+ ms → [\d.]+ ms/);

  const archive = join(out, 'm');
  const { model: info, files } = await manifestOf(archive);
  assert.equal(info.serializedFile, 'affine.fp16.onnx');
  assert.equal(info.originalFile, 'affine.onnx');
  assert.equal(info.optimizedFile, 'affine.fp16.optimized.onnx');
  assert.equal(info.optimization?.level, 'extended');
  assert.match(info.optimization?.onnxruntimeVersion ?? '', /^\d+\.\d+\.\d+/);
  assert.equal(info.accuracy?.inputs, 'random');
  assert.equal(info.accuracy?.passed, true);
  const [y] = info.accuracy?.outputs ?? [];
  assert.equal(y?.name, 'y');
  assert.ok(y?.maxRelError !== null && y !== undefined && y.maxRelError < 0.01, JSON.stringify(y));
  assert.deepEqual(files.map((file) => file.path).sort(), [
    'affine.fp16.onnx',
    'affine.fp16.optimized.onnx',
    'affine.onnx',
    'model-config.yaml',
  ]);

  const inspected = await cli(['model-archive', 'inspect', archive]);
  assert.equal(inspected.code, 0, inspected.stderr);
  assert.match(inspected.stdout, /precision {2}fp16 \(affine\.fp16\.onnx, converted from affine\.onnx\)/);
  assert.match(inspected.stdout, /optimised {2}affine\.fp16\.optimized\.onnx: level extended, onnxruntime \d/);
  assert.match(inspected.stdout, /accuracy gate passed: 64 random samples/);
  // [batch, 4] float: a classifier output by shape, so its top-1 agreement is shown too.
  assert.match(inspected.stdout, /│ y +│ (0|\d\.\d\de-\d) +│ (0|\d\.\d\de-\d) +│ 100\.0 % +│/);

  const verified = await cli(['model-archive', 'verify', archive, '--json']);
  assert.equal(verified.code, 0, verified.stderr);
  const report = JSON.parse(verified.stdout) as { files: { path: string }[] };
  assert.ok(
    report.files.some((file) => file.path === 'affine.fp16.optimized.onnx'),
    verified.stdout,
  );
  // A changed optimised graph fails verify like any other file.
  await writeFile(join(archive, 'affine.fp16.optimized.onnx'), 'not a model');
  assert.equal((await cli(['model-archive', 'verify', archive])).code, 1);
});

test('pack --help lists every conversion flag with its default', async () => {
  const help = await cli(['model-archive', 'pack', '--help']);
  assert.equal(help.code, 0, help.stderr);
  for (const pattern of [
    /--optimize .*\(default: false\)/,
    /--precision <precision> .*\(choices: "fp16", "int8"\)/,
    /--keep-io-types \[boolean\] .*\(default: true\)/,
    /--fp32-ops <ops>/,
    /--calibration-data <dir> .*default: seeded random/,
    /--max-error <x> .*default: fp16 0\.05, int8/,
    /--min-agreement <fraction> .*default: fp16 0\.98, int8/,
    /--accept-accuracy-loss .*accuracy gate .*\(default: false\)/,
    /-f, --force +replace an existing archive \(default: false\)/,
  ]) {
    assert.match(help.stdout.replace(/\n\s+/g, ' '), pattern);
  }
});

test('pack --calibration-data runs the gate on the folder’s rows and records them as calibration samples', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const calibration = join(dir, 'calibration');
  await mkdir(calibration);
  // 5 rows of 4 float32 values, raw little-endian.
  await writeFile(join(calibration, 'rows.bin'), Buffer.from(new Float32Array(20).fill(0.25).buffer));
  const out = join(dir, 'out');
  const packed = await pack(model, out, '--precision', 'fp16', '--calibration-data', calibration);
  assert.equal(packed.code, 0, packed.stderr);
  assert.match(packed.stdout, /accuracy gate passed: 5 calibration samples/);
  assert.doesNotMatch(packed.stdout, /seeded random inputs/);
  const { model: info } = await manifestOf(join(out, 'm'));
  assert.equal(info.accuracy?.inputs, 'calibration');
  assert.equal(info.accuracy?.samples, 5);
  assert.equal(info.serializedFile, 'affine.fp16.onnx');
});

/** y = table[i]: a lookup in a table of 2 rows, which the gate's integers 0–9 overflow. */
function lookupModel(): Uint8Array {
  const FLOAT = onnx.TensorProto.DataType.FLOAT;
  const dims = { dim: [{ dimParam: 'batch' }, { dimValue: 3 }] };
  return onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 13 }],
    graph: {
      name: 'lookup',
      node: [{ opType: 'Gather', input: ['table', 'i'], output: ['y'] }],
      initializer: [{ name: 'table', dataType: FLOAT, dims: [2, 4], floatData: [1, 2, 3, 4, 5, 6, 7, 8] }],
      input: [{ name: 'i', type: { tensorType: { elemType: onnx.TensorProto.DataType.INT64, shape: dims } } }],
      output: [
        {
          name: 'y',
          type: {
            tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: 'batch' }, { dimValue: 3 }, { dimValue: 4 }] } },
          },
        },
      ],
    },
  }).finish();
}

/** pack of a torch-text fixture with its tokenizer, as the text handlers serve it. */
async function packText(dir: string, name: TorchTextFixture, ...extra: string[]): Promise<Run> {
  const files = torchTextFiles(name);
  const config = join(dir, `${name}.yaml`);
  await writeFile(config, 'text:\n  tokenizer_file: tokenizer.json\n');
  return cli([
    'model-archive',
    'pack',
    '--model-name',
    name,
    '--serialized-file',
    files.model,
    '--handler',
    name === 'encoder-bert' ? 'text-embedding' : 'text-generation',
    '--config-file',
    config,
    '--extra-files',
    files.tokenizer,
    '--export-path',
    join(dir, 'out'),
    '--archive-format',
    'dir',
    '--force',
    ...extra,
  ]);
}

for (const precision of ['fp16', 'int8'] as const) {
  test(`pack --precision ${precision} on the torch-text exports: the BERT encoder gets type ids 0 and a mask of ones, each decoder a cache that agrees with its mask and positions, and a decoder is judged on its logits`, async (t) => {
    const dir = await tempDir(t);
    const judged = new Map<TorchTextFixture, string>([
      ['encoder-bert', 'last_hidden_state'],
      ['decoder-gpt2', 'logits'],
      ['decoder-gpt2-nopos', 'logits'],
      ['decoder-llama', 'logits'],
    ]);
    for (const [name, output] of judged) {
      const packed = await packText(dir, name, '--precision', precision);
      assert.equal(packed.code, 0, `${name}: ${packed.stderr}`);
      assert.match(packed.stdout, /accuracy gate passed: 64 random samples/, name);
      const { model: info } = await manifestOf(join(dir, 'out', name));
      assert.equal(info.precision, precision);
      assert.deepEqual(
        info.accuracy?.outputs.map((figures) => figures.name),
        [output],
        name,
      );
    }
    // Optimum's merged decoder chooses its branch with an If, which no conversion here rewrites.
    const merged = await packText(dir, 'decoder-llama-merged', '--precision', precision);
    assert.equal(merged.code, 1, merged.stderr);
    assert.match(merged.stderr.trim(), /^[^\n]*control flow is not converted \[BS_ERR_CONVERSION_FAILED\]$/);
  });
}

test('pack --precision refuses in one line naming --calibration-data what the gate cannot feed: inputs the original model fails on, a decoder whose cache would turn float16', async (t) => {
  const dir = await tempDir(t);
  const model = await writeModel(dir, 'lookup.onnx', lookupModel());
  const refused = await pack(model, join(dir, 'out'), '--precision', 'fp16');
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(
    refused.stderr.trim(),
    /^[^\n]*random inputs make the original model fail \(.*Gather.*\); pass --calibration-data DIR[^\n]*\[BS_ERR_USAGE\]$/,
  );
  assert.deepEqual(await readdir(join(dir, 'out')).catch(() => []), []);

  const halfCache = await packText(dir, 'decoder-llama', '--precision', 'fp16', '--keep-io-types=false');
  assert.equal(halfCache.code, 2, halfCache.stderr);
  assert.match(halfCache.stderr.trim(), /^[^\n]*--keep-io-types=false .*float16.*\[BS_ERR_USAGE\]$/);
});
