import assert from 'node:assert/strict';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { crc32 } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import { sha256OfStream, verifyArchive, type FileCheck } from '../../src/archive/verify.js';
import {
  archiverZip,
  makeWorkspace,
  manifestFor,
  modelFiles,
  openFileCountSettled,
  sha256,
  withManifest,
  writeTree,
  type Workspace,
} from '../fixtures/archive-workspace.js';
import { flipBit, rawZip, type RawZipEntry } from '../fixtures/raw-zip.js';

let ws: Workspace;
before(async () => {
  ws = await makeWorkspace();
});
after(() => ws.remove());

let counter = 0;
const zipOf = (entries: RawZipEntry[]) => ws.writeArchive(`verify-${++counter}.mar`, rawZip(entries));
const entriesOf = (files: ReadonlyMap<string, Buffer>): RawZipEntry[] =>
  [...files].map(([name, data]) => ({ name, data }));
const statusOf = (files: FileCheck[]) => Object.fromEntries(files.map((file) => [file.path, file.status]));

describe('verifyArchive', () => {
  test('a good zip and a good directory archive verify ok', async () => {
    const zip = await archiverZip(join(ws.root, 'archives', 'good.mar'), withManifest(modelFiles()), false);
    const dir = join(ws.root, 'archives', 'good-dir');
    await writeTree(dir, withManifest(modelFiles()));
    for (const location of [zip, dir]) {
      const report = await verifyArchive(location);
      assert.equal(report.ok, true);
      assert.equal(report.location, location);
      assert.equal(report.manifest.model.modelName, 'fixture');
      assert.deepEqual(statusOf(report.files), { 'model.onnx': 'ok', 'config.yaml': 'ok', 'extra/labels.txt': 'ok' });
      const model = report.files.find((file) => file.path === 'model.onnx');
      assert.equal(model?.actualSha256, sha256(modelFiles().get('model.onnx') as Buffer));
    }
  });

  test('a flipped byte in a stored entry is a mismatch, not an exception', async () => {
    const zip = rawZip(entriesOf(withManifest(modelFiles())));
    const at = zip.indexOf('max_batch_size');
    flipBit(zip, at);
    const report = await verifyArchive(await ws.writeArchive('flipped.mar', zip));
    assert.equal(report.ok, false);
    assert.deepEqual(statusOf(report.files), {
      'model.onnx': 'ok',
      'config.yaml': 'mismatch',
      'extra/labels.txt': 'ok',
    });
    const check = report.files.find((file) => file.path === 'config.yaml');
    const config = modelFiles().get('config.yaml') as Buffer;
    assert.equal(check?.expectedSha256, sha256(config));
    assert.equal(check?.actualSha256, sha256(zip.subarray(at, at + config.length)));
  });

  test('an entry rebuilt with a valid CRC is still a mismatch', async () => {
    const tampered = new Map(modelFiles()).set('config.yaml', Buffer.from('max_batch_size: 9\n'));
    const location = await zipOf([
      ...entriesOf(tampered),
      { name: 'MAR-INF/MANIFEST.json', data: manifestFor(modelFiles()) },
    ]);
    const report = await verifyArchive(location);
    assert.equal(report.ok, false);
    assert.equal(statusOf(report.files)['config.yaml'], 'mismatch');
  });

  test('a file the manifest names but the archive lacks is missing', async () => {
    const files = modelFiles();
    files.delete('extra/labels.txt');
    const location = await zipOf([
      ...entriesOf(files),
      { name: 'MAR-INF/MANIFEST.json', data: manifestFor(modelFiles()) },
    ]);
    const report = await verifyArchive(location);
    assert.equal(report.ok, false);
    assert.equal(statusOf(report.files)['extra/labels.txt'], 'missing');
  });

  test('an entry the manifest does not list is unlisted', async () => {
    const location = await zipOf([...entriesOf(withManifest(modelFiles())), { name: 'handler.py', data: 'import os' }]);
    const report = await verifyArchive(location);
    assert.equal(report.ok, false);
    assert.deepEqual(report.files.at(-1), { path: 'handler.py', actualSize: 9, status: 'unlisted' });
  });

  test('no manifest: BS_ERR_ARCHIVE_MANIFEST', async () => {
    const location = await zipOf(entriesOf(modelFiles()));
    await assert.rejects(verifyArchive(location), { code: 'BS_ERR_ARCHIVE_MANIFEST' });
  });

  test('an unparsable manifest: BS_ERR_ARCHIVE_MANIFEST', async () => {
    const location = await zipOf([{ name: 'MAR-INF/MANIFEST.json', data: '{"formatVersion": 1' }]);
    await assert.rejects(verifyArchive(location), { code: 'BS_ERR_ARCHIVE_MANIFEST' });
  });

  test('bytes that match the manifest under a wrong zip CRC-32 are corrupt', async () => {
    const entries = entriesOf(withManifest(modelFiles())).map((entry) =>
      entry.name === 'extra/labels.txt' ? { ...entry, crc32: 12345 } : entry,
    );
    const report = await verifyArchive(await zipOf(entries));
    assert.equal(report.ok, false);
    assert.equal(statusOf(report.files)['extra/labels.txt'], 'corrupt');
  });

  test('a config serve would refuse fails verify, as it fails serve', async () => {
    const configs = [
      'max_batch_size: 1000000000\n',
      'max_batch_size: -3\n',
      'dynamic_batching: {max_queue_delay: -5}\n',
      'instances: [{count: 1000000}]\n',
    ];
    for (const config of configs) {
      const files = new Map(modelFiles()).set('config.yaml', Buffer.from(config));
      await assert.rejects(
        verifyArchive(await zipOf(entriesOf(withManifest(files)))),
        { code: 'BS_ERR_CONFIG_INVALID' },
        config,
      );
    }
  });

  test('a config naming a file outside the archive fails verify', async () => {
    const files = new Map(modelFiles()).set('config.yaml', Buffer.from('labels_file: ../../../etc/passwd\n'));
    await assert.rejects(verifyArchive(await zipOf(entriesOf(withManifest(files)))), {
      code: 'BS_ERR_ARCHIVE_UNSAFE_PATH',
    });
  });

  test('structural problems throw as the guards do', async () => {
    const location = await zipOf([...entriesOf(withManifest(modelFiles())), { name: '../x', data: 'x' }]);
    await assert.rejects(verifyArchive(location), { code: 'BS_ERR_ARCHIVE_UNSAFE_PATH' });
  });
});

describe('sha256OfStream', () => {
  test('hashes and counts across chunks', async () => {
    const chunks = [Buffer.from('hello '), Buffer.from('world'), Buffer.alloc(0)];
    assert.deepEqual(await sha256OfStream(Readable.from(chunks)), {
      sha256: sha256(Buffer.concat(chunks)),
      size: 11,
      crc32: crc32(Buffer.concat(chunks)),
    });
  });
});

describe('verifyArchive, further', () => {
  test('a manifest with the right sha256 but the wrong size is a mismatch', async () => {
    const files = modelFiles();
    const manifest = JSON.parse(manifestFor(files).toString()) as { files: { path: string; size: number }[] };
    for (const file of manifest.files) if (file.path === 'config.yaml') file.size += 1;
    const location = await zipOf([
      ...entriesOf(files),
      { name: 'MAR-INF/MANIFEST.json', data: JSON.stringify(manifest) },
    ]);
    const report = await verifyArchive(location);
    assert.equal(report.ok, false);
    assert.deepEqual(statusOf(report.files), {
      'model.onnx': 'ok',
      'config.yaml': 'mismatch',
      'extra/labels.txt': 'ok',
    });
  });

  test('releases the archive file when done, and when it fails', async () => {
    const good = await zipOf(entriesOf(withManifest(modelFiles())));
    await verifyArchive(good);
    assert.equal(await openFileCountSettled(good), 0);
    const unlisted = await zipOf(entriesOf(modelFiles()));
    await assert.rejects(verifyArchive(unlisted), { code: 'BS_ERR_ARCHIVE_MANIFEST' });
    assert.equal(await openFileCountSettled(unlisted), 0);
  });
});

describe('sha256OfStream, text chunks', () => {
  test('counts UTF-8 bytes, not characters', async () => {
    const text = ['héllo ', 'wörld ✓'];
    const bytes = Buffer.from(text.join(''));
    assert.deepEqual(await sha256OfStream(Readable.from(text)), {
      sha256: sha256(bytes),
      size: bytes.length,
      crc32: crc32(bytes),
    });
  });
});
