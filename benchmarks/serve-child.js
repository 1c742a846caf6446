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
const { SERVING_NODE_FLAGS } = await import('../dist/src/core/serving-node-flags.js');

/** Server on CPU 0 and client on CPU 1 need taskset and two CPUs. */
export const CAN_PIN = spawnSync('taskset', ['--version'], { stdio: 'ignore' }).status === 0 && cpus().length >= 2;

/** Moves this process (every thread) off CPU 0, which the server gets. */
export function pinSelfOffServerCpu() {
  spawnSync('taskset', ['-a', '-p', '-c', '1-1023', String(process.pid)], { stdio: 'ignore' });
}

/**
 * Starts `serve --models name=archive` (Node started with `nodeFlags`, by default the serving
 * flags as the batchserve bin's shebang gives them; `env` added to this process's) and resolves
 * once it listens (`serveBin`: another build's bin, to compare builds), with its URLs, its bench target, its `pid` (the server's own) and `stop()`
 * (SIGTERM, then the exit code).
 */
export async function serveChild({
  name,
  archive,
  dir,
  pinned,
  nodeFlags = SERVING_NODE_FLAGS,
  env = {},
  serveBin = bin,
}) {
  const keyFile = join(dir, `${name}.key`);
  const args = [
    ...nodeFlags,
    serveBin,
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
