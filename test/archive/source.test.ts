import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { deflateRawSync } from 'node:zlib';
import fc from 'fast-check';
import { defaultArchiveLimits, resolveLimits } from '../../src/archive/limits.js';
import { openArchive, type ArchiveSource } from '../../src/archive/source.js';
import { BatchserveError } from '../../src/core/errors.js';
import {
  archiverZip,
  makeWorkspace,
  modelFiles,
  openFileCount,
  openFileCountSettled,
  writeTree,
  type Workspace,
} from '../fixtures/archive-workspace.js';
import { flipBit, rawZip, zip64CountBomb } from '../fixtures/raw-zip.js';

const MiB = 1024 ** 2;

let ws: Workspace;
before(async () => {
  ws = await makeWorkspace();
});
after(() => ws.remove());

async function withSource<T>(location: string, use: (source: ArchiveSource) => T | Promise<T>): Promise<T> {
  const source = await openArchive(location);
  try {
    return await use(source);
  } finally {
    await source.close();
  }
}

async function assertLists(location: string, format: 'zip' | 'dir', order: readonly string[]): Promise<void> {
  const files = modelFiles();
  await withSource(location, async (source) => {
    assert.equal(source.format, format);
    assert.deepEqual(
      source.entries.map((entry) => entry.path),
      order,
    );
    for (const [path, bytes] of files) {
      assert.equal(source.entry(path)?.size, bytes.length);
      assert.deepEqual(await source.readFile(path), bytes);
    }
    assert.equal(source.entry('extra'), undefined, 'directories are not listed');
  });
}

describe('openArchive on well-formed archives', () => {
  const zipOrder = ['model.onnx', 'config.yaml', 'extra/labels.txt'];

  test('reads a deflated zip written by archiver, in archive order', async () => {
    const location = await archiverZip(join(ws.root, 'archives', 'deflated.mar'), modelFiles(), false);
    await assertLists(location, 'zip', zipOrder);
    await withSource(location, (source) => {
      const model = source.entry('model.onnx');
      assert.ok(model !== undefined && model.compressedSize < model.size, 'model.onnx was deflated');
    });
  });

  test('reads a stored zip written by archiver', async () => {
    const location = await archiverZip(join(ws.root, 'archives', 'stored.mar'), modelFiles(), true);
    await assertLists(location, 'zip', zipOrder);
  });

  test('reads a raw stored zip, including an empty file', async () => {
    const entries = [...modelFiles()].map(([name, data]) => ({ name, data }));
    const location = await ws.writeArchive('raw.mar', rawZip([...entries, { name: 'empty.txt' }]));
    await assertLists(location, 'zip', [...zipOrder, 'empty.txt']);
    await withSource(location, async (source) => assert.equal((await source.readFile('empty.txt')).length, 0));
  });

  test('reads a directory archive, sorted, with / separators', async () => {
    const root = join(ws.root, 'archives', 'model-dir');
    await writeTree(root, modelFiles());
    await assertLists(root, 'dir', ['config.yaml', 'extra/labels.txt', 'model.onnx']);
  });

  test('openStream of an unknown path throws BS_ERR_ARCHIVE_MISSING_FILE', async () => {
    const location = await ws.writeArchive('one.mar', rawZip([{ name: 'a.txt', data: 'a' }]));
    await withSource(location, (source) => {
      assert.throws(() => source.openStream('b.txt'), { code: 'BS_ERR_ARCHIVE_MISSING_FILE' });
    });
  });
});

describe('openArchive refuses before reading', () => {
  test('a location that does not exist: BS_ERR_INPUT_FILE', async () => {
    await assert.rejects(openArchive(join(ws.root, 'nope.mar')), { code: 'BS_ERR_INPUT_FILE' });
  });

  test('a zip64 end record claiming 2^40 entries fails fast as corrupt', async () => {
    const location = await ws.writeArchive('count-bomb.mar', zip64CountBomb(2n ** 40n));
    await assert.rejects(openArchive(location), { code: 'BS_ERR_ARCHIVE_CORRUPT' });
  });

  test('a zip64-marked end record without its locator is corrupt', async () => {
    const location = await ws.writeArchive('no-locator.mar', zip64CountBomb(1n).subarray(56 + 20));
    await assert.rejects(openArchive(location), { code: 'BS_ERR_ARCHIVE_CORRUPT' });
  });

  test('errors name the archive and the entry', async () => {
    const location = await ws.writeArchive('named.mar', rawZip([{ name: 'a/../../x', data: 'x' }]));
    await assert.rejects(openArchive(location), (error: Error & { code: string }) => {
      assert.equal(error.code, 'BS_ERR_ARCHIVE_UNSAFE_PATH');
      assert.ok(error.message.includes(location) && error.message.includes('"a/../../x"'));
      return true;
    });
  });
});

describe('reading entries holds them to their headers', () => {
  test('a deflated entry that inflates past its declared size: BS_ERR_ARCHIVE_TOO_LARGE while streaming', async () => {
    const data = Buffer.alloc(MiB, 7);
    const location = await ws.writeArchive(
      'lying.mar',
      rawZip([{ name: 'model.onnx', data, method: 'deflate', declaredSize: 100 }]),
    );
    await withSource(location, async (source) => {
      assert.equal(source.entry('model.onnx')?.size, 100);
      await assert.rejects(source.readFile('model.onnx'), { code: 'BS_ERR_ARCHIVE_TOO_LARGE' });
    });
  });

  test('a stored entry shorter than declared is corrupt', async () => {
    const location = await ws.writeArchive('short.mar', rawZip([{ name: 'a.bin', data: 'abc', declaredSize: 4 }]));
    await withSource(location, (source) =>
      assert.rejects(source.readFile('a.bin'), { code: 'BS_ERR_ARCHIVE_CORRUPT' }),
    );
  });

  test('a flipped byte fails the CRC-32 check', async () => {
    const zip = rawZip([{ name: 'a.bin', data: 'hello world' }]);
    flipBit(zip, 30 + 'a.bin'.length);
    const location = await ws.writeArchive('crc.mar', zip);
    await withSource(location, (source) =>
      assert.rejects(source.readFile('a.bin'), { code: 'BS_ERR_ARCHIVE_CORRUPT' }),
    );
  });

  test('damaged deflate data is corrupt, never a raw zlib error', async () => {
    const body = deflateRawSync(Buffer.alloc(1000, 1));
    const zip = rawZip([{ name: 'a.bin', data: Buffer.alloc(1000, 1), method: 'deflate' }]);
    zip.fill(0xff, 30 + 'a.bin'.length, 30 + 'a.bin'.length + body.length);
    const location = await ws.writeArchive('inflate.mar', zip);
    await withSource(location, (source) =>
      assert.rejects(source.readFile('a.bin'), { code: 'BS_ERR_ARCHIVE_CORRUPT' }),
    );
  });

  test('a directory archive file replaced by a symlink after opening is refused', async () => {
    const root = join(ws.root, 'archives', 'swapped');
    await writeTree(root, new Map([['a.txt', Buffer.from('a')]]));
    await withSource(root, async (source) => {
      await rm(join(root, 'a.txt'));
      await symlink('/etc/hostname', join(root, 'a.txt'));
      await assert.rejects(source.readFile('a.txt'), { code: 'BS_ERR_ARCHIVE_SYMLINK' });
    });
  });
});

describe('property: damaged zips fail with our errors only', () => {
  const base = rawZip([
    { name: 'a.txt', data: 'hello world '.repeat(20), method: 'deflate' },
    { name: 'dir/b.bin', data: Buffer.alloc(300, 3) },
    { name: 'c', data: 'x' },
  ]);
  // Mostly the central directory and end record at the tail, where the structure lives.
  const damage = fc.array(fc.tuple(fc.nat({ max: base.length - 1 }), fc.boolean(), fc.integer({ min: 0, max: 255 })), {
    minLength: 1,
    maxLength: 3,
  });

  test('open and read everything, or reject with a BatchserveError', { timeout: 60_000 }, async () => {
    await fc.assert(
      fc.asyncProperty(damage, async (changes) => {
        const zip = Buffer.from(base);
        for (const [offset, nearEnd, value] of changes) {
          zip.writeUInt8(value, nearEnd ? base.length - 1 - (offset % 160) : offset);
        }
        const location = await ws.writeArchive('damaged.mar', zip);
        try {
          await withSource(location, async (source) => {
            for (const entry of source.entries) await source.readFile(entry.path);
          });
        } catch (error) {
          assert.ok(error instanceof BatchserveError, `not a BatchserveError: ${String(error)}`);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('limits', () => {
  test('defaults', () => {
    assert.deepEqual(
      { ...defaultArchiveLimits },
      {
        maxEntries: 10_000,
        maxTotalBytes: 8 * 1024 ** 3,
        maxEntryBytes: 4 * 1024 ** 3,
        maxRatio: 200,
        maxExpansion: 200,
        ratioFloorBytes: 32 * MiB,
      },
    );
    assert.ok(Object.isFrozen(defaultArchiveLimits));
  });

  test('overrides replace only the keys given', () => {
    const limits = resolveLimits({ maxEntries: 3, maxRatio: undefined });
    assert.equal(limits.maxEntries, 3);
    assert.equal(limits.maxRatio, 200);
  });
});

describe('openArchive: what is and is not an archive', () => {
  test('a missing location is an input error that keeps the system error as its cause', async () => {
    const location = join(ws.root, 'missing.mar');
    await assert.rejects(openArchive(location), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'BS_ERR_INPUT_FILE');
      assert.ok(error.message.startsWith(`${location}: `), error.message);
      assert.equal((error.cause as NodeJS.ErrnoException).code, 'ENOENT');
      return true;
    });
  });

  test('a location that is neither a file nor a directory is an input error', async () => {
    await assert.rejects(openArchive('/dev/null'), { code: 'BS_ERR_INPUT_FILE' });
  });

  test('a zip whose central directory lies past its end is corrupt, naming the archive', async () => {
    const end = Buffer.alloc(22);
    end.writeUInt32LE(0x06054b50, 0);
    end.writeUInt16LE(1, 8);
    end.writeUInt16LE(1, 10);
    end.writeUInt32LE(46, 12);
    end.writeUInt32LE(5000, 16);
    const location = await ws.writeArchive('directory-past-end.mar', Buffer.concat([Buffer.alloc(60), end]));
    await assert.rejects(openArchive(location), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'BS_ERR_ARCHIVE_CORRUPT');
      assert.ok(error.message.startsWith(`${location}: `), error.message);
      assert.ok(error.cause instanceof Error);
      return true;
    });
  });

  test('an unknown entry is missing, naming it', async () => {
    const location = await ws.writeArchive('named-missing.mar', rawZip([{ name: 'a.txt', data: 'a' }]));
    await withSource(location, (source) => {
      assert.throws(
        () => source.openStream('b.txt'),
        (error: Error) => error.message.startsWith(`${location}: entry "b.txt" `),
      );
    });
  });
});

describe('reading zip entries as other zip writers lay them out', () => {
  test('a local header with its own extra field (Info-ZIP timestamps)', async () => {
    const extra = Buffer.from([0x55, 0x54, 5, 0, 1, 0x10, 0x20, 0x30, 0x40]);
    const location = await ws.writeArchive(
      'local-extra.mar',
      rawZip([
        { name: 'a.txt', data: 'first', localExtra: extra },
        { name: 'b.bin', data: Buffer.alloc(5000, 9), method: 'deflate', localExtra: extra },
      ]),
    );
    await withSource(location, async (source) => {
      assert.equal((await source.readFile('a.txt')).toString(), 'first');
      assert.deepEqual(await source.readFile('b.bin'), Buffer.alloc(5000, 9));
    });
  });

  test('an empty deflated entry with no deflate data at all', async () => {
    const location = await ws.writeArchive(
      'empty-deflated.mar',
      rawZip([{ name: 'empty.txt', method: 'deflate', body: Buffer.alloc(0) }]),
    );
    await withSource(location, async (source) => {
      assert.equal(source.entry('empty.txt')?.compressedSize, 0);
      assert.equal((await source.readFile('empty.txt')).length, 0);
    });
  });
});

describe('directory archives', () => {
  test('entries are sorted by name as JavaScript sorts them, whatever order the disk lists', async () => {
    const root = join(ws.root, 'archives', 'unicode-dir');
    // U+FF21 sorts after U+1F600 in UTF-16, before it in UTF-8 bytes.
    await writeTree(
      root,
      new Map([
        ['\uff21.txt', Buffer.from('a')],
        ['\u{1f600}.txt', Buffer.from('b')],
      ]),
    );
    await withSource(root, (source) => {
      assert.deepEqual(
        source.entries.map((entry) => entry.path),
        ['\u{1f600}.txt', '\uff21.txt'],
      );
    });
  });

  test('a special file (a FIFO) inside is refused as unsafe', async () => {
    const root = join(ws.root, 'archives', 'fifo-dir');
    await writeTree(root, new Map([['model.onnx', Buffer.from('m')]]));
    execFileSync('mkfifo', [join(root, 'pipe')]);
    await assert.rejects(openArchive(root), { code: 'BS_ERR_ARCHIVE_UNSAFE_PATH' });
  });

  test('a file removed after opening is corrupt, not a symlink', async () => {
    const root = join(ws.root, 'archives', 'vanishing');
    await writeTree(root, new Map([['a.txt', Buffer.from('a')]]));
    await withSource(root, async (source) => {
      await rm(join(root, 'a.txt'));
      await assert.rejects(source.readFile('a.txt'), (error: Error & { code?: string }) => {
        assert.equal(error.code, 'BS_ERR_ARCHIVE_CORRUPT');
        assert.ok(error.message.startsWith(`${root}: entry "a.txt" `), error.message);
        return true;
      });
    });
  });

  test('a file swapped for a symlink names the entry and keeps the ELOOP cause', async () => {
    const root = join(ws.root, 'archives', 'swapped-cause');
    await writeTree(root, new Map([['a.txt', Buffer.from('a')]]));
    await withSource(root, async (source) => {
      await rm(join(root, 'a.txt'));
      await symlink('/etc/hostname', join(root, 'a.txt'));
      await assert.rejects(source.readFile('a.txt'), (error: Error & { code?: string }) => {
        assert.equal(error.code, 'BS_ERR_ARCHIVE_SYMLINK');
        assert.ok(error.message.startsWith(`${root}: entry "a.txt" `), error.message);
        assert.equal((error.cause as NodeJS.ErrnoException).code, 'ELOOP');
        return true;
      });
    });
  });

  test('a symlink found by the walk names the entry', async () => {
    const root = join(ws.root, 'archives', 'walk-link');
    await writeTree(root, new Map([['a.txt', Buffer.from('a')]]));
    await symlink('/etc', join(root, 'etc'));
    await assert.rejects(openArchive(root), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'BS_ERR_ARCHIVE_SYMLINK');
      assert.ok(error.message.startsWith(`${root}: entry "etc" `), error.message);
      return true;
    });
  });
});

describe('close', () => {
  test('closing a zip archive releases its file', async () => {
    const location = await ws.writeArchive('close.mar', rawZip([{ name: 'a.txt', data: 'a' }]));
    const source = await openArchive(location);
    await source.readFile('a.txt');
    assert.ok(openFileCount(location) >= 1, 'the open archive holds its file');
    await source.close();
    assert.equal(await openFileCountSettled(location), 0);
  });
});
