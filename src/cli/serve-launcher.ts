import { spawn } from 'node:child_process';
import { hasServingNodeFlags, SERVING_NODE_FLAGS } from '../core/serving-node-flags.js';

/** Set in the server a launcher started (to the launcher's pid): it serves and never launches again. */
const LAUNCHED = 'BATCHSERVE_LAUNCHED_BY';
/** The signals `serve` drains on; the launcher passes them on. */
const FORWARDED: readonly NodeJS.Signals[] = ['SIGTERM', 'SIGINT'];

/**
 * Whether this `serve` must start Node again with SERVING_NODE_FLAGS: when Node was started
 * without them and this process is not itself a server a launcher started.
 */
export function needsLaunch(execArgv: readonly string[] = process.execArgv, env = process.env): boolean {
  return env[LAUNCHED] === undefined && !hasServingNodeFlags(execArgv);
}

/**
 * Runs this same command line (`serve …`) in a child Node with SERVING_NODE_FLAGS and stands
 * in for it, as TorchServe's launcher starts its JVM with flags of its own. The output is the
 * child's (inherited); SIGTERM and SIGINT sent here are sent on; the child's exit is this
 * process's, its code or the signal that ended it raised again here. The child has a process
 * group of its own (but on Windows), so Ctrl-C in a terminal reaches it once, through here,
 * and a second Ctrl-C ends it at once as it would unlaunched. An IPC channel ties it to this
 * process: if this one dies (SIGKILL), the child ends itself at once (followLauncher), so a
 * supervisor that kills the pid it started kills the server. Resolves with the exit code.
 */
export function launchServe(): Promise<number> {
  const child = spawn(process.execPath, [...SERVING_NODE_FLAGS, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, [LAUNCHED]: String(process.pid) },
    detached: process.platform !== 'win32',
  });
  const forwarders = FORWARDED.map((signal) => [signal, () => child.kill(signal)] as const);
  for (const [signal, forward] of forwarders) process.on(signal, forward);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      for (const [name, forward] of forwarders) process.off(name, forward);
      if (signal) process.kill(process.pid, signal);
      else resolve(code ?? 1);
    });
  });
}

/**
 * In a server a launcher started: ends at once when the launcher is gone (its channel closes
 * however it died). The channel does not keep the process alive once serving is over.
 */
export function followLauncher(): void {
  if (process.env[LAUNCHED] === undefined || !process.channel) return;
  process.once('disconnect', () => process.kill(process.pid, 'SIGKILL'));
  process.channel.unref();
}
