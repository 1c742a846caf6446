import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { MANIFEST_PATH, parseManifest } from '../../src/archive/manifest.js';
import { BatchserveError } from '../../src/core/errors.js';

const SOURCE = '/archives/test.mar';
const SHA = 'a'.repeat(64);

function validManifest(): Record<string, unknown> {
  return {
    createdOn: '2024-01-01T00:00:00.000Z',
    runtime: 'onnxruntime',
    model: {
      modelName: 'm',
      serializedFile: 'model.onnx',
      handler: 'tensor',
      modelVersion: '1.0',
      configFile: 'model-config.yaml',
    },
    archiverVersion: 'test',
    formatVersion: 1,
    files: [
      { path: 'model.onnx', size: 10, sha256: SHA },
      { path: 'model-config.yaml', size: 0, sha256: '0123456789abcdef'.repeat(4) },
    ],
  };
}

/**
 * The fields a rejected manifest is blamed for, in order. Every problem is reported at once,
 * each led by the path of the field it is about.
 */
function blamedFields(value: unknown): string[] {
  try {
    parseManifest(typeof value === 'string' ? value : JSON.stringify(value), SOURCE);
  } catch (error) {
    assert.ok(error instanceof BatchserveError, String(error));
    assert.equal(error.code, 'BS_ERR_ARCHIVE_MANIFEST');
    const prefix = `${SOURCE}: ${MANIFEST_PATH}: `;
    assert.ok(error.message.startsWith(prefix), error.message);
    return error.message
      .slice(prefix.length)
      .split('; ')
      .map((problem) => problem.split(/[: ]/)[0] as string);
  }
  assert.fail('expected BS_ERR_ARCHIVE_MANIFEST');
}

function withModel(model: unknown): Record<string, unknown> {
  return { ...validManifest(), model };
}

/** The valid manifest's files with `file` after them, at files[2]. */
function withFile(file: unknown): Record<string, unknown> {
  return { ...validManifest(), files: [...(validManifest().files as unknown[]), file] };
}

describe('parseManifest', () => {
  test('a valid manifest comes back as parsed', () => {
    assert.deepEqual(parseManifest(JSON.stringify(validManifest()), SOURCE), validManifest());
  });

  test('text that is not JSON, or JSON that is not an object, is refused as a whole', () => {
    for (const text of ['{', '', 'null', '42', '"manifest"', '[]', '[{"formatVersion":1}]', 'true']) {
      assert.throws(
        () => parseManifest(text, SOURCE),
        (error: Error & { code?: string }) => {
          assert.equal(error.code, 'BS_ERR_ARCHIVE_MANIFEST');
          assert.ok(error.message.startsWith(`${SOURCE}: ${MANIFEST_PATH} `), error.message);
          assert.ok(/JSON/.test(error.message), error.message);
          return true;
        },
        text,
      );
    }
  });

  test('another format version is refused', () => {
    for (const formatVersion of [0, 2, '1', null]) {
      assert.deepEqual(blamedFields({ ...validManifest(), formatVersion }), ['formatVersion']);
    }
    assert.deepEqual(blamedFields({ ...validManifest(), formatVersion: undefined }), ['formatVersion']);
  });

  test('model must be an object', () => {
    for (const model of [null, 'm', 7]) assert.deepEqual(blamedFields(withModel(model)), ['model'], String(model));
    assert.deepEqual(blamedFields(withModel(undefined)), ['model']);
  });

  test('each model field must be a non-empty string', () => {
    const model = validManifest().model as Record<string, unknown>;
    for (const key of ['modelName', 'serializedFile', 'handler', 'modelVersion', 'configFile']) {
      for (const value of ['', 5, null, undefined, ['x']]) {
        assert.deepEqual(
          blamedFields(withModel({ ...model, [key]: value })),
          [`model.${key}`],
          `${key}: ${JSON.stringify(value)}`,
        );
      }
    }
    assert.deepEqual(blamedFields(withModel({})), [
      'model.modelName',
      'model.serializedFile',
      'model.handler',
      'model.modelVersion',
      'model.configFile',
    ]);
  });

  test('files must be an array', () => {
    for (const files of [undefined, null, {}, 'a']) {
      assert.deepEqual(blamedFields({ ...validManifest(), files }), ['files'], JSON.stringify(files));
    }
  });

  test('each file needs a path, a non-negative integer size and a lowercase hex sha256', () => {
    assert.deepEqual(blamedFields(withFile({ path: '', size: 1, sha256: SHA })), ['files[2].path']);
    assert.deepEqual(blamedFields(withFile({ path: 7, size: 1, sha256: SHA })), ['files[2].path']);
    for (const size of [-1, 1.5, '1', null, 2 ** 53]) {
      assert.deepEqual(blamedFields(withFile({ path: 'p', size, sha256: SHA })), ['files[2].size'], String(size));
    }
    for (const sha256 of ['A'.repeat(64), 'a'.repeat(63), 'a'.repeat(65), `x${SHA}`, `${SHA}x`, 5, null]) {
      assert.deepEqual(blamedFields(withFile({ path: 'p', size: 1, sha256 })), ['files[2].sha256'], String(sha256));
    }
    assert.doesNotThrow(() => parseManifest(JSON.stringify(withFile({ path: 'p', size: 0, sha256: SHA })), SOURCE));
  });

  test('a file entry that is not an object is blamed on all three fields, not thrown as a TypeError', () => {
    for (const file of [null, 3, 'model.onnx']) {
      assert.deepEqual(blamedFields(withFile(file)), ['files[2].path', 'files[2].size', 'files[2].sha256']);
    }
  });

  test('every problem is reported at once', () => {
    const manifest = {
      formatVersion: 3,
      model: { ...(validManifest().model as object), handler: '' },
      files: [{ path: 'a', size: -1, sha256: SHA }, { size: 1 }],
    };
    assert.deepEqual(blamedFields(manifest), [
      'formatVersion',
      'model.handler',
      'files[0].size',
      'files[1].path',
      'files[1].sha256',
    ]);
  });

  test('property: a manifest survives a JSON round trip unchanged', () => {
    const segment = fc.stringMatching(/^[a-z0-9_-]{1,8}$/);
    const file = fc.record({
      path: fc.array(segment, { minLength: 1, maxLength: 3 }).map((segments) => `extra/${segments.join('/')}`),
      size: fc.nat(),
      sha256: fc.stringMatching(/^[0-9a-f]{64}$/),
    });
    fc.assert(
      fc.property(
        fc.array(file, { maxLength: 5 }),
        fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,20}$/),
        (files, modelName) => {
          const manifest = {
            ...validManifest(),
            model: { ...(validManifest().model as object), modelName },
            files: [...(validManifest().files as object[]), ...files.map((file) => ({ ...file }))],
          };
          assert.deepEqual(parseManifest(JSON.stringify(manifest), SOURCE), manifest);
        },
      ),
    );
  });

  test('unknown keys are refused, at the top and in model', () => {
    assert.deepEqual(blamedFields({ ...validManifest(), signature: 'x' }), ['"signature"']);
    const model = validManifest().model as Record<string, unknown>;
    assert.deepEqual(blamedFields(withModel({ ...model, requirementsFile: 'r.txt' })), ['model."requirementsFile"']);
  });

  test('model names and versions follow the model-name pattern', () => {
    const model = validManifest().model as Record<string, unknown>;
    for (const modelName of ['../../x', 'a b', 'a"b', 'a\nb', '.hidden']) {
      assert.deepEqual(blamedFields(withModel({ ...model, modelName })), ['model.modelName'], modelName);
    }
    for (const modelVersion of ['..', '.', '1/2', 'v\u001b1']) {
      assert.deepEqual(blamedFields(withModel({ ...model, modelVersion })), ['model.modelVersion'], modelVersion);
    }
  });
});

describe('parseManifest: the paths a manifest names', () => {
  // The reproduction of the code-execution report: a good archive whose handler points outside it.
  const ESCAPES = [
    '../../../../../../../../../../tmp/x/outside.js',
    '../../../etc/passwd',
    '/etc/passwd',
    'C:/Windows/evil.js',
    'a\\..\\..\\evil.js',
    'ok/../../evil.js',
    'evil\u001b[31mred\n.js',
  ];
  const model = () => validManifest().model as Record<string, unknown>;
  const unsafe = (manifest: unknown, key: string) => (error: Error & { code?: string }) => {
    assert.equal(error.code, 'BS_ERR_ARCHIVE_UNSAFE_PATH');
    assert.ok(error.message.startsWith(`${SOURCE}: ${MANIFEST_PATH}: ${key} `), error.message);
    return true;
  };
  const parse = (manifest: unknown) => () => parseManifest(JSON.stringify(manifest), SOURCE);

  for (const key of ['serializedFile', 'handler', 'configFile', 'extraFiles', 'originalFile', 'optimizedFile']) {
    test(`model.${key} outside the archive is an unsafe path`, () => {
      for (const path of ESCAPES) {
        const value = key === 'extraFiles' ? `labels.txt,${path}` : path;
        const manifest = {
          ...validManifest(),
          model: {
            ...model(),
            [key]: value,
            ...(key === 'optimizedFile' ? { optimization: { level: 'all', onnxruntimeVersion: '1' } } : {}),
          },
          // Listed too, as a forger would list it: the name alone is refused.
          files: [...(validManifest().files as object[]), { path, size: 1, sha256: SHA }],
        };
        assert.throws(parse(manifest), (error: Error & { code?: string }) => {
          assert.equal(error.code, 'BS_ERR_ARCHIVE_UNSAFE_PATH', `${key}: ${path}: ${error.message}`);
          return true;
        });
        const unlistedOnly = { ...manifest, files: validManifest().files };
        assert.throws(parse(unlistedOnly), unsafe(unlistedOnly, `model.${key}`), `${key}: ${path}`);
      }
    });
  }

  test('a files entry outside the archive is an unsafe path', () => {
    for (const path of ESCAPES) {
      const manifest = withFile({ path, size: 1, sha256: SHA });
      assert.throws(parse(manifest), unsafe(manifest, 'files[2].path'), path);
    }
  });

  test('a path the files table does not list is refused; built-in handler names need no file', () => {
    for (const key of ['serializedFile', 'configFile', 'handler', 'extraFiles', 'originalFile']) {
      const manifest = withModel({ ...model(), [key]: 'elsewhere.js' });
      assert.throws(parse(manifest), (error: Error & { code?: string }) => {
        assert.equal(error.code, 'BS_ERR_ARCHIVE_MANIFEST');
        assert.ok(error.message.includes(`model.${key}: "elsewhere.js" is not in the files table`), error.message);
        return true;
      });
    }
    for (const handler of ['tensor', 'image-classifier', 'pipeline']) {
      assert.doesNotThrow(parse(withModel({ ...model(), handler })), handler);
    }
    const listed = {
      ...withFile({ path: 'handler.js', size: 1, sha256: SHA }),
      model: { ...model(), handler: 'handler.js' },
    };
    assert.doesNotThrow(parse(listed));
  });
});
