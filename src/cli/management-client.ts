import { readFile } from 'node:fs/promises';
import { Agent, request, type Dispatcher } from 'undici';
import { ManagementCallError } from '../core/errors.js';
import type { ManagementTargetOptions } from './options.js';
import { readTlsClient } from './tls-options.js';

export interface ManagementTarget {
  readonly url: string;
  readonly token: string | undefined;
  /** With --tls-ca or a client certificate: the connections that trust and present them. */
  readonly dispatcher?: Dispatcher;
}

/**
 * The management URL, token and TLS files a CLI command uses: `--token`, else
 * $BATCHSERVE_TOKEN, else the key file (`--token-file`, or ./batchserve.key where `serve`
 * writes it by default).
 */
export async function managementTarget(options: ManagementTargetOptions): Promise<ManagementTarget> {
  const token = options.token ?? process.env.BATCHSERVE_TOKEN ?? (await readToken(options.tokenFile));
  const tls = await readTlsClient(options);
  return {
    url: options.managementUrl.replace(/\/+$/, ''),
    token,
    ...(tls ? { dispatcher: new Agent({ connect: tls }) } : {}),
  };
}

async function readToken(file: string | undefined): Promise<string | undefined> {
  try {
    return (await readFile(file ?? 'batchserve.key', 'utf8')).trim() || undefined;
  } catch (error) {
    if (file === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ManagementCallError(`cannot read the token file ${file}: ${(error as Error).message}`);
  }
}

/** One JSON call; an error answer becomes a ManagementCallError carrying the server's message. */
export async function callManagement(
  target: ManagementTarget,
  method: 'GET' | 'POST' | 'PUT',
  path: string,
  body?: unknown,
): Promise<unknown> {
  let response;
  try {
    response = await request(`${target.url}${path}`, {
      ...(target.dispatcher ? { dispatcher: target.dispatcher } : {}),
      method,
      headers: {
        ...(target.token ? { authorization: `Bearer ${target.token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch (error) {
    throw new ManagementCallError(`cannot reach the management API at ${target.url}: ${(error as Error).message}`);
  }
  const text = await response.body.text();
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  if (response.statusCode >= 400) {
    const { error, code } = (answer ?? {}) as { error?: unknown; code?: unknown };
    throw new ManagementCallError(
      `the server answered ${response.statusCode}${typeof code === 'string' ? ` ${code}` : ''}: ${typeof error === 'string' ? error : text.slice(0, 200)}`,
    );
  }
  return answer;
}

/** Prints a management answer: JSON for scripts with `--json`, else rendered for people. */
export function printAnswer<T>(answer: T, json: boolean, render: (answer: T) => string): void {
  process.stdout.write(json ? `${JSON.stringify(answer, null, 2)}\n` : render(answer));
}
