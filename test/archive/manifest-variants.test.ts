import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseManifest } from '../../src/archive/manifest.js';
import { BatchserveError } from '../../src/core/errors.js';

const FILE = { size: 1, sha256: 'a'.repeat(64) };

function manifestText(model: Record<string, unknown>, paths: readonly string[]): string {
  return JSON.stringify({
    createdOn: '2026-01-01T00:00:00.000Z',
    runtime: 'onnxruntime',
    model: {
      modelName: 'm',
      serializedFile: 'm.fp16.onnx',
      handler: 'tensor',
      modelVersion: '1',
      configFile: 'c.yaml',
      ...model,
    },
    archiverVersion: '0',
    formatVersion: 1,
    files: ['c.yaml', ...paths].map((path) => ({ path, ...FILE })),
  });
}

function problemsOf(text: string): string {
  try {
    parseManifest(text, 'a.mar');
  } catch (error) {
    assert.ok(error instanceof BatchserveError);
    assert.equal(error.code, 'BS_ERR_ARCHIVE_MANIFEST');
    return error.message;
  }
  assert.fail('expected BS_ERR_ARCHIVE_MANIFEST');
}

test('the precision and optimisation keys are optional, and read when present', () => {
  const optimization = { level: 'extended', onnxruntimeVersion: '1.30.0' };
  const model = { precision: 'fp16', originalFile: 'm.onnx', optimizedFile: 'm.opt.onnx', optimization };
  const parsed = parseManifest(manifestText(model, ['m.onnx', 'm.fp16.onnx', 'm.opt.onnx']), 'a.mar');
  assert.deepEqual(parsed.model.optimization, optimization);
  assert.equal(parseManifest(manifestText({}, ['m.fp16.onnx']), 'a.mar').model.optimizedFile, undefined);
});

test('a variant file the files table does not list, an unknown precision or a bare optimizedFile is refused', () => {
  assert.match(
    problemsOf(manifestText({ originalFile: 'm.onnx' }, [])),
    /model\.originalFile: "m\.onnx" is not in the files table/,
  );
  assert.match(problemsOf(manifestText({ precision: 'int4' }, [])), /model\.precision: expected "fp16" or "int8"/);
  assert.match(
    problemsOf(manifestText({ optimizedFile: 'm.opt.onnx' }, ['m.opt.onnx'])),
    /model\.optimization: expected \{level, onnxruntimeVersion\}/,
  );
});
