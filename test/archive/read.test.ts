import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MANIFEST_PATH, parseManifest } from '../../src/archive/manifest.js';
import { readArchiveContents, readManifest, requireEntry } from '../../src/archive/read.js';
import { openArchive, type ArchiveSource } from '../../src/archive/source.js';
import { makeWorkspace, manifestFor, modelFiles, withManifest, type Workspace } from '../fixtures/archive-workspace.js';
import { rawZip, type RawZipEntry } from '../fixtures/raw-zip.js';

const MiB = 1024 ** 2;

let ws: Workspace;
before(async () => {
  ws = await makeWorkspace();
});
after(() => ws.remove());

let counter = 0;
async function withZip<T>(entries: RawZipEntry[], use: (source: ArchiveSource) => Promise<T>): Promise<T> {
  const location = await ws.writeArchive(`read-${++counter}.mar`, rawZip(entries));
  const source = await openArchive(location);
  try {
    return await use(source);
  } finally {
    await source.close();
  }
}

const entriesOf = (files: ReadonlyMap<string, Buffer>): RawZipEntry[] =>
  [...files].map(([name, data]) => ({ name, data }));

/** An error that starts by naming the archive it is about. */
function about(source: ArchiveSource, code: string) {
  return (error: Error & { code?: string }): boolean => {
    assert.equal(error.code, code);
    assert.ok(error.message.startsWith(`${source.location}`), error.message);
    return true;
  };
}

describe('readArchiveContents', () => {
  test('returns the manifest and the validated config it names', async () => {
    await withZip(entriesOf(withManifest(modelFiles())), async (source) => {
      const contents = await readArchiveContents(source);
      assert.deepEqual(contents.manifest, parseManifest(manifestFor(modelFiles()).toString(), 'expected'));
      assert.equal(contents.config.max_batch_size, 8);
    });
  });

  test('a config file the manifest names but the archive lacks is missing', async () => {
    const files = modelFiles();
    files.delete('config.yaml');
    const entries = [...entriesOf(files), { name: MANIFEST_PATH, data: manifestFor(modelFiles()) }];
    await withZip(entries, async (source) => {
      await assert.rejects(readArchiveContents(source), about(source, 'BS_ERR_ARCHIVE_MISSING_FILE'));
    });
  });

  test('an invalid config is reported against the archive and the file inside it', async () => {
    const files = new Map(modelFiles()).set('config.yaml', Buffer.from('max_batch_size: -3\n'));
    await withZip(entriesOf(withManifest(files)), async (source) => {
      await assert.rejects(readArchiveContents(source), (error: Error & { code?: string }) => {
        assert.equal(error.code, 'BS_ERR_CONFIG_INVALID');
        assert.ok(error.message.startsWith(`${source.location}!config.yaml: `), error.message);
        return true;
      });
    });
  });
});

describe('readManifest', () => {
  test('an archive without one: BS_ERR_ARCHIVE_MANIFEST naming the archive', async () => {
    await withZip(entriesOf(modelFiles()), async (source) => {
      await assert.rejects(readManifest(source), about(source, 'BS_ERR_ARCHIVE_MANIFEST'));
    });
  });

  test('a manifest of exactly 16 MiB is read', async () => {
    const text = manifestFor(modelFiles()).toString();
    const padded = Buffer.from(text.padEnd(16 * MiB, ' '));
    await withZip([{ name: MANIFEST_PATH, data: padded, method: 'deflate' }], async (source) => {
      assert.deepEqual(await readManifest(source), JSON.parse(text));
    });
  });

  test('a manifest declaring more than 16 MiB is refused before any of it is read', async () => {
    // The data is a valid manifest; only the declared size is over the limit.
    const data = manifestFor(modelFiles());
    await withZip([{ name: MANIFEST_PATH, data, declaredSize: 16 * MiB + 1 }], async (source) => {
      await assert.rejects(readManifest(source), about(source, 'BS_ERR_ARCHIVE_MANIFEST'));
    });
  });
});

describe('requireEntry', () => {
  test('the bytes of an entry, or BS_ERR_ARCHIVE_MISSING_FILE naming the archive', async () => {
    await withZip([{ name: 'a.txt', data: 'hello' }], async (source) => {
      assert.equal((await requireEntry(source, 'a.txt')).toString(), 'hello');
      await assert.rejects(requireEntry(source, 'b.txt'), about(source, 'BS_ERR_ARCHIVE_MISSING_FILE'));
    });
  });
});
