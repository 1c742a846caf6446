import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MANIFEST_PATH } from '../../src/archive/manifest.js';
import { openArchive } from '../../src/archive/source.js';
import { rawZip } from '../fixtures/raw-zip.js';
import { call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { runCli as cli } from '../fixtures/cli.js';

// The reproductions of the path-escape reports: a good archive with one manifest or config
// field rewritten (hashes recomputed where a forger would) is refused by every command that
// reads it, with BS_ERR_ARCHIVE_UNSAFE_PATH, and the file outside is never run or read.

const UNSAFE = 'BS_ERR_ARCHIVE_UNSAFE_PATH';
const AUTH = { authorization: 'Bearer test-token' };

type Files = Map<string, Buffer>;

/** Every entry of an archive, read raw: what a forger starts from. */
async function entriesOf(location: string): Promise<Files> {
  const source = await openArchive(location);
  try {
    const files: Files = new Map();
    for (const entry of source.entries) files.set(entry.path, await source.readFile(entry.path));
    return files;
  } finally {
    await source.close();
  }
}

interface Manifest {
  model: Record<string, string>;
  files: { path: string; size: number; sha256: string }[];
}

/** Writes `files` as a zip after `edit`, which may change the manifest and any file. */
async function forge(from: string, to: string, edit: (manifest: Manifest, files: Files) => void): Promise<string> {
  const files = await entriesOf(from);
  const manifest = JSON.parse((files.get(MANIFEST_PATH) as Buffer).toString()) as Manifest;
  edit(manifest, files);
  for (const listed of manifest.files) {
    const bytes = files.get(listed.path);
    if (bytes === undefined) continue;
    listed.size = bytes.length;
    listed.sha256 = createHash('sha256').update(bytes).digest('hex');
  }
  files.set(MANIFEST_PATH, Buffer.from(JSON.stringify(manifest)));
  await writeFile(to, rawZip([...files].map(([name, data]) => ({ name, data }))));
  return to;
}

/** inspect, verify and unpack each refuse it in one line naming `code`. */
async function refusedByEveryCommand(archive: string, out: string, code = UNSAFE): Promise<void> {
  const runs = await Promise.all([
    cli(['model-archive', 'inspect', archive]),
    cli(['model-archive', 'verify', archive]),
    cli(['model-archive', 'unpack', archive, '--output', join(out, 'unpacked')]),
  ]);
  for (const [index, run] of runs.entries()) {
    const command = ['inspect', 'verify', 'unpack'][index];
    assert.notEqual(run.code, 0, `${command} exits non-zero`);
    const lines = run.stderr.trimEnd().split('\n');
    assert.equal(lines.length, 1, `${command}: ${run.stderr}`);
    assert.match(lines[0] ?? '', new RegExp(`\\[${code}\\]$`), `${command}: ${run.stderr}`);
  }
  assert.equal(existsSync(join(out, 'unpacked')), false, 'unpack wrote nothing');
}

let dir: string;
let good: string;
/** A handler outside every archive that leaves a marker when anything imports it. */
let outside: string;
let marker: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'batchserve-hostile-'));
  good = await packAffine(join(dir, 'good'));
  await mkdir(join(dir, 'x'));
  outside = join(dir, 'x', 'outside.js');
  marker = join(dir, 'x', 'ran');
  await writeFile(
    outside,
    `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'ran');\nexport function postprocess(o) { return o; }\n`,
  );
});

after(() => rm(dir, { recursive: true, force: true }));

/** `..` enough to reach / from any extraction folder, then the absolute path without its '/'. */
const escaping = (absolute: string): string => `${'../'.repeat(12)}${absolute.slice(1)}`;

describe('a manifest path that leaves the archive', () => {
  test('handler: the code-execution reproduction is refused by inspect, verify, unpack, serve and register', async (t) => {
    const evil = await forge(good, join(dir, 'evil-handler.mar'), (manifest) => {
      manifest.model.handler = escaping(outside);
    });
    await refusedByEveryCommand(evil, await tempDir(t));
    await assert.rejects(startTestServer(t, { models: [`affine=${evil}`] }), { code: UNSAFE }, 'serve');

    const store = await tempDir(t);
    await copyFile(good, join(store, 'affine.mar'));
    await copyFile(evil, join(store, 'evil.mar'));
    const server = await startTestServer(t, { models: ['all'], model_store: store });
    const registered = await call(`${server.urls.management}/models?url=evil.mar`, { method: 'POST', headers: AUTH });
    assert.equal(registered.status, 400, JSON.stringify(registered.body));
    assert.equal(registered.body.code, UNSAFE);
    assert.equal(existsSync(marker), false, 'the file outside was never imported');
  });

  test('serializedFile: /etc/passwd is refused as an unsafe path, not opened by onnxruntime', async (t) => {
    const evil = await forge(good, join(dir, 'evil-model.mar'), (manifest) => {
      manifest.model.serializedFile = '../../../etc/passwd';
    });
    await refusedByEveryCommand(evil, await tempDir(t));
    await assert.rejects(startTestServer(t, { models: [`affine=${evil}`] }), { code: UNSAFE });
  });

  test('configFile and extraFiles are held to the same rule', async (t) => {
    for (const [key, value] of [
      ['configFile', '../../../etc/hostname'],
      ['extraFiles', `affine-config.yaml,${escaping('/etc/hostname')}`],
    ] as const) {
      const evil = await forge(good, join(dir, `evil-${key}.mar`), (manifest) => {
        manifest.model[key] = value;
      });
      await refusedByEveryCommand(evil, await tempDir(t));
    }
  });
});

describe('a config path that leaves the archive', () => {
  test('labels_file: refused by inspect, verify, unpack and serve although every hash matches', async (t) => {
    const evil = await forge(good, join(dir, 'evil-labels.mar'), (manifest, files) => {
      files.set(
        manifest.model.configFile as string,
        Buffer.from('max_batch_size: 8\nlabels_file: ../../../etc/passwd\n'),
      );
    });
    await refusedByEveryCommand(evil, await tempDir(t));
    await assert.rejects(startTestServer(t, { models: [`affine=${evil}`] }), { code: UNSAFE });
  });

  test('pack refuses a labels_file outside the archive with the same code', async (t) => {
    const work = await tempDir(t);
    await assert.rejects(packAffine(work, { config: 'max_batch_size: 8\nlabels_file: ../labels.txt\n' }), {
      code: UNSAFE,
    });
  });

  test('a pipeline step file outside the archive is refused before it is imported', async (t) => {
    const evil = await forge(good, join(dir, 'evil-step.mar'), (manifest, files) => {
      manifest.model.handler = 'pipeline';
      manifest.model.serializedFile = manifest.model.configFile as string;
      files.set(
        manifest.model.configFile as string,
        Buffer.from(
          [
            'max_batch_size: 8',
            'inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]',
            'outputs: [{name: y, datatype: FP32, shape: [-1, 4]}]',
            'pipeline:',
            '  steps:',
            `    - {name: s, function: "${escaping(outside)}#postprocess", inputs: {o: x}, outputs: {o: y}}`,
            '',
          ].join('\n'),
        ),
      );
    });
    await refusedByEveryCommand(evil, await tempDir(t));
    assert.equal(existsSync(marker), false);
  });
});

describe('the rest of the hostile-archive corpus', () => {
  test('a YAML alias bomb in the config: one line with the config error code from every command', async (t) => {
    const bomb = [
      'a: &a [x, x, x, x, x, x, x, x, x]',
      ...['b', 'c', 'd', 'e', 'f', 'g', 'h'].map(
        (name, index) => `${name}: &${name} [${Array(9).fill(`*${'abcdefg'[index]}`).join(', ')}]`,
      ),
      '',
    ].join('\n');
    const evil = await forge(good, join(dir, 'evil-bomb.mar'), (manifest, files) => {
      files.set(manifest.model.configFile as string, Buffer.from(bomb));
    });
    await refusedByEveryCommand(evil, await tempDir(t), 'BS_ERR_CONFIG_INVALID');
  });

  test('an entry name with ESC and a newline is refused, and printed escaped', async (t) => {
    const name = 'evil\u001b[31mred\n.txt';
    const evil = await forge(good, join(dir, 'evil-name.mar'), (manifest, files) => {
      files.set(name, Buffer.from('x'));
      manifest.files.push({ path: name, size: 0, sha256: '' });
    });
    await refusedByEveryCommand(evil, await tempDir(t));
    const run = await cli(['model-archive', 'inspect', evil]);
    assert.ok(run.stderr.includes('evil\\u001b[31mred\\n.txt'), run.stderr);
    assert.ok(!run.stderr.includes('\u001b'), 'no raw escape reaches the terminal');
  });

  test('inspect verifies by default, and says so; --no-verify says it did not', async () => {
    const human = await cli(['model-archive', 'inspect', good]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^integrity {2}verified: all 2 files match the manifest$/m);
    const skipped = await cli(['model-archive', 'inspect', '--no-verify', good]);
    assert.match(skipped.stdout, /^integrity {2}not verified \(--no-verify\)/m);
    const json = JSON.parse((await cli(['model-archive', 'inspect', '--json', good])).stdout) as { verified: boolean };
    assert.equal(json.verified, true);
    const lying = await forge(good, join(dir, 'lying.mar'), () => undefined);
    const bytes = await entriesOf(lying);
    const manifest = JSON.parse((bytes.get(MANIFEST_PATH) as Buffer).toString()) as Manifest;
    (manifest.files[0] as { sha256: string }).sha256 = '0'.repeat(64);
    bytes.set(MANIFEST_PATH, Buffer.from(JSON.stringify(manifest)));
    await writeFile(lying, rawZip([...bytes].map(([name, data]) => ({ name, data }))));
    const refused = await cli(['model-archive', 'inspect', lying]);
    assert.equal(refused.code, 1);
    assert.match(refused.stdout, /^integrity {2}FAILED: 1 of 2 files do not match the manifest$/m);
    assert.match(refused.stderr, /fail verification .*mismatch.*\[BS_ERR_ARCHIVE_INTEGRITY\]\n$/);
  });
});

describe('one reader path: the same damage is refused alike by inspect, verify, unpack and serve', () => {
  const zipOf = async (to: string, edit: (files: { name: string; data: Buffer; crc32?: number }[]) => void) => {
    const entries = [...(await entriesOf(good))].map(([name, data]) => ({ name, data }));
    edit(entries);
    await writeFile(to, rawZip(entries));
    return to;
  };
  const cases: [string, string, (files: { name: string; data: Buffer; crc32?: number }[]) => void][] = [
    ['a wrong CRC-32 on the model', 'BS_ERR_ARCHIVE_CORRUPT', (files) => Object.assign(files[0] ?? {}, { crc32: 1 })],
    ['a wrong CRC-32 on the config', 'BS_ERR_ARCHIVE_CORRUPT', (files) => Object.assign(files[1] ?? {}, { crc32: 1 })],
    ['the model the manifest names left out', 'BS_ERR_ARCHIVE_MISSING_FILE', (files) => files.splice(0, 1)],
    ['the config the manifest names left out', 'BS_ERR_ARCHIVE_MISSING_FILE', (files) => files.splice(1, 1)],
  ];
  for (const [what, code, edit] of cases) {
    test(`${what}: ${code} from every command`, async (t) => {
      const damaged = await zipOf(join(await tempDir(t), 'damaged.mar'), (files) => {
        assert.deepEqual(
          files.map((file) => file.name),
          ['affine.onnx', 'model-config.yaml', MANIFEST_PATH],
        );
        edit(files);
      });
      await refusedByEveryCommand(damaged, await tempDir(t), code);
      await assert.rejects(startTestServer(t, { models: [`affine=${damaged}`] }), { code }, 'serve');
    });
  }
});
