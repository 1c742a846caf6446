import { spawn, type ChildProcess } from 'node:child_process';
import { lstat, readdir } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join, relative } from 'node:path';
import type { TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ApiAddresses } from '../../src/server/server.js';
import { parseStartupUrls } from '../../src/server/startup-block.js';
import { SERVING_NODE_FLAGS } from '../../src/core/serving-node-flags.js';

/** The repository root, three floors above dist/test/cli. */
export const REPO = fileURLToPath(new URL('../../../', import.meta.url));
export const BIN = join(REPO, 'bin', 'batchserve.js');

/** process.env without BATCHSERVE_* variables (the runner's own must not leak in), plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('BATCHSERVE_')));
  return { ...env, ...extra };
}

/** A child process whose output is collected as it comes and can be waited on. */
export interface Child {
  readonly process: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** The exit code once all output is read ('close'); null when killed by a signal. */
  readonly exit: Promise<number | null>;
  /** Resolves with the first value `read` finds in stdout and stderr; rejects if the child ends first. */
  waitFor<T>(read: (stdout: string, stderr: string) => T | undefined, what: string): Promise<T>;
}

export function spawnChild(
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Child {
  const child = spawn(command, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: options.env ?? cleanEnv(),
    ...(options.cwd ? { cwd: options.cwd } : {}),
  });
  let stdout = '';
  let stderr = '';
  const watchers = new Set<() => void>();
  const changed = (): void => watchers.forEach((watch) => watch());
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    changed();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
    changed();
  });
  const exit = new Promise<number | null>((done) => child.once('close', (code) => done(code)));
  return {
    process: child,
    stdout: () => stdout,
    stderr: () => stderr,
    exit,
    waitFor: (read, what) =>
      new Promise((resolve, reject) => {
        const watch = (): void => {
          const found = read(stdout, stderr);
          if (found === undefined) return;
          watchers.delete(watch);
          resolve(found);
        };
        watchers.add(watch);
        watch();
        void exit.then((code) => {
          if (!watchers.delete(watch)) return;
          reject(new Error(`waiting for ${what}: the child exited with ${code}\n${stdout}\n${stderr}`));
        });
      }),
  };
}

export interface Served extends Child {
  readonly urls: ApiAddresses;
}

/** Starts `command args` (a `serve`), kills it when the test ends, and waits for its start-up block. */
export async function startServing(
  t: TestContext,
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<Served> {
  const child = spawnChild(command, args, options);
  t.after(() => child.process.kill('SIGKILL'));
  const urls = await child.waitFor((stdout) => parseStartupUrls(stdout), 'the start-up block');
  return { ...child, urls };
}

/**
 * `node <serving flags> bin/batchserve.js serve …` on free ports (unless args name others), as
 * the container's ENTRYPOINT starts it.
 */
export function serveChild(
  t: TestContext,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<Served> {
  const ports = ['--port', '0', '--management-port', '0', '--metrics-port', '0', '--grpc-port', '0'];
  return startServing(t, process.execPath, [...SERVING_NODE_FLAGS, BIN, 'serve', ...ports, ...args], options);
}

/** Runs a command to its end. */
export async function runChild(
  command: string,
  args: readonly string[],
  options: { env?: NodeJS.ProcessEnv; cwd?: string } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawnChild(command, args, options);
  const code = await child.exit;
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

/**
 * Every file and folder under `dir` with its size, mtime and mode: two equal snapshots mean
 * nothing was created, removed or written there (root ignores permissions, so this is the check).
 */
export async function snapshotTree(dir: string): Promise<string[]> {
  const lines: string[] = [];
  const walk = async (path: string): Promise<void> => {
    const stats = await lstat(path);
    lines.push(`${relative(dir, path) || '.'} ${stats.size} ${stats.mtimeMs} ${stats.mode.toString(8)}`);
    if (stats.isDirectory()) for (const name of (await readdir(path)).sort()) await walk(join(path, name));
  };
  await walk(dir);
  return lines;
}

/** Each non-empty line parsed as JSON; a line that is not fails with the line in the message. */
export function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        throw new Error(`not a JSON line: ${line}`);
      }
    });
}

/** A port held open by this process until the test ends. */
export async function holdPort(t: TestContext, host = '127.0.0.1'): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((ready) => server.listen(0, host, ready));
  t.after(() => new Promise<void>((done) => server.close(() => done())));
  return (server.address() as { port: number }).port;
}
