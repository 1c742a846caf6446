import assert from 'node:assert/strict';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { entryNameProblem, pathInside } from '../../src/core/entry-name.js';
import { quoted } from '../../src/core/quote.js';
import { tempDir } from '../fixtures/temp.js';

test('pathInside: a file of the folder comes back as its real path; a missing one as joined', async (t) => {
  const root = await tempDir(t);
  await mkdir(join(root, 'sub'));
  await writeFile(join(root, 'sub', 'h.js'), '');
  assert.equal(pathInside(root, 'sub/h.js', 'the handler'), join(root, 'sub', 'h.js'));
  assert.equal(pathInside(root, 'absent.js', 'the handler'), join(root, 'absent.js'));
});

test('pathInside: unsafe names and links that resolve outside are refused, naming what was asked for', async (t) => {
  const root = await tempDir(t);
  const elsewhere = await tempDir(t);
  await writeFile(join(elsewhere, 'outside.js'), '');
  await symlink(join(elsewhere, 'outside.js'), join(root, 'link.js'));
  await symlink(elsewhere, join(root, 'dir'));
  for (const name of ['../x.js', '/etc/passwd', 'link.js', 'dir/outside.js', 'a\\..\\b', 'x\u001b.js']) {
    assert.throws(
      () => pathInside(root, name, 'the handler'),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, 'BS_ERR_ARCHIVE_UNSAFE_PATH');
        assert.ok(error.message.startsWith(`the handler ${quoted(name)} `), error.message);
        return true;
      },
      name,
    );
  }
});

test('quoted: control characters escaped, long values cut with their length', () => {
  assert.equal(quoted('plain'), '"plain"');
  assert.equal(quoted('a\u001b[31m\n\u007f\u009b\u2028'), '"a\\u001b[31m\\n\\u007f\\u009b\\u2028"');
  assert.equal(quoted('a\0b'), '"a\\u0000b"');
  const long = quoted('x'.repeat(5000));
  assert.equal(long, `"${'x'.repeat(120)}…" (5000 characters)`);
});

test('entryNameProblem: every name Windows cannot hold as a plain file is refused, its lookalikes are not', () => {
  for (const name of ['a<b', 'a>b', 'a"b', 'a|b', 'a?b', 'a*b', 'notes.txt:evil', 'dir/CON', 'aux.txt', 'Nul.tar.gz']) {
    assert.notEqual(entryNameProblem(name), undefined, name);
  }
  for (const name of [
    'COM1',
    'lpt9.log',
    'COM¹',
    'CONIN$',
    'conout$.txt',
    'trail.',
    'trail ',
    'ctl\u0001x',
    'del\u007f',
  ]) {
    assert.notEqual(entryNameProblem(name), undefined, name);
  }
  for (const name of [
    'console.txt',
    'auxiliary',
    'con_x',
    'com10',
    'a.b/c-d_e',
    'conin',
    'dollar$.txt',
    '[x]{y}(z)!#%&+,;=@^`~',
  ]) {
    assert.equal(entryNameProblem(name), undefined, name);
  }
});
