import { mkdir, mkdtemp, readdir, readFile, readlink, rm, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** `batchserve-<pid>-<6 random characters>`, as mkdtemp names it: the pid says who owns it. */
const FOLDER = /^batchserve-(\d+)-[A-Za-z0-9]{6}$/;
const OWNER_FILE = 'owner.json';

/** Who made a work folder: a pid means something only on its host and in its pid namespace. */
interface Owner {
  readonly pid: number;
  readonly host: string;
  readonly pidNamespace: string | null;
  /**
   * When the process started, in clock ticks after boot (Linux's /proc/<pid>/stat): a pid
   * taken since by another process (after a reboot, or once pids wrap) has another start.
   * Null where there is no /proc, and in owner files written before it was kept.
   */
  readonly started: number | null;
}

/** This process's own work folders: a second server in one process must not take the first's for stale. */
const ownFolders = new Set<string>();

export interface WorkFolder {
  /** `<root>/batchserve-<pid>-<random>`, where this server extracts archives. */
  readonly path: string;
  /** Folders of servers that are gone (killed with SIGKILL, crashed), removed on the way. */
  readonly removed: readonly string[];
}

/**
 * Creates this server's work folder under `root` (made if missing), first removing those left
 * by servers that are gone. A folder is left alone unless its owner was on this host, in this
 * pid namespace, and its process is gone: its pid no longer runs, runs as a zombie, or runs a
 * process that started at another time. A pid equal to ours that this process did not create
 * was a previous process's (a container restarted as pid 1).
 */
export async function createWorkFolder(root: string): Promise<WorkFolder> {
  await mkdir(root, { recursive: true, mode: 0o700 });
  const self = await currentOwner();
  const removed: string[] = [];
  for (const entry of await readdir(root, { withFileTypes: true })) {
    const pid = Number(FOLDER.exec(entry.name)?.[1]);
    const path = join(root, entry.name);
    if (!entry.isDirectory() || !Number.isSafeInteger(pid) || ownFolders.has(path)) continue;
    if (!(await isAbandoned(path, pid, self))) continue;
    // Another user's folder in a shared temp folder cannot be removed: left for its owner.
    await rm(path, { recursive: true, force: true }).then(
      () => removed.push(path),
      () => undefined,
    );
  }
  const path = await mkdtemp(join(root, `batchserve-${process.pid}-`));
  ownFolders.add(path);
  await writeFile(join(path, OWNER_FILE), `${JSON.stringify(self)}\n`);
  return { path, removed };
}

export async function removeWorkFolder(path: string): Promise<void> {
  await rm(path, { recursive: true, force: true });
  ownFolders.delete(path);
}

async function isAbandoned(path: string, pid: number, self: Owner): Promise<boolean> {
  const owner = await readOwner(path);
  // Without an owner file (a crash right after mkdtemp), the pid alone decides.
  if (owner && (owner.host !== self.host || owner.pidNamespace !== self.pidNamespace)) return false;
  if (pid === process.pid || !isRunning(pid)) return true;
  const status = await processStatus(String(pid));
  // A server killed a moment ago (kill -9, then a restart at once) is a zombie until whoever
  // started it reaps it: signal 0 still finds it, but it will never run again.
  if (status?.state === 'Z' || status?.state === 'X') return true;
  return owner?.started != null && status !== undefined && status.started !== owner.started;
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A process's state letter and start (clock ticks after boot) from /proc; undefined without /proc. */
async function processStatus(pid: string): Promise<{ state: string; started: number } | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  // `pid (comm) state ppid …`: the name may hold spaces and parentheses, so fields count from
  // the last `)`; the state is field 3, the start time field 22.
  const fields = stat?.slice(stat.lastIndexOf(')') + 2).split(' ');
  const started = Number(fields?.[19]);
  if (!fields?.[0] || !Number.isSafeInteger(started)) return undefined;
  return { state: fields[0], started };
}

async function currentOwner(): Promise<Owner> {
  // Linux names the namespace `pid:[inode]`; elsewhere there is none to tell apart.
  const pidNamespace = await readlink('/proc/self/ns/pid').catch(() => null);
  const started = (await processStatus('self'))?.started ?? null;
  return { pid: process.pid, host: hostname(), pidNamespace, started };
}

async function readOwner(path: string): Promise<Owner | undefined> {
  try {
    const owner = JSON.parse(await readFile(join(path, OWNER_FILE), 'utf8')) as Partial<Owner>;
    if (typeof owner.host !== 'string') return undefined;
    const started = typeof owner.started === 'number' ? owner.started : null;
    return { pid: Number(owner.pid), host: owner.host, pidNamespace: owner.pidNamespace ?? null, started };
  } catch {
    return undefined;
  }
}
