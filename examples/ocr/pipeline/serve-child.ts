import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import type { ApiAddresses } from '../../../src/server/server.js';
import { parseStartupUrls } from '../../../src/server/startup-block.js';
import { servedModels, type OcrArchives } from './pack.js';

export interface ServedOcr {
  readonly urls: ApiAddresses;
  /** SIGTERM (the server drains), then waits for it to exit. */
  stop(): Promise<void>;
}

export interface ServeOptions {
  /** Where the server writes its management key. */
  readonly workDir: string;
  /** Run the server on these CPUs with taskset (the benchmark keeps it off the client's). */
  readonly cpus?: string;
}

/**
 * `batchserve serve` with the four OCR archives as a child process on free ports, as a person
 * would start it; resolves once its start-up line names the URLs (the models are loaded).
 */
export async function serveOcr(root: string, archives: OcrArchives, options: ServeOptions): Promise<ServedOcr> {
  const args = [
    join(root, 'bin', 'batchserve.js'),
    'serve',
    '--models',
    ...servedModels(archives),
    '--port',
    '0',
    '--management-port',
    '0',
    '--metrics-port',
    '0',
    '--grpc-port',
    '0',
    '--startup-format',
    'json',
    '--log-level',
    'warn',
    '--key-file',
    join(options.workDir, 'batchserve.key'),
  ];
  const [command, commandArgs] = options.cpus
    ? ['taskset', ['-c', options.cpus, process.execPath, ...args]]
    : [process.execPath, args];
  const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = once(child, 'exit');
  const urls = await new Promise<ApiAddresses>((resolve, reject) => {
    const check = (): void => {
      const found = parseStartupUrls(stdout);
      if (found) {
        child.stdout.off('data', check);
        child.off('exit', early);
        resolve(found);
      }
    };
    const early = (code: number | null): void =>
      reject(new Error(`batchserve serve exited with ${code} before serving:\n${stderr.trim()}`));
    child.stdout.on('data', check);
    child.once('exit', early);
  });
  return {
    urls,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
