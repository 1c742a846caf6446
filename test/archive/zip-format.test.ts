import assert from 'node:assert/strict';
import { open } from 'node:fs/promises';
import { after, before, describe, test } from 'node:test';
import type { File as CentralDirectoryRecord } from 'unzipper';
import { checkRecord, dataOffset, declaredEntryCount, type ZipRecord } from '../../src/archive/zip-format.js';
import { makeWorkspace, type Workspace } from '../fixtures/archive-workspace.js';
import { rawZip } from '../fixtures/raw-zip.js';

// The zip structures batchserve checks itself, driven with hand-made bytes (PKWARE APPNOTE 6.3).

let ws: Workspace;
before(async () => {
  ws = await makeWorkspace();
});
after(() => ws.remove());

let counter = 0;
async function withBytes<T>(
  bytes: Buffer,
  use: (handle: Awaited<ReturnType<typeof open>>, location: string) => Promise<T>,
) {
  const location = await ws.writeArchive(`format-${++counter}.zip`, bytes);
  const handle = await open(location, 'r');
  try {
    return await use(handle, location);
  } finally {
    await handle.close();
  }
}

const countOf = (bytes: Buffer): Promise<number> =>
  withBytes(bytes, (handle, location) => declaredEntryCount(handle, bytes.length, location));

interface EndFields {
  disk?: number;
  count?: number;
  directoryOffset?: number;
}

/** A classic end of central directory record, no comment. */
function endRecord({ disk = 0, count = 0, directoryOffset = 0 }: EndFields = {}): Buffer {
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(disk, 4);
  end.writeUInt16LE(count, 8);
  end.writeUInt16LE(count, 10);
  end.writeUInt32LE(directoryOffset, 16);
  return end;
}

function zip64Record(count: bigint): Buffer {
  const record = Buffer.alloc(56);
  record.writeUInt32LE(0x06064b50, 0);
  record.writeBigUInt64LE(44n, 4);
  record.writeBigUInt64LE(count, 24);
  record.writeBigUInt64LE(count, 32);
  return record;
}

function zip64Locator(recordAt: bigint, signature = 0x07064b50): Buffer {
  const locator = Buffer.alloc(20);
  locator.writeUInt32LE(signature, 0);
  locator.writeBigUInt64LE(recordAt, 8);
  locator.writeUInt32LE(1, 16);
  return locator;
}

/** An empty zip64 archive: record at 0, locator, end record with one field saying "see zip64". */
function zip64Archive(count: bigint, end: EndFields): Buffer {
  return Buffer.concat([zip64Record(count), zip64Locator(0n), endRecord(end)]);
}

const corrupt = { code: 'BS_ERR_ARCHIVE_CORRUPT' };

describe('declaredEntryCount', () => {
  test('reads the count of a classic end record', async () => {
    const zip = rawZip([
      { name: 'a', data: 'a' },
      { name: 'b', data: 'b' },
      { name: 'c', data: 'c' },
    ]);
    assert.equal(await countOf(zip), 3);
  });

  test('finds the end record near the end, not one inside a stored zip entry', async () => {
    const inner = rawZip([{ name: 'only.txt', data: 'x' }]);
    const outer = rawZip([
      { name: 'nested.zip', data: inner },
      { name: 'b.txt', data: 'b' },
    ]);
    assert.equal(await countOf(outer), 2);
  });

  test('bytes without an end record are corrupt', async () => {
    await assert.rejects(countOf(Buffer.alloc(100)), corrupt);
    await assert.rejects(countOf(Buffer.alloc(0)), corrupt);
    await assert.rejects(countOf(endRecord().subarray(0, 21)), corrupt);
  });

  test('a count is accepted while the archive is large enough to hold that many records', async () => {
    // 46 bytes is the smallest central directory record; 46 bytes of archive can list one.
    assert.equal(await countOf(Buffer.concat([Buffer.alloc(24), endRecord({ count: 1 })])), 1);
    await assert.rejects(countOf(Buffer.concat([Buffer.alloc(23), endRecord({ count: 1 })])), corrupt);
    await assert.rejects(countOf(endRecord({ count: 2 })), corrupt);
  });

  const markers: [string, EndFields][] = [
    ['disk number 0xffff', { disk: 0xffff }],
    ['entry count 0xffff', { count: 0xffff }],
    ['directory offset 0xffffffff', { directoryOffset: 0xffffffff }],
  ];
  for (const [name, end] of markers) {
    test(`an end record with ${name} defers to the zip64 record`, async () => {
      assert.equal(await countOf(zip64Archive(2n, end)), 2);
    });
  }

  test('a zip64 locator at the very start of the file is found', async () => {
    // locator (0..20), end record (20..42), zip64 record after it at 42.
    const bytes = Buffer.concat([zip64Locator(42n), endRecord({ disk: 0xffff }), zip64Record(1n)]);
    assert.equal(await countOf(bytes), 1);
  });

  test('a zip64 end record too close to the start to have a locator is corrupt', async () => {
    await assert.rejects(countOf(endRecord({ disk: 0xffff })), corrupt);
    // The end record starts 16 bytes in: a "locator" would have to start before the file does.
    const locatorHead = zip64Locator(38n).subarray(0, 16);
    await assert.rejects(countOf(Buffer.concat([locatorHead, endRecord({ disk: 0xffff }), zip64Record(1n)])), corrupt);
  });

  test('a zip64 locator with the wrong signature is corrupt, even if it points at a good record', async () => {
    const bytes = Buffer.concat([zip64Record(1n), zip64Locator(0n, 0x12345678), endRecord({ disk: 0xffff })]);
    await assert.rejects(countOf(bytes), corrupt);
  });

  test('a zip64 locator pointing at no zip64 record is corrupt', async () => {
    const zeros = Buffer.concat([Buffer.alloc(56), zip64Locator(0n), endRecord({ disk: 0xffff })]);
    await assert.rejects(countOf(zeros), corrupt);
    const pastTheEnd = Buffer.concat([zip64Record(1n), zip64Locator(2n ** 63n), endRecord({ disk: 0xffff })]);
    await assert.rejects(countOf(pastTheEnd), corrupt);
  });

  test('a zip64 record cut short by the end of the file is corrupt', async () => {
    // The locator points at the last 4 bytes (the end record's comment): a signature and nothing more.
    const head = Buffer.concat([zip64Locator(0n), endRecord({ disk: 0xffff })]);
    head.writeBigUInt64LE(BigInt(head.length), 8);
    head.writeUInt16LE(4, head.length - 2);
    const signature = Buffer.alloc(4);
    signature.writeUInt32LE(0x06064b50);
    await assert.rejects(countOf(Buffer.concat([head, signature])), corrupt);
  });

  test('a zip64 count larger than the file can hold is corrupt', async () => {
    await assert.rejects(countOf(zip64Archive(2n ** 40n, { count: 0xffff })), corrupt);
  });
});

const LOCATION = '/archives/test.mar';

function centralRecord(overrides: Partial<Record<string, unknown>> = {}): CentralDirectoryRecord {
  return {
    signature: 0x02014b50,
    path: 'model.onnx',
    externalFileAttributes: (0o100644 << 16) >>> 0,
    flags: 0,
    compressionMethod: 8,
    uncompressedSize: 100,
    compressedSize: 50,
    offsetToLocalFileHeader: 0,
    crc32: 0xcafe,
    ...overrides,
  } as unknown as CentralDirectoryRecord;
}

/** Errors about one entry say which archive and which entry. */
function namesEntry(code: string, path: string, location = LOCATION) {
  return (error: Error & { code?: string }): boolean => {
    assert.equal(error.code, code);
    assert.ok(error.message.includes(location), error.message);
    assert.ok(error.message.includes(JSON.stringify(path)), error.message);
    return true;
  };
}

describe('checkRecord', () => {
  test('a deflated file record, its data ending exactly at the end of the archive', () => {
    // Local header (30 bytes) at 0, then 10 name bytes, then 50 compressed bytes.
    const record = checkRecord(centralRecord(), LOCATION, 30 + 50);
    assert.deepEqual(record, {
      path: 'model.onnx',
      isDirectory: false,
      size: 100,
      compressedSize: 50,
      crc32: 0xcafe,
      method: 8,
      localHeaderOffset: 0,
    } satisfies ZipRecord);
  });

  test('a stored file record', () => {
    const record = checkRecord(centralRecord({ compressionMethod: 0, offsetToLocalFileHeader: 20 }), LOCATION, 1000);
    assert.equal(record.method, 0);
    assert.equal(record.localHeaderOffset, 20);
  });

  test('a file whose data would run past the end of the archive is corrupt', () => {
    assert.throws(
      () => checkRecord(centralRecord(), LOCATION, 30 + 50 - 1),
      namesEntry('BS_ERR_ARCHIVE_CORRUPT', 'model.onnx'),
    );
    assert.throws(
      () => checkRecord(centralRecord({ offsetToLocalFileHeader: 40 }), LOCATION, 100),
      namesEntry('BS_ERR_ARCHIVE_CORRUPT', 'model.onnx'),
    );
  });

  test('a directory record loses its trailing slash and has no data to check', () => {
    const record = checkRecord(
      centralRecord({
        path: 'extra/',
        flags: 1,
        compressionMethod: 12,
        compressedSize: 0,
        offsetToLocalFileHeader: 900,
      }),
      LOCATION,
      100,
    );
    assert.equal(record.path, 'extra');
    assert.equal(record.isDirectory, true);
    assert.equal(checkRecord(centralRecord({ path: 'a/b/' }), LOCATION, 1000).path, 'a/b');
  });

  test('an encrypted file is refused', () => {
    assert.throws(
      () => checkRecord(centralRecord({ flags: 1 }), LOCATION, 1000),
      namesEntry('BS_ERR_ARCHIVE_CORRUPT', 'model.onnx'),
    );
    // Bit 3 (sizes in a data descriptor) and bit 11 (UTF-8 names) are fine.
    assert.equal(checkRecord(centralRecord({ flags: 0x808 }), LOCATION, 1000).path, 'model.onnx');
  });

  test('compression other than stored or deflated is refused', () => {
    for (const method of [1, 9, 12, 14, 93]) {
      assert.throws(
        () => checkRecord(centralRecord({ compressionMethod: method }), LOCATION, 1000),
        namesEntry('BS_ERR_ARCHIVE_CORRUPT', 'model.onnx'),
        `method ${method}`,
      );
    }
  });

  test('sizes and offsets that are not safe non-negative integers are corrupt', () => {
    for (const field of ['uncompressedSize', 'compressedSize', 'offsetToLocalFileHeader']) {
      for (const value of [-1, 2 ** 53, Number.NaN, 1.5]) {
        assert.throws(
          () => checkRecord(centralRecord({ [field]: value }), LOCATION, 2 ** 60),
          namesEntry('BS_ERR_ARCHIVE_CORRUPT', 'model.onnx'),
          `${field} = ${value}`,
        );
      }
    }
  });

  test('a symbolic link is refused, a record without its signature is corrupt', () => {
    const link = centralRecord({ path: 'link', externalFileAttributes: (0o120777 << 16) >>> 0 });
    assert.throws(() => checkRecord(link, LOCATION, 1000), namesEntry('BS_ERR_ARCHIVE_SYMLINK', 'link'));
    assert.throws(() => checkRecord(centralRecord({ signature: 0x04034b50 }), LOCATION, 1000), corrupt);
  });
});

describe('dataOffset', () => {
  const recordAt = (localHeaderOffset: number): ZipRecord => ({
    path: 'a.bin',
    isDirectory: false,
    size: 5,
    compressedSize: 5,
    crc32: 0,
    method: 0,
    localHeaderOffset,
  });

  test('skips the local header, its name and its own extra field', async () => {
    const extra = Buffer.from([0x55, 0x54, 5, 0, 1, 0, 0, 0, 0]);
    const zip = rawZip([
      { name: 'first', data: 'one' },
      { name: 'a.bin', data: 'hello', localExtra: extra },
    ]);
    const localHeaderOffset = 30 + 'first'.length + 3;
    const offset = await withBytes(zip, (handle, location) =>
      dataOffset(handle, recordAt(localHeaderOffset), location),
    );
    assert.equal(offset, localHeaderOffset + 30 + 'a.bin'.length + extra.length);
    assert.equal(zip.subarray(offset, offset + 5).toString(), 'hello');
  });

  test('no local header where the directory says is corrupt', async () => {
    const zip = rawZip([{ name: 'a.bin', data: 'hello' }]);
    await withBytes(zip, async (handle, location) => {
      await assert.rejects(
        dataOffset(handle, recordAt(1), location),
        namesEntry('BS_ERR_ARCHIVE_CORRUPT', 'a.bin', location),
      );
    });
  });

  test('a local header cut short by the end of the file is corrupt', async () => {
    const zip = rawZip([{ name: 'a.bin', data: 'hello' }]).subarray(0, 20);
    await withBytes(zip, async (handle, location) => {
      await assert.rejects(dataOffset(handle, recordAt(0), location), corrupt);
    });
  });
});
