import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, readdir, readFile, readlink, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { createWorkFolder, removeWorkFolder } from '../../src/server/work-dir.js';
import { affineRequest, call, packAffine, startTestServer } from '../fixtures/server.js';
import { tempDir } from '../fixtures/temp.js';
import { serveChild } from '../cli/container-child.js';
import { waitUntil } from './handler-gate.js';

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

/** Field 22 of /proc/<pid>/stat (after the name's closing parenthesis, field 3 is the 1st). */
const startOf = async (pid: number): Promise<number> => {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
};

test(
  'the sweep takes a folder whose pid is a zombie (killed, not yet reaped) or another process started since',
  { skip: process.platform !== 'linux' },
  async (t) => {
    const root = await tempDir(t);
    // sh starts `sleep 0`, then becomes a `sleep` that never reaps it: a zombie while that runs.
    const parent = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
    t.after(() => parent.kill('SIGKILL'));
    const zombie = await new Promise<number>((resolve) =>
      parent.stdout.once('data', (line: Buffer) => resolve(Number(line.toString()))),
    );
    await waitUntil(
      async () => (await readFile(`/proc/${zombie}/stat`, 'utf8')).includes(') Z '),
      'the child is a zombie',
    );
    const here = { host: hostname(), pidNamespace: await readlink('/proc/self/ns/pid') };
    const folder = async (name: string, owner: Record<string, unknown>): Promise<string> => {
      await mkdir(join(root, name));
      await writeFile(join(root, name, 'owner.json'), JSON.stringify(owner));
      return name;
    };
    const alive = process.ppid;
    const removed = [
      await folder(`batchserve-${zombie}-Zombie`, { pid: zombie, ...here }),
      await folder(`batchserve-${alive}-Reused`, { pid: alive, ...here, started: (await startOf(alive)) - 1 }),
    ];
    const kept = [
      await folder(`batchserve-${alive}-SameOn`, { pid: alive, ...here, started: await startOf(alive) }),
      await folder(`batchserve-${alive}-NoStrt`, { pid: alive, ...here }),
    ];

    const created = await createWorkFolder(root);
    assert.deepEqual(created.removed.map((path) => path.slice(root.length + 1)).sort(), removed.sort());
    assert.deepEqual((await readdir(root)).sort(), [...kept, created.path.slice(root.length + 1)].sort());
    const owner = JSON.parse(await readFile(join(created.path, 'owner.json'), 'utf8'));
    assert.equal(owner.started, await startOf(process.pid), 'its own start is written for the next sweep');
    await removeWorkFolder(created.path);
  },
);
