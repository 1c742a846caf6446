import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { quoted } from '../../src/core/quote.js';
import { ArchiveGuard, checkEntryName, resolveLimits, type ArchiveLimits } from '../../src/archive/limits.js';

const LOCATION = '/archives/test.mar';
const MiB = 1024 ** 2;

/** Errors about one entry say which archive and which entry, quoted so odd bytes show. */
function refused(code: string, name: string) {
  return (error: Error & { code?: string }): boolean => {
    assert.equal(error.code, code);
    assert.ok(error.message.startsWith(`${LOCATION}: entry ${quoted(name)} `), error.message);
    // eslint-disable-next-line no-control-regex -- what a terminal would act on
    assert.doesNotMatch(error.message, /[\u0000-\u001f\u007f-\u009f]/, 'control characters are escaped');
    return true;
  };
}

const guard = (limits: Partial<ArchiveLimits> = {}) => new ArchiveGuard(LOCATION, resolveLimits(limits));

describe('checkEntryName', () => {
  test('plain relative names pass', () => {
    for (const name of ['model.onnx', 'a/b/c.txt', '.hidden', 'a/..b', '...x', 'console.txt', 'com10', 'é/ü.txt']) {
      assert.doesNotThrow(() => checkEntryName(LOCATION, name), name);
    }
  });

  const unsafe: [string, string][] = [
    ['NUL byte', 'config.yaml\0.txt'],
    ['backslash', 'a\\b'],
    ['absolute path', '/etc/passwd'],
    ['drive letter', 'C:/evil'],
    ['drive-relative', 'c:evil'],
    ['empty segment', 'a//b'],
    ['trailing empty segment', 'a/'],
    ['".." segment', 'a/../../x'],
    ['"." segment', 'a/./b'],
    ['leading "."', './x'],
    ['only "."', '.'],
    ['only ".."', '..'],
    ['empty name', ''],
    ['ESC and a newline', 'evil\x1b[31mred\n.txt'],
    ['DEL', 'a\x7fb'],
    ['C1 control', 'a\u009bb'],
    ['colon (a Windows stream)', 'notes.txt:evil'],
    ['colon inside', 'labels:en.txt'],
    ['Windows device name', 'CON'],
    ['Windows device name with an extension', 'dir/aux.txt'],
    ['Windows device name, any case', 'Lpt1.log'],
    ['trailing dot', 'x...'],
    ['trailing space', 'dir /x'],
    ['segment over 255 bytes', `${'é'.repeat(128)}.txt`],
    ['name over 1024 characters', 'a/'.repeat(600) + 'x'],
  ];
  for (const [why, name] of unsafe) {
    test(`refuses a name with a ${why}`, () => {
      assert.throws(() => checkEntryName(LOCATION, name), refused('BS_ERR_ARCHIVE_UNSAFE_PATH', name));
    });
  }

  test('property: any name with a "." or ".." segment is refused wherever it sits', () => {
    const segment = fc.stringMatching(/^[a-z0-9_-]{1,6}$/);
    fc.assert(
      fc.property(
        fc.array(segment, { maxLength: 3 }),
        fc.constantFrom('.', '..'),
        fc.array(segment, { maxLength: 3 }),
        (head, dots, tail) => {
          const name = [...head, dots, ...tail].join('/');
          assert.throws(() => checkEntryName(LOCATION, name), { code: 'BS_ERR_ARCHIVE_UNSAFE_PATH' });
        },
      ),
    );
  });
});

describe('ArchiveGuard counts', () => {
  test('exactly maxEntries entries are admitted, files and directories alike; one more is refused', () => {
    const g = guard({ maxEntries: 3 });
    g.checkDeclaredCount(3);
    g.admitDirectory('a');
    g.admitFile('a/b', 1, 1);
    g.admitFile('c', 1, 1);
    assert.throws(() => g.admitDirectory('d'), { code: 'BS_ERR_ARCHIVE_TOO_MANY_ENTRIES' });
    assert.throws(
      () => guard({ maxEntries: 3 }).checkDeclaredCount(4),
      (error: Error & { code?: string }) => {
        assert.equal(error.code, 'BS_ERR_ARCHIVE_TOO_MANY_ENTRIES');
        assert.ok(error.message.startsWith(`${LOCATION}: `), error.message);
        return true;
      },
    );
  });

  test('directory names go through the same name checks', () => {
    assert.throws(() => guard().admitDirectory('a/../b'), refused('BS_ERR_ARCHIVE_UNSAFE_PATH', 'a/../b'));
  });
});

describe('ArchiveGuard sizes', () => {
  test('an entry of exactly maxEntryBytes is admitted; one byte more is refused', () => {
    guard({ maxEntryBytes: 1000 }).admitFile('a', 1000, 1000);
    assert.throws(
      () => guard({ maxEntryBytes: 1000 }).admitFile('a', 1001, 1001),
      refused('BS_ERR_ARCHIVE_TOO_LARGE', 'a'),
    );
  });

  test('a total of exactly maxTotalBytes is admitted; one byte more is refused', () => {
    const g = guard({ maxTotalBytes: 1000 });
    g.admitFile('a', 600, 600);
    g.admitFile('b', 400, 400);
    assert.throws(() => g.admitFile('c', 1, 1), refused('BS_ERR_ARCHIVE_TOO_LARGE', 'c'));
  });

  test('the ratio applies only above ratioFloorBytes, and only past maxRatio', () => {
    const limits = { maxRatio: 100, ratioFloorBytes: 10 * MiB };
    // At the floor, any ratio passes: small entries of zeros are normal.
    guard(limits).admitFile('floor', 10 * MiB, 1);
    // Above the floor, a ratio of exactly maxRatio passes, and so does any lower one.
    guard(limits).admitFile('at-ratio', 20_000_000, 200_000);
    guard(limits).admitFile('low-ratio', 20_000_000, 10_000_000);
    assert.throws(
      () => guard(limits).admitFile('bomb', 20_000_000, 199_999),
      refused('BS_ERR_ARCHIVE_TOO_LARGE', 'bomb'),
    );
    assert.throws(() => guard(limits).admitFile('bomb', 10 * MiB + 1, 1), { code: 'BS_ERR_ARCHIVE_TOO_LARGE' });
  });
});

describe('ArchiveGuard collisions', () => {
  test('names equal ignoring case collide', () => {
    const g = guard();
    g.admitFile('Model.onnx', 1, 1);
    assert.throws(() => g.admitFile('model.ONNX', 1, 1), refused('BS_ERR_ARCHIVE_DUPLICATE_ENTRY', 'model.ONNX'));
  });

  test('names equal after NFC normalisation collide', () => {
    const g = guard();
    g.admitFile('caf\u00e9.txt', 1, 1);
    assert.throws(() => g.admitFile('cafe\u0301.txt', 1, 1), { code: 'BS_ERR_ARCHIVE_DUPLICATE_ENTRY' });
  });

  test('names that only full case folding would equate stay distinct, as on APFS and NTFS', () => {
    const g = guard();
    g.admitFile('stra\u00dfe.txt', 1, 1);
    g.admitFile('STRASSE.txt', 1, 1);
  });

  test('a directory and a file of the same name collide, in either order', () => {
    const dirFirst = guard();
    dirFirst.admitDirectory('extra');
    assert.throws(() => dirFirst.admitFile('EXTRA', 1, 1), refused('BS_ERR_ARCHIVE_DUPLICATE_ENTRY', 'EXTRA'));
    const fileFirst = guard();
    fileFirst.admitFile('extra', 1, 1);
    assert.throws(() => fileFirst.admitDirectory('extra'), { code: 'BS_ERR_ARCHIVE_DUPLICATE_ENTRY' });
  });

  test('a file that other entries sit under collides, in either order', () => {
    const fileFirst = guard();
    fileFirst.admitFile('model.onnx', 1, 1);
    assert.throws(
      () => fileFirst.admitFile('model.onnx/x', 1, 1),
      refused('BS_ERR_ARCHIVE_DUPLICATE_ENTRY', 'model.onnx/x'),
    );
    const childFirst = guard();
    childFirst.admitFile('a/b/c.txt', 1, 1);
    assert.throws(() => childFirst.admitFile('A/b', 1, 1), refused('BS_ERR_ARCHIVE_DUPLICATE_ENTRY', 'A/b'));
  });

  test('a directory listed after the files inside it is fine', () => {
    const g = guard();
    g.admitFile('extra/labels.txt', 1, 1);
    g.admitFile('extra/sub/words.txt', 1, 1);
    g.admitDirectory('extra');
    g.admitDirectory('extra/sub');
    g.admitFile('extra2', 1, 1);
  });
});
