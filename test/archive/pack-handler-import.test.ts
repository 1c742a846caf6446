import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { packArchive } from '../../src/archive/pack.js';
import { affineModel, writeModel } from '../fixtures/onnx-models.js';
import { tempDir } from '../fixtures/temp.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const HOOK = 'export function postprocess(outputs) { return outputs; }\n';

/** A model, a config with a short handler_load_timeout and a handler whose top level is `atImport`. */
async function workspace(dir: string, atImport: string): Promise<{ model: string; config: string; handler: string }> {
  const model = await writeModel(dir, 'affine.onnx', affineModel([4]));
  const config = join(dir, 'model-config.yaml');
  await writeFile(config, 'max_batch_size: 4\nhandler_load_timeout: 300ms\n');
  const handler = join(dir, 'stuck-handler.js');
  await writeFile(handler, `${atImport}\n${HOOK}`);
  return { model, config, handler };
}

test('pack with a handler that loops for ever at import fails within handler_load_timeout, writing nothing', async (t) => {
  const dir = await tempDir(t, 'batchserve-handler-import-');
  const { model, config, handler } = await workspace(dir, 'for (;;) {}');
  const store = join(dir, 'store');
  const started = performance.now();
  await assert.rejects(
    packArchive({ modelName: 'affine', serializedFile: model, configFile: config, handler, exportPath: store }),
    (error: Error & { code?: string }) =>
      error.code === 'BS_ERR_HANDLER_LOAD_TIMEOUT' && error.message.includes(handler) && /300 ms/.test(error.message),
  );
  const seconds = (performance.now() - started) / 1000;
  assert.ok(seconds < 10, `failed after ${seconds.toFixed(1)} s`);
  assert.deepEqual(await readdir(store).catch(() => []), []);
});

test('model-archive pack with a handler that calls process.exit(0) at import exits non-zero with one line naming it, and writes no archive', async (t) => {
  const dir = await tempDir(t, 'batchserve-handler-import-');
  const { model, config, handler } = await workspace(dir, 'process.exit(0);');
  const store = join(dir, 'store');
  const run = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
    execFile(
      process.execPath,
      [
        join(ROOT, 'bin', 'model-archive.js'),
        'pack',
        '--model-name',
        'affine',
        '--serialized-file',
        model,
        '--config-file',
        config,
        '--handler',
        handler,
        '--export-path',
        store,
      ],
      { cwd: ROOT, timeout: 60_000 },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
    );
  });
  assert.notEqual(run.code, 0, run.stdout + run.stderr);
  const lines = run.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, run.stderr);
  assert.match(
    lines[0] ?? '',
    /stuck-handler\.js called process\.exit\(0\) while being imported \[BS_ERR_HANDLER_INVALID\]$/,
  );
  assert.deepEqual(await readdir(store).catch(() => []), []);
});

test('a handler that imports cleanly still packs, its hooks checked in the worker', async (t) => {
  const dir = await tempDir(t, 'batchserve-handler-import-');
  const { model, config, handler } = await workspace(dir, '');
  const packed = await packArchive({
    modelName: 'affine',
    serializedFile: model,
    configFile: config,
    handler,
    exportPath: join(dir, 'store'),
  });
  assert.equal(packed.manifest.model.handler, 'stuck-handler.js');
  const bad = join(dir, 'bad-handler.js');
  await writeFile(bad, 'export const preprocess = 3;\n');
  await assert.rejects(
    packArchive({
      modelName: 'affine',
      serializedFile: model,
      configFile: config,
      handler: bad,
      exportPath: join(dir, 'other'),
    }),
    { code: 'BS_ERR_HANDLER_INVALID', message: /exports "preprocess" as number, expected a function/ },
  );
});

test("a pipeline's step module that loops or exits at import fails pack within handler_load_timeout, writing nothing", async (t) => {
  const dir = await tempDir(t, 'batchserve-step-import-');
  const config = join(dir, 'pipeline.yaml');
  await writeFile(
    config,
    `handler_load_timeout: 300ms
inputs: [{ name: x, datatype: FP32, shape: [-1, 4] }]
outputs: [{ name: y, datatype: FP32, shape: [-1, 4] }]
pipeline:
  steps:
    - name: copy
      function: steps.mjs#copy
      inputs: { x: x }
      outputs: { y: y }
`,
  );
  const pack = (): Promise<unknown> =>
    packArchive({
      modelName: 'flow',
      configFile: config,
      extraFiles: [join(dir, 'steps.mjs')],
      exportPath: join(dir, 'store'),
    });
  const steps = (atImport: string): Promise<void> =>
    writeFile(
      join(dir, 'steps.mjs'),
      `${atImport}\nexport function copy(requests) { return requests.map((r) => ({ y: r.x })); }\n`,
    );

  await steps('for (;;) {}');
  const started = performance.now();
  await assert.rejects(pack(), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_HANDLER_LOAD_TIMEOUT', error.message);
    assert.match(error.message, /step module .*steps\.mjs did not finish importing within 300 ms/);
    return true;
  });
  assert.ok(performance.now() - started < 10_000);
  await steps('process.exit(0);');
  await assert.rejects(pack(), (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_HANDLER_INVALID', error.message);
    assert.match(error.message, /step module .*steps\.mjs called process\.exit\(0\) while being imported/);
    return true;
  });
  assert.deepEqual(await readdir(join(dir, 'store')).catch(() => []), []);
  await steps('');
  await pack();
  assert.deepEqual(await readdir(join(dir, 'store')), ['flow.mar']);
});
