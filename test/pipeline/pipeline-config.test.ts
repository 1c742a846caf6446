import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { packArchive } from '../../src/archive/pack.js';
import { validateModelConfig } from '../../src/config/model-config.js';
import { ServerMetrics } from '../../src/metrics/server-metrics.js';
import { ModelRepository } from '../../src/repository/model-repository.js';
import { tempDir } from '../fixtures/temp.js';
import { packAffine } from '../fixtures/server.js';
import { packPipeline, pipelineConfig, STEPS_SOURCE } from './pipeline-fixtures.js';

test('a pipeline config reports every wiring problem at once', () => {
  const raw = {
    inputs: [{ name: 'image', datatype: 'BYTES', shape: [-1] }],
    outputs: [
      { name: 'lines', datatype: 'BYTES', shape: [-1] },
      { name: 'nobody', datatype: 'FP32', shape: [-1] },
    ],
    pipeline: {
      steps: [
        { name: 'a', function: 'steps.js#a', inputs: { x: 'image', y: 'from_c' }, outputs: { out: 'a_out' } },
        { name: 'b', model: 'det', input_map: { x: 'a_out' }, output_map: { y: 'image' } },
        { name: 'c', model: 'rec', input_map: { x: 'missing', z: 'a_out' }, output_map: { y: 'from_c' } },
        { name: 'c', function: 'steps.js#d', model: 'rec', inputs: {}, outputs: { lines: 'lines' } },
        { name: 'e', function: 'steps.txt#e', inputs: {}, outputs: {} },
      ],
    },
  };
  assert.throws(
    () => validateModelConfig(raw, 'pipeline.yaml'),
    (error: Error & { code?: string; problems?: string[] }) => {
      assert.equal(error.code, 'BS_ERR_CONFIG_INVALID');
      const problems = error.problems ?? [];
      const expect = (pattern: RegExp): void =>
        assert.ok(
          problems.some((problem) => pattern.test(problem)),
          `${String(pattern)} in:\n${problems.join('\n')}`,
        );
      expect(/steps\[4\]\.function: expected file\.ts#exportName/);
      expect(/steps\[1\]: tensor "image" is already produced by the pipeline input/);
      expect(/steps\[2\]: input "x" reads tensor "missing", which no step or pipeline input produces/);
      expect(/steps\[3\]\.name: "c" is used by another step/);
      expect(/steps\[3\]: give either "function" or "model"/);
      expect(/outputs\[1\]: no step produces "nobody"/);
      // b reads a's output and writes "image", which a reads: a, b and c wait on each other.
      expect(/a cycle among "a", "b", "c"/);
      return true;
    },
  );
});

test('a pipeline needs its own inputs and outputs', () => {
  assert.throws(
    () =>
      validateModelConfig({ pipeline: { steps: [{ name: 's', function: 'f.js#f', inputs: {}, outputs: {} }] } }, 'p'),
    /inputs: a pipeline must list its inputs.*outputs: a pipeline must list its outputs/s,
  );
});

test('packing a pipeline checks its step files and exports, and writes no model', async (t) => {
  const dir = await tempDir(t);
  const archive = await packPipeline(dir, 'lines', 'affine');
  assert.match(archive, /lines\.mar$/);

  const steps = join(dir, 'steps.mjs');
  const configFile = join(dir, 'broken.yaml');
  await writeFile(
    configFile,
    pipelineConfig('affine')
      .replace('steps.mjs#format', 'steps.mjs#nothing')
      .replace('steps.mjs#split', 'other.mjs#split'),
  );
  await assert.rejects(
    packArchive({ modelName: 'broken', configFile, extraFiles: [steps], exportPath: join(dir, 'out') }),
    (error: Error & { code?: string }) => {
      assert.equal(error.code, 'BS_ERR_HANDLER_INVALID');
      assert.match(error.message, /other\.mjs is not in the archive/);
      assert.match(error.message, /step "format": steps\.mjs does not export "nothing"/);
      return true;
    },
  );
  await assert.rejects(
    packArchive({
      modelName: 'broken',
      configFile: join(dir, 'lines-config.yaml'),
      serializedFile: steps,
      extraFiles: [steps],
      exportPath: join(dir, 'out'),
    }),
    /leave out --serialized-file/,
  );
});

test('TypeScript step files load through tsx', async (t) => {
  const dir = await tempDir(t);
  const steps = join(dir, 'steps.ts');
  await writeFile(steps, STEPS_SOURCE.replace('export let initialized = 0;', 'export let initialized: number = 0;'));
  const configFile = join(dir, 'ts.yaml');
  await writeFile(configFile, pipelineConfig('affine').replaceAll('steps.mjs', 'steps.ts'));
  const packed = await packArchive({ modelName: 'ts', configFile, extraFiles: [steps], exportPath: dir });
  assert.equal(packed.manifest.model.handler, 'pipeline');
  assert.equal(packed.config.max_batch_size, 4);
  assert.equal(packed.config.pipeline?.steps.length, 3);
});

test('a pipeline loads only when its step models are loaded and fit', async (t) => {
  const dir = await tempDir(t);
  const repository = new ModelRepository({ workRoot: await tempDir(t), metrics: new ServerMetrics() });
  t.after(() => repository.unloadAll());
  const configFile = join(dir, 'two.yaml');
  await writeFile(join(dir, 'steps.mjs'), STEPS_SOURCE);
  await writeFile(
    configFile,
    pipelineConfig('affine').replace(
      'pipeline:\n  steps:\n',
      'pipeline:\n  steps:\n    - { name: again, model: other, version: "3", input_map: { x: doc }, output_map: { nope: spare } }\n',
    ),
  );
  const archive = (
    await packArchive({ modelName: 'two', configFile, extraFiles: [join(dir, 'steps.mjs')], exportPath: dir })
  ).path;
  await assert.rejects(repository.load(archive), (error: Error & { code?: string; problems?: string[] }) => {
    assert.equal(error.code, 'BS_ERR_PIPELINE_INVALID');
    assert.deepEqual(error.problems, [
      'step "again": model other version 3 is not loaded (load it before the pipeline)',
      'step "double": model affine is not loaded (load it before the pipeline)',
    ]);
    return true;
  });

  // Loaded now, but `other` does not take what the pipeline feeds it.
  await repository.load(await packAffine(join(dir, 'models'), { width: 4, config: 'max_batch_size: 8\n' }));
  await repository.load(
    await packAffine(join(dir, 'models'), { name: 'other', version: '3', width: 4, config: 'max_batch_size: 8\n' }),
  );
  await assert.rejects(repository.load(archive), (error: Error & { problems?: string[] }) => {
    assert.deepEqual(error.problems, [
      'step "again" (model other version 3): input "x" reads "doc" from pipeline input: datatype BYTES, expected FP32',
      'step "again" (model other version 3): output_map names "nope", not an output of the model (y)',
    ]);
    return true;
  });
});
