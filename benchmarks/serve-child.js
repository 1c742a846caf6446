// A `batchserve serve` child for the benchmarks: one model on free ports, on CPU 0 when the
// benchmark pins, and a bench target on it that can reconfigure it live (management API).
import { spawn, spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../bin/batchserve.js', import.meta.url));
const { waitForStartupUrls } = await import('../dist/src/server/startup-block.js');
const { RemoteTarget } = await import('../dist/src/bench/targets.js');

/** Server on CPU 0 and client on CPU 1 need taskset and two CPUs. */
export const CAN_PIN = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0 && cpus().length >= 2;

/** Moves this process (every thread) off CPU 0, which the server gets. */
export function pinSelfOffServerCpu() {
  spawnSync('taskset', ['-a', '-p', '-c', '1-1023', String(process.pid)], { stdio: 'ignore' });
}

/**
 * Starts `serve --models name=archive` (Node started with `nodeFlags`, `env` added to this
 * process's) and resolves once it listens, with its URLs, its bench target, its `pid` and
 * `stop()` (SIGTERM, then the exit code). The pid is the server's own only when `nodeFlags` carry
 * SERVING_NODE_FLAGS (or `env` marks it launched): otherwise `serve` starts Node again with
 * them, and the pid is the launcher's, which uses no CPU to speak of (/proc figures read 0).
 */
export async function serveChild({ name, archive, dir, pinned, nodeFlags = [], env = {} }) {
  const keyFile = join(dir, `${name}.key`);
  const args = [
    ...nodeFlags,
    bin,
    'serve',
    ...['--models', `${name}=${archive}`, '--key-file', keyFile, '--log-level', 'error'],
    ...['--port', '0', '--management-port', '0', '--metrics-port', '0', '--grpc-port', '0'],
  ];
  const [command, commandArgs] = pinned
    ? ['taskset', ['-c', '0', process.execPath, ...args]]
    : [process.execPath, args];
  const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } });
  const urls = await waitForStartupUrls(child);
  const management = { url: urls.management, token: (await readFile(keyFile, 'utf8')).trim() };
  const target = new RemoteTarget(urls.inference, name, management);
  return {
    urls,
    management,
    target,
    pid: child.pid,
    /** Resolves with the exit code (or the signal that ended it). */
    async stop() {
      await target.close();
      const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
      child.kill('SIGTERM');
      return exited;
    },
  };
}
