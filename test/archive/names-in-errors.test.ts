import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MODEL_NAME_PATTERN } from '../../src/core/model-name.js';
import { packArchive } from '../../src/archive/pack.js';
import { openArchive } from '../../src/archive/source.js';
import { declaredEntryCount } from '../../src/archive/zip-format.js';
import { makeWorkspace, writeTree, type Workspace } from '../fixtures/archive-workspace.js';

// Model names become file and URL path segments; refusals say which archive or name is at fault.

let ws: Workspace;
before(async () => {
  ws = await makeWorkspace();
});
after(() => ws.remove());

/** An error with `code` whose message starts by naming `subject`. */
function naming(code: string, subject: string) {
  return (error: Error & { code?: string }): boolean => {
    assert.equal(error.code, code);
    assert.ok(error.message.startsWith(subject), error.message);
    return true;
  };
}

describe('model names', () => {
  test('letters, digits, "_", "." and "-", starting with a letter or digit', () => {
    for (const name of ['resnet50', 'bert.base-v2', 'A_1', '7b']) assert.ok(MODEL_NAME_PATTERN.test(name), name);
    for (const name of ['', '-x', '.hidden', '_x', 'a/../../evil', 'a b', 'a\nb', 'model.onnx/', 'é']) {
      assert.equal(MODEL_NAME_PATTERN.test(name), false, JSON.stringify(name));
    }
  });

  test('pack refuses a name with a path in it before touching the disk', async () => {
    await assert.rejects(
      packArchive({ modelName: 'ok/../../evil', serializedFile: join(ws.root, 'none.onnx'), exportPath: ws.out }),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, 'BS_ERR_INVALID_MODEL_NAME');
        assert.ok(error.message.includes('"ok/../../evil"'), error.message);
        return true;
      },
    );
  });
});

describe('archive errors name the archive', () => {
  test('a location that is neither a file nor a directory', async () => {
    await assert.rejects(openArchive('/dev/null'), naming('BS_ERR_INPUT_FILE', '/dev/null: '));
  });

  test('a special file inside a directory archive', async () => {
    const root = join(ws.root, 'archives', 'with-fifo');
    await writeTree(root, new Map([['model.onnx', Buffer.from('m')]]));
    execFileSync('mkfifo', [join(root, 'pipe')]);
    await assert.rejects(openArchive(root), naming('BS_ERR_ARCHIVE_UNSAFE_PATH', `${root}: entry "pipe" `));
  });

  test('a file with no zip structure', async () => {
    const location = await ws.writeArchive('zeros.mar', Buffer.alloc(100));
    const handle = await open(location, 'r');
    try {
      await assert.rejects(
        declaredEntryCount(handle, 100, location),
        naming('BS_ERR_ARCHIVE_CORRUPT', `${location}: `),
      );
    } finally {
      await handle.close();
    }
  });
});
