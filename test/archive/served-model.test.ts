import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ArchiveManifest } from '../../src/archive/manifest.js';
import { servedModelFile } from '../../src/archive/served-model.js';
import { onnxruntimeVersion } from '../../src/runtime/optimized-graph.js';

function manifest(model: Partial<ArchiveManifest['model']>): ArchiveManifest {
  return {
    createdOn: '2026-01-01T00:00:00.000Z',
    runtime: 'onnxruntime',
    model: {
      modelName: 'm',
      serializedFile: 'm.onnx',
      handler: 'tensor',
      modelVersion: '1',
      configFile: 'c.yaml',
      ...model,
    },
    archiverVersion: '0',
    formatVersion: 1,
    files: [],
  };
}

const optimized = {
  optimizedFile: 'm.optimized.onnx',
  optimization: { level: 'extended', onnxruntimeVersion: onnxruntimeVersion() },
};

test('the optimised graph is served on cpu only, with the onnxruntime that saved it', () => {
  assert.deepEqual(servedModelFile(manifest(optimized), 'cpu'), { file: 'm.optimized.onnx' });
  for (const device of ['cuda:0', 'tensorrt:1', 'webgpu', 'auto']) {
    assert.deepEqual(servedModelFile(manifest(optimized), device), {
      file: 'm.onnx',
      fallback: `serving m.onnx instead of m.optimized.onnx: the optimised graph is for the cpu device, this instance runs on ${device}`,
    });
  }
  const older = { ...optimized, optimization: { level: 'extended', onnxruntimeVersion: '1.0.0' } };
  assert.match(servedModelFile(manifest(older), 'cpu').fallback ?? '', /saved by onnxruntime 1\.0\.0, this is /);
  assert.deepEqual(servedModelFile(manifest({}), 'cpu'), { file: 'm.onnx' });
});
