import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { crc32 } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { unpackArchive } from '../../src/archive/extract.js';
import type { ArchiveLimits } from '../../src/archive/limits.js';
import {
  archiverZip,
  makeWorkspace,
  manifestFor,
  modelFiles,
  openFileCountSettled,
  readTree,
  snapshotTree,
  withManifest,
  writeTree,
  type Workspace,
} from '../fixtures/archive-workspace.js';
import { flipBit, rawZip, SYMLINK_ATTRIBUTES, type RawZipEntry } from '../fixtures/raw-zip.js';

let ws: Workspace;
before(async () => {
  ws = await makeWorkspace();
});
after(() => ws.remove());

/** A harmless entry placed first, so each hostile case also proves the guards run before any write. */
const FIRST = { name: 'model.onnx', data: 'fine on its own' };
const ESCAPE_NAME = `escaped-${randomBytes(4).toString('hex')}.txt`;

interface HostileCase {
  name: string;
  code: string;
  archive: () => Promise<string>;
  limits?: Partial<ArchiveLimits>;
}

let counter = 0;
const zipOf = (entries: RawZipEntry[]) => () => ws.writeArchive(`hostile-${++counter}.mar`, rawZip(entries));
const bytesOf = (bytes: () => Buffer) => () => ws.writeArchive(`hostile-${++counter}.mar`, bytes());
const dirOf = (build: (root: string) => Promise<void>) => async () => {
  const root = join(ws.root, 'archives', `hostile-dir-${++counter}`);
  await writeTree(root, new Map([['model.onnx', Buffer.from('fine')]]));
  await build(root);
  return root;
};
const goodZip = () => rawZip([...withManifest(modelFiles())].map(([name, data]) => ({ name, data })));
/** A well-formed archive's entries with `extra` beside them, every file in its manifest. */
const packedWith = (extra: ReadonlyMap<string, Buffer>): RawZipEntry[] =>
  [...withManifest(new Map([...modelFiles(), ...extra]))].map(([name, data]) => ({ name, data }));

const hostile: HostileCase[] = [
  // From the staging dir (root/out/.model.partial-x), three '..' reach the temp dir itself.
  {
    name: '".." segments',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: `../../../${ESCAPE_NAME}`, data: 'x' }]),
  },
  {
    name: '".." inside a path',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: 'extra/../../x', data: 'x' }]),
  },
  {
    name: 'absolute path',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: `/tmp/${ESCAPE_NAME}`, data: 'x' }]),
  },
  {
    name: 'drive letter with slash',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: 'C:/evil.txt', data: 'x' }]),
  },
  {
    name: 'drive-relative path',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: 'c:evil.txt', data: 'x' }]),
  },
  {
    name: 'backslashes',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: '..\\..\\evil.txt', data: 'x' }]),
  },
  // Each a file name Windows cannot create or opens as something else (README's Safety list).
  ...['a<b.txt', 'a>b.txt', 'say"hi".txt', 'a|b.txt', 'what?.txt', 'all*.txt', 'CON', 'aux.txt', 'extra/CONOUT$']
    .concat(['notes.txt:evil', 'trail.', 'extra/trail ', 'tab\there'])
    .map((name) => ({
      name: `Windows-unsafe name ${JSON.stringify(name)}`,
      code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
      archive: zipOf([FIRST, { name, data: 'x' }]),
    })),
  {
    name: 'NUL byte',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: 'config.yaml\0.txt', data: 'x' }]),
  },
  {
    name: 'empty segment',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: zipOf([FIRST, { name: 'extra//labels.txt', data: 'x' }]),
  },
  {
    name: 'symlink entry',
    code: 'BS_ERR_ARCHIVE_SYMLINK',
    archive: zipOf([FIRST, { name: 'link', data: '/etc/passwd', externalAttributes: SYMLINK_ATTRIBUTES }]),
  },
  {
    name: 'duplicate names',
    code: 'BS_ERR_ARCHIVE_DUPLICATE_ENTRY',
    archive: zipOf([FIRST, { name: 'a.txt', data: '1' }, { name: 'a.txt', data: '2' }]),
  },
  {
    name: 'names equal ignoring case',
    code: 'BS_ERR_ARCHIVE_DUPLICATE_ENTRY',
    archive: zipOf([FIRST, { name: 'Model.onnx', data: '2' }]),
  },
  {
    name: 'a file that is also a directory',
    code: 'BS_ERR_ARCHIVE_DUPLICATE_ENTRY',
    archive: zipOf([FIRST, { name: 'model.onnx/x', data: '2' }]),
  },
  {
    name: 'too many entries',
    code: 'BS_ERR_ARCHIVE_TOO_MANY_ENTRIES',
    archive: zipOf([FIRST, ...['a', 'b', 'c'].map((name) => ({ name, data: name }))]),
    limits: { maxEntries: 3 },
  },
  {
    name: 'zip bomb: 64 MiB of zeros deflated',
    code: 'BS_ERR_ARCHIVE_TOO_LARGE',
    archive: zipOf([FIRST, { name: 'bomb.bin', data: Buffer.alloc(64 * 1024 ** 2), method: 'deflate' }]),
  },
  {
    // The reported bomb in small: every entry under the per-entry ratio floor, the whole
    // archive expanding about a thousand times.
    name: 'zip bomb spread over entries each under the ratio floor',
    code: 'BS_ERR_ARCHIVE_TOO_LARGE',
    archive: zipOf([
      FIRST,
      ...['a', 'b', 'c', 'd'].map((name) => ({ name, data: Buffer.alloc(1024 ** 2), method: 'deflate' as const })),
    ]),
    limits: { ratioFloorBytes: 2 * 1024 ** 2 },
  },
  {
    name: 'entry over maxEntryBytes',
    code: 'BS_ERR_ARCHIVE_TOO_LARGE',
    archive: zipOf([FIRST, { name: 'big', data: Buffer.alloc(2048) }]),
    limits: { maxEntryBytes: 1024 },
  },
  {
    name: 'total over maxTotalBytes',
    code: 'BS_ERR_ARCHIVE_TOO_LARGE',
    archive: zipOf([FIRST, { name: 'a', data: Buffer.alloc(600) }, { name: 'b', data: Buffer.alloc(600) }]),
    limits: { maxTotalBytes: 1000 },
  },
  {
    name: 'lying header: inflates past its declared size',
    code: 'BS_ERR_ARCHIVE_TOO_LARGE',
    archive: zipOf(
      packedWith(new Map([['liar.bin', Buffer.alloc(512 * 1024, 1)]])).map((entry) =>
        entry.name === 'liar.bin' ? { ...entry, method: 'deflate', declaredSize: 1000 } : entry,
      ),
    ),
  },
  { name: 'truncated zip', code: 'BS_ERR_ARCHIVE_CORRUPT', archive: bytesOf(() => goodZip().subarray(0, 200)) },
  {
    name: 'zip missing its last bytes',
    code: 'BS_ERR_ARCHIVE_CORRUPT',
    archive: bytesOf(() => goodZip().subarray(0, -10)),
  },
  {
    name: 'random bytes',
    code: 'BS_ERR_ARCHIVE_CORRUPT',
    archive: bytesOf(() => Buffer.from('not a zip, '.repeat(400))),
  },
  { name: 'empty file', code: 'BS_ERR_ARCHIVE_CORRUPT', archive: bytesOf(() => Buffer.alloc(0)) },
  {
    name: 'central directory record without its signature',
    code: 'BS_ERR_ARCHIVE_CORRUPT',
    archive: bytesOf(() => {
      const zip = goodZip();
      zip.writeUInt32LE(0xdeadbeef, zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02])));
      return zip;
    }),
  },
  {
    // The manifest forged to the flipped bytes: the zip's own CRC-32 still catches them.
    name: 'bytes that match a forged manifest but not their CRC-32',
    code: 'BS_ERR_ARCHIVE_CORRUPT',
    archive: zipOf(
      packedWith(new Map([['b.txt', Buffer.from('hellp')]])).map((entry) =>
        entry.name === 'b.txt' ? { ...entry, crc32: crc32('hello') } : entry,
      ),
    ),
  },
  {
    name: 'no manifest',
    code: 'BS_ERR_ARCHIVE_MANIFEST',
    archive: zipOf([FIRST, { name: 'a/b.txt', data: 'b' }]),
  },
  {
    name: 'a flipped byte in a file the manifest lists',
    code: 'BS_ERR_ARCHIVE_INTEGRITY',
    archive: bytesOf(() => {
      const zip = goodZip();
      flipBit(zip, zip.indexOf('max_batch_size'));
      return zip;
    }),
  },
  {
    // Rebuilt with a correct CRC, as an attacker would: only the manifest catches it.
    name: 'content that disagrees with the manifest',
    code: 'BS_ERR_ARCHIVE_INTEGRITY',
    archive: zipOf(
      [...modelFiles()]
        .map(([name, data]) => ({ name, data: name === 'config.yaml' ? Buffer.from('max_batch_size: 9\n') : data }))
        .concat({ name: 'MAR-INF/MANIFEST.json', data: manifestFor(modelFiles()) }),
    ),
  },
  {
    name: 'manifest naming a missing file',
    code: 'BS_ERR_ARCHIVE_MISSING_FILE',
    archive: zipOf(
      [...modelFiles()]
        .filter(([name]) => name !== 'extra/labels.txt')
        .map(([name, data]) => ({ name, data }))
        .concat({ name: 'MAR-INF/MANIFEST.json', data: manifestFor(modelFiles()) }),
    ),
  },
  {
    name: 'a file the manifest does not list',
    code: 'BS_ERR_ARCHIVE_INTEGRITY',
    archive: zipOf(
      [...withManifest(modelFiles())]
        .map(([name, data]) => ({ name, data }))
        .concat({ name: 'injected.py', data: Buffer.from('x') }),
    ),
  },
  {
    name: 'invalid manifest',
    code: 'BS_ERR_ARCHIVE_MANIFEST',
    archive: zipOf([FIRST, { name: 'MAR-INF/MANIFEST.json', data: '{' }]),
  },
  {
    name: 'directory archive with a file symlink',
    code: 'BS_ERR_ARCHIVE_SYMLINK',
    archive: dirOf((root) => symlink('/etc/passwd', join(root, 'passwd'))),
  },
  {
    name: 'directory archive with a directory symlink',
    code: 'BS_ERR_ARCHIVE_SYMLINK',
    archive: dirOf((root) => symlink('/etc', join(root, 'etc'))),
  },
  {
    name: 'directory archive with a backslash name',
    code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    archive: dirOf((root) => writeFile(join(root, '..\\evil'), 'x')),
  },
  {
    name: 'directory archive with too many entries',
    code: 'BS_ERR_ARCHIVE_TOO_MANY_ENTRIES',
    archive: dirOf((root) =>
      writeTree(root, new Map(['a', 'b', 'c'].map((name) => [`sub/${name}`, Buffer.from(name)]))),
    ),
    limits: { maxEntries: 3 },
  },
];

describe('unpackArchive refuses hostile archives and leaves nothing behind', () => {
  for (const hostileCase of hostile) {
    test(`${hostileCase.name}: ${hostileCase.code}`, async () => {
      const location = await hostileCase.archive();
      const before = await snapshotTree(ws.root);
      await assert.rejects(unpackArchive(location, ws.target, { limits: hostileCase.limits }), {
        code: hostileCase.code,
      });
      assert.deepEqual(await snapshotTree(ws.root), before, 'nothing changed in the workspace');
      assert.deepEqual(
        (await readdir(ws.out)).filter((name) => name.includes('.partial-')),
        [],
        'no partial directory',
      );
      assert.equal(existsSync(join(dirname(ws.root), ESCAPE_NAME)), false);
      assert.equal(existsSync(join('/tmp', ESCAPE_NAME)), false);
    });
  }
});

describe('unpackArchive on well-formed archives', () => {
  const expected = withManifest(modelFiles());
  const sources: [string, () => Promise<string>][] = [
    ['a deflated archiver zip', () => archiverZip(join(ws.root, 'archives', 'ok-deflated.mar'), expected, false)],
    ['a stored archiver zip', () => archiverZip(join(ws.root, 'archives', 'ok-stored.mar'), expected, true)],
    ['a raw zip', () => ws.writeArchive('ok-raw.mar', rawZip([...expected].map(([name, data]) => ({ name, data }))))],
    [
      'a directory archive',
      async () => {
        const root = join(ws.root, 'archives', 'ok-dir');
        await writeTree(root, expected);
        return root;
      },
    ],
  ];
  for (const [name, archive] of sources) {
    test(`${name} unpacks to identical bytes`, async () => {
      const target = join(ws.out, `unpacked-${++counter}`);
      const result = await unpackArchive(await archive(), target);
      assert.deepEqual(result, {
        targetDir: target,
        files: expected.size,
        bytes: [...expected.values()].reduce((sum, bytes) => sum + bytes.length, 0),
      });
      assert.deepEqual(await readTree(target), expected);
      const mode = (await stat(join(target, 'model.onnx'))).mode;
      assert.equal(mode & 0o133, 0, 'files are 0o644 at most');
    });
  }
});

describe('unpackArchive and an existing target', () => {
  const archive = () => ws.writeArchive(`exists-${++counter}.mar`, goodZip());
  const existing = async () => {
    const target = join(ws.out, `existing-${++counter}`);
    await mkdir(target);
    await writeFile(join(target, 'old.txt'), 'old');
    return target;
  };

  test('refuses with BS_ERR_OUTPUT_EXISTS and leaves it alone', async () => {
    const target = await existing();
    await assert.rejects(unpackArchive(await archive(), target), { code: 'BS_ERR_OUTPUT_EXISTS' });
    assert.deepEqual(await readTree(target), new Map([['old.txt', Buffer.from('old')]]));
  });

  test('force replaces it once the extraction succeeded', async () => {
    const target = await existing();
    await unpackArchive(await archive(), target, { force: true });
    assert.deepEqual(await readTree(target), withManifest(modelFiles()));
    assert.deepEqual(
      (await readdir(dirname(target))).filter((name) => name.includes('.partial-')),
      [],
    );
  });

  test('force keeps it when the extraction fails', async () => {
    const target = await existing();
    const hostileArchive = await ws.writeArchive('force-hostile.mar', rawZip([{ name: '../x', data: 'x' }]));
    await assert.rejects(unpackArchive(hostileArchive, target, { force: true }), {
      code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    });
    assert.deepEqual(await readTree(target), new Map([['old.txt', Buffer.from('old')]]));
  });
});

describe('property: zip then unpack is the identity', () => {
  // Safe on every system: no trailing '.', no Windows device names (entryNameProblem).
  const segment = fc
    .stringMatching(/^[a-z0-9_-]([a-z0-9._-]{0,6}[a-z0-9_-])?$/)
    .filter((name) => !/^(con|prn|aux|nul|com\d|lpt\d)(\.|$)/.test(name));
  const tree = fc.uniqueArray(
    fc.tuple(fc.array(segment, { minLength: 1, maxLength: 3 }), fc.uint8Array({ maxLength: 2000 })),
    {
      minLength: 1,
      maxLength: 8,
      selector: ([segments]) => segments.join('/'),
    },
  );

  test('any safe tree, stored or deflated', async () => {
    await fc.assert(
      fc.asyncProperty(tree, fc.boolean(), async (entries, deflate) => {
        const paths = entries.map(([segments]) => segments.join('/'));
        // A path that is another's directory cannot be both; the guards refuse that case.
        fc.pre(paths.every((path) => !paths.some((other) => other.startsWith(`${path}/`))));
        // Under data/, beside a well-formed archive's own files, all of them in its manifest.
        const extra = new Map(entries.map(([segments, data]) => [`data/${segments.join('/')}`, Buffer.from(data)]));
        const entriesOut = packedWith(extra).map(
          (entry) => ({ ...entry, method: deflate ? 'deflate' : 'store' }) as const,
        );
        const target = join(ws.out, `property-${++counter}`);
        await unpackArchive(await ws.writeArchive(`property-${counter}.mar`, rawZip(entriesOut)), target);
        assert.deepEqual(await readTree(target), withManifest(new Map([...modelFiles(), ...extra])));
      }),
      { numRuns: 30 },
    );
  });
});

describe('unpackArchive, further', () => {
  const archive = () => ws.writeArchive(`further-${++counter}.mar`, goodZip());

  test('force with no existing target simply unpacks', async () => {
    const target = join(ws.out, `forced-fresh-${++counter}`);
    await unpackArchive(await archive(), target, { force: true });
    assert.deepEqual(await readTree(target), withManifest(modelFiles()));
  });

  test('a file with the sha256 the manifest lists but another size is refused', async () => {
    const files = modelFiles();
    const manifest = JSON.parse(manifestFor(files).toString()) as { files: { path: string; size: number }[] };
    for (const file of manifest.files) if (file.path === 'extra/labels.txt') file.size -= 1;
    const entries = [...files].map(([name, data]) => ({ name, data }));
    const location = await ws.writeArchive(
      `size-lie-${++counter}.mar`,
      rawZip([...entries, { name: 'MAR-INF/MANIFEST.json', data: JSON.stringify(manifest) }]),
    );
    const target = join(ws.out, `size-lie-${counter}`);
    await assert.rejects(unpackArchive(location, target), (error: Error & { code?: string }) => {
      assert.equal(error.code, 'BS_ERR_ARCHIVE_INTEGRITY');
      assert.ok(error.message.startsWith(`${location}: entry "extra/labels.txt" `), error.message);
      return true;
    });
    assert.equal(existsSync(target), false);
  });

  test('refusals name the entry at fault', async () => {
    const unlisted = await ws.writeArchive(
      `unlisted-${++counter}.mar`,
      rawZip(
        [...withManifest(modelFiles())]
          .map(([name, data]) => ({ name, data }))
          .concat({ name: 'evil.py', data: Buffer.from('x') }),
      ),
    );
    await assert.rejects(unpackArchive(unlisted, join(ws.out, 'unlisted')), (error: Error) =>
      error.message.startsWith(`${unlisted}: entry "evil.py" `),
    );
    const files = modelFiles();
    files.delete('config.yaml');
    const missing = await ws.writeArchive(
      `missing-${++counter}.mar`,
      rawZip(
        [...files]
          .map(([name, data]) => ({ name, data }))
          .concat({ name: 'MAR-INF/MANIFEST.json', data: manifestFor(modelFiles()) }),
      ),
    );
    await assert.rejects(unpackArchive(missing, join(ws.out, 'missing')), (error: Error) =>
      error.message.startsWith(`${missing}: entry "config.yaml" `),
    );
    const existing = join(ws.out, `existing-named-${++counter}`);
    await mkdir(existing);
    await assert.rejects(unpackArchive(await archive(), existing), (error: Error) => error.message.includes(existing));
  });

  test('releases the archive file, on success and on failure', async () => {
    const location = await archive();
    await unpackArchive(location, join(ws.out, `fd-${++counter}`));
    assert.equal(await openFileCountSettled(location), 0);
    const injected = await ws.writeArchive(
      `fd-injected-${++counter}.mar`,
      rawZip(
        [...withManifest(modelFiles())]
          .map(([name, data]) => ({ name, data }))
          .concat({ name: 'x.py', data: Buffer.from('x') }),
      ),
    );
    await assert.rejects(unpackArchive(injected, join(ws.out, `fd-${counter}`)), { code: 'BS_ERR_ARCHIVE_INTEGRITY' });
    assert.equal(await openFileCountSettled(injected), 0);
  });

  test('files are written 0o644 whatever the umask', async () => {
    const location = await archive();
    const target = join(ws.out, `umask-${++counter}`);
    const previous = process.umask(0);
    try {
      await unpackArchive(location, target);
    } finally {
      process.umask(previous);
    }
    assert.equal((await stat(join(target, 'model.onnx'))).mode & 0o777, 0o644);
  });

  test('a target that cannot be looked at is an error, not taken as absent', async () => {
    const file = join(ws.out, `a-file-${++counter}`);
    await writeFile(file, 'x');
    await assert.rejects(unpackArchive(await archive(), join(file, 'model')), { code: 'ENOTDIR' });
  });
});
