import assert from 'node:assert/strict';
import { once } from 'node:events';
import { open } from 'node:fs/promises';
import { PassThrough, Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import { crc32 } from 'node:zlib';
import { asCorrupt, DeclaredSizeStream, feedThrough, readRange } from '../../src/archive/entry-stream.js';
import { ArchiveTooLargeError } from '../../src/core/errors.js';
import { makeWorkspace, type Workspace } from '../fixtures/archive-workspace.js';

const WHAT = '/archives/test.mar: entry "a.bin"';

let ws: Workspace;
before(async () => {
  ws = await makeWorkspace();
});
after(() => ws.remove());

async function drain(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The error a stream fails with; names the entry it is about. */
function failsAbout(code: string) {
  return (error: Error & { code?: string }): boolean => {
    assert.equal(error.code, code);
    assert.ok(error.message.startsWith(`${WHAT} `), error.message);
    return true;
  };
}

describe('DeclaredSizeStream', () => {
  const hello = Buffer.from('hello world');

  test('passes exactly the declared bytes through, with or without a CRC to check', async () => {
    assert.deepEqual(await drain(Readable.from([hello]).pipe(new DeclaredSizeStream(WHAT, 11))), hello);
    const checked = new DeclaredSizeStream(WHAT, 11, crc32(hello));
    assert.deepEqual(await drain(Readable.from([hello.subarray(0, 4), hello.subarray(4)]).pipe(checked)), hello);
    assert.equal((await drain(Readable.from([]).pipe(new DeclaredSizeStream(WHAT, 0, 0)))).length, 0);
  });

  test('more bytes than declared: too large', async () => {
    await assert.rejects(
      drain(Readable.from([hello]).pipe(new DeclaredSizeStream(WHAT, 10))),
      failsAbout('BS_ERR_ARCHIVE_TOO_LARGE'),
    );
  });

  test('fewer bytes than declared: corrupt', async () => {
    await assert.rejects(
      drain(Readable.from([hello]).pipe(new DeclaredSizeStream(WHAT, 12))),
      failsAbout('BS_ERR_ARCHIVE_CORRUPT'),
    );
  });

  test('a wrong CRC-32: corrupt', async () => {
    const stream = new DeclaredSizeStream(WHAT, 11, crc32(hello) ^ 1);
    await assert.rejects(drain(Readable.from([hello]).pipe(stream)), failsAbout('BS_ERR_ARCHIVE_CORRUPT'));
  });
});

describe('feedThrough', () => {
  test('an error in any stage ends the output with the wrapped error', async () => {
    const source = new PassThrough();
    const middle = new PassThrough();
    const output = new PassThrough();
    feedThrough([source, middle], output, (error) => new Error(`wrapped: ${(error as Error).message}`));
    middle.destroy(new Error('boom'));
    const [error] = (await once(output, 'error')) as [Error];
    assert.equal(error.message, 'wrapped: boom');
  });

  test('closing the output early destroys every stage', async () => {
    const source = new PassThrough();
    const middle = new PassThrough();
    const output = new PassThrough();
    feedThrough([source, middle], output, (error) => error as Error);
    source.write('partial');
    output.destroy();
    await once(output, 'close');
    assert.equal(source.destroyed, true);
    assert.equal(middle.destroyed, true);
  });
});

describe('asCorrupt', () => {
  test('our own errors pass through unchanged', () => {
    const error = new ArchiveTooLargeError('too large');
    assert.equal(asCorrupt('/archives/test.mar', 'a.bin', error), error);
  });

  test('anything else becomes a corrupt-archive error naming the entry, keeping the cause', () => {
    const cause = Object.assign(new Error('invalid stored block lengths'), { code: 'Z_DATA_ERROR' });
    const error = asCorrupt('/archives/test.mar', 'a.bin', cause) as Error & { code?: string };
    assert.ok(failsAbout('BS_ERR_ARCHIVE_CORRUPT')(error));
    assert.ok(error.message.includes('invalid stored block lengths'), error.message);
    assert.equal(error.cause, cause);
    assert.ok(asCorrupt('/archives/test.mar', 'a.bin', 'a string').message.includes('a string'));
  });
});

describe('readRange', () => {
  test('yields the bytes of [start, end) in chunks of at most 64 KiB', async () => {
    const bytes = Buffer.alloc(200 * 1024);
    for (let i = 0; i < bytes.length; i += 1) bytes[i] = (i * 7) % 251;
    const location = await ws.writeArchive('range.bin', bytes);
    const handle = await open(location, 'r');
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of readRange(handle, 1000, 1000 + 150 * 1024)) chunks.push(chunk);
      assert.deepEqual(
        chunks.map((chunk) => chunk.length),
        [64 * 1024, 64 * 1024, 22 * 1024],
      );
      assert.deepEqual(Buffer.concat(chunks), bytes.subarray(1000, 1000 + 150 * 1024));
      assert.deepEqual(await readAll(readRange(handle, 5, 5)), []);
    } finally {
      await handle.close();
    }
  });

  test('stops at the end of the file when the range runs past it', async () => {
    const location = await ws.writeArchive('short.bin', Buffer.from('0123456789'));
    const handle = await open(location, 'r');
    try {
      const chunks = await readAll(readRange(handle, 4, 100));
      assert.deepEqual(
        chunks.map((chunk) => chunk.toString()),
        ['456789'],
      );
    } finally {
      await handle.close();
    }
  });
});

/** Every chunk, giving up (so a test fails instead of hanging) after a few more than needed. */
async function readAll(chunks: AsyncGenerator<Buffer>): Promise<Buffer[]> {
  const seen: Buffer[] = [];
  for await (const chunk of chunks) {
    seen.push(chunk);
    if (seen.length > 8) break;
  }
  return seen;
}
