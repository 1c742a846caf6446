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

/** A management token and the key file it was read from (undefined when given as a flag or variable). */
export interface ManagementToken {
  readonly token: string | undefined;
  readonly file?: string;
}

/** The management URL, token (see managementToken) and TLS files a CLI command uses. */
export async function managementTarget(options: ManagementTargetOptions): Promise<ManagementTarget> {
  const [{ token }, tls] = await Promise.all([managementToken(options), readTlsClient(options)]);
  return {
    url: options.managementUrl.replace(/\/+$/, ''),
    token,
    ...(tls ? { dispatcher: new Agent({ connect: tls }) } : {}),
  };
}

/**
 * `--token`, else $BATCHSERVE_TOKEN, else a key file: `--token-file`, or the one `serve`
 * writes — $BATCHSERVE_KEY_FILE (its `--key-file` variable) or ./batchserve.key — when it
 * exists. A key file `serve --auth-mode torchserve` wrote (TorchServe's key_file.json) gives
 * its management key.
 */
export async function managementToken(options: { token?: string; tokenFile?: string }): Promise<ManagementToken> {
  const given = options.token ?? process.env.BATCHSERVE_TOKEN;
  if (given !== undefined) return { token: given };
  const file = options.tokenFile ?? (process.env.BATCHSERVE_KEY_FILE || 'batchserve.key');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (options.tokenFile === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT') {
      return { token: undefined };
    }
    throw new ManagementCallError(`cannot read the token file ${file}: ${(error as Error).message}`);
  }
  return { token: tokenOfKeyFile(text.trim(), file), file };
}

function tokenOfKeyFile(text: string, file: string): string | undefined {
  if (!text.startsWith('{')) return text || undefined;
  try {
    const key = (JSON.parse(text) as { management?: { key?: unknown } }).management?.key;
    if (typeof key === 'string') return key;
  } catch {
    // Not JSON after all: reported below with the rest.
  }
  throw new ManagementCallError(`${file} is neither a token nor a key file with a management key`);
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
