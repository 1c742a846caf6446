import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, readdir, readlink, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createWorkFolder, removeWorkFolder } from '../../src/server/work-dir.js';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { serveChild } from '../cli/container-child.js';

/** The folders in a work dir that belong to `pid`. */
const foldersOf = async (workDir: string, pid: number | undefined): Promise<string[]> =>
  (await readdir(workDir)).filter((name) => name.startsWith(`batchserve-${pid}-`));

const exists = (path: string): Promise<boolean> =>
  stat(path).then(
    () => true,
    () => false,
  );

test("a server killed with SIGKILL leaves its work folder; the next start removes it and never a live server's", async (t) => {
  const dir = await tempDir(t);
  const archive = await packAffine(dir);
  const workDir = join(dir, 'work');
  const args = ['--models', `affine=${archive}`, '--no-auth', '--work-dir', workDir];
  const [live, killed] = await Promise.all([
    serveChild(t, [...args, '--state-file', join(dir, 'live.json')]),
    serveChild(t, [...args, '--state-file', join(dir, 'killed.json')]),
  ]);
  const [liveFolder] = await foldersOf(workDir, live.process.pid);
  const [killedFolder] = await foldersOf(workDir, killed.process.pid);
  assert.ok(liveFolder && killedFolder, (await readdir(workDir)).join(', '));
  killed.process.kill('SIGKILL');
  assert.equal(await killed.exit, null);
  assert.ok(await exists(join(workDir, killedFolder)), 'SIGKILL leaves the folder behind');

  const next = await startTestServer(t, { models: [`affine=${archive}`], work_dir: workDir });
  assert.equal(await exists(join(workDir, killedFolder)), false, "the dead server's folder is gone");
  assert.ok(await exists(join(workDir, liveFolder)), "the live server's folder is left alone");
  assert.ok(next.workDir.startsWith(join(workDir, `batchserve-${process.pid}-`)));
  const answer = await call(`${live.urls.inference}/v2/models/affine/infer`, { body: affineRequest([[1, 2, 3, 4]]) });
  assert.equal(answer.status, 200, 'the live server still serves');

  live.process.kill('SIGTERM');
  assert.equal(await live.exit, 0);
  assert.deepEqual(await foldersOf(workDir, live.process.pid), [], 'a server that exits removes its own');
  await next.close();
  assert.deepEqual(await readdir(workDir), []);
});

test('the sweep removes only batchserve-<pid>-<random> folders of gone processes on this host and pid namespace', async (t) => {
  const root = await tempDir(t);
  const deadPid = await new Promise<number>((done) => {
    const child = spawn(process.execPath, ['-e', '']);
    child.once('exit', () => done(child.pid as number));
  });
  const pidNamespace = await readlink('/proc/self/ns/pid').catch(() => null);
  const here = { host: hostname(), pidNamespace };
  const folder = async (name: string, owner?: Record<string, unknown>): Promise<string> => {
    await mkdir(join(root, name));
    if (owner) await writeFile(join(root, name, 'owner.json'), JSON.stringify(owner));
    return name;
  };
  const first = await createWorkFolder(root);
  const removed = [
    // A previous process with our pid (a restarted container's pid 1).
    await folder(`batchserve-${process.pid}-Abc123`, { pid: process.pid, ...here }),
    await folder(`batchserve-${deadPid}-noOwnr`),
    await folder(`batchserve-${deadPid}-Dead00`, { pid: deadPid, ...here }),
  ];
  const kept = [
    await folder(`batchserve-${process.ppid}-Alive0`, { pid: process.ppid, ...here }),
    await folder(`batchserve-${deadPid}-Other0`, { pid: deadPid, host: 'another-host', pidNamespace }),
    await folder(`batchserve-${deadPid}-Other1`, { pid: deadPid, host: hostname(), pidNamespace: 'pid:[1]' }),
    await folder('batchserve-test-abc123'),
    await folder('batchserve-Xyz789'),
    await folder(`batchserve-${deadPid}-toolong1`),
    await folder('something-else'),
  ];
  await writeFile(join(root, `batchserve-${deadPid}-aFile0`), 'not a folder');
  kept.push(`batchserve-${deadPid}-aFile0`);

  const second = await createWorkFolder(root);
  assert.deepEqual(second.removed.map((path) => path.slice(root.length + 1)).sort(), removed.sort());
  const left = await readdir(root);
  for (const name of kept) assert.ok(left.includes(name), name);
  assert.ok(await exists(first.path), "this process's own first folder is kept");
  assert.ok(await exists(join(second.path, 'owner.json')));
  await removeWorkFolder(first.path);
  assert.equal(await exists(first.path), false);
});
