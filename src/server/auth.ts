import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmod, writeFile } from 'node:fs/promises';
import { UnauthorizedError } from '../core/errors.js';
import type { Route } from './http.js';

/** What a key opens: the management API, the model-running routes, or the /token route. */
export type KeyKind = 'management' | 'inference' | 'API';

interface Key {
  readonly value: string;
  readonly digest: Buffer;
  /** Date.now() milliseconds; undefined = never. */
  readonly expiresAt: number | undefined;
}

/** Hashing first makes the comparison constant-time whatever the presented length. */
const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

const newKey = (expirationMs: number | undefined, value = randomBytes(24).toString('base64url')): Key => ({
  value,
  digest: digest(value),
  expiresAt: expirationMs === undefined ? undefined : Date.now() + expirationMs,
});

/**
 * The keys a bearer token is checked against. One management token by default, which never
 * expires. In TorchServe's mode (`auth.mode: torchserve`, as TorchServe ≥ 0.11 runs), three
 * keys written to the key file as TorchServe writes key_file.json: the management key, the
 * inference key that the model-running routes then need, and the API key that
 * `GET /token?type=management|inference` takes to issue a new one. The first two expire after
 * `auth.key_expiration` (0: never), as TorchServe's token_expiration_min.
 */
export class KeyRing {
  readonly #keys = new Map<KeyKind, Key>();
  readonly #file: string | undefined;
  readonly #expirationMs: number | undefined;

  private constructor(file: string | undefined, expirationMs: number | undefined) {
    this.#file = file;
    this.#expirationMs = expirationMs;
  }

  /** One management token, given or generated; `file` is where a generated one is written. */
  static async single(token: string | undefined, file: string): Promise<KeyRing> {
    const ring = new KeyRing(token === undefined ? file : undefined, undefined);
    ring.#keys.set('management', newKey(undefined, token));
    if (token === undefined) await ring.#write(`${ring.management}\n`);
    return ring;
  }

  static async torchserve(file: string, expirationMs: number | undefined): Promise<KeyRing> {
    const ring = new KeyRing(file, expirationMs);
    ring.#keys.set('management', newKey(expirationMs));
    ring.#keys.set('inference', newKey(expirationMs));
    ring.#keys.set('API', newKey(undefined));
    await ring.#write(`${JSON.stringify(ring.keyFile(), null, 2)}\n`);
    return ring;
  }

  /** The management key now (it changes when renewed). */
  get management(): string {
    return (this.#keys.get('management') as Key).value;
  }

  /** Where the keys were written; undefined for a token given in the config. */
  get file(): string | undefined {
    return this.#file;
  }

  get mode(): 'single' | 'torchserve' {
    return this.#keys.has('API') ? 'torchserve' : 'single';
  }

  /** Whether calls of this kind need a key at all. */
  guards(kind: KeyKind): boolean {
    return this.#keys.has(kind);
  }

  /** Throws UnauthorizedError unless `authorization` is `Bearer <the key of this kind>`, unexpired. */
  check(kind: KeyKind, authorization: string | undefined): void {
    const key = this.#keys.get(kind);
    if (key === undefined) return;
    const presented = /^Bearer (.+)$/i.exec(authorization ?? '')?.[1];
    const name = this.mode === 'single' ? 'the management token' : `the ${kind} key`;
    if (!presented) throw new UnauthorizedError(`this call needs "Authorization: Bearer <token>" (${name})`);
    if (!timingSafeEqual(digest(presented), key.digest)) throw new UnauthorizedError('the bearer token is wrong');
    if (key.expiresAt !== undefined && Date.now() > key.expiresAt) {
      throw new UnauthorizedError(
        `${name} has expired; get a new one with GET /token?type=${kind} on the management API and the API key`,
      );
    }
  }

  /** A new management or inference key, written to the key file; answers the file's content. */
  async renew(kind: 'management' | 'inference'): Promise<Record<string, unknown>> {
    this.#keys.set(kind, newKey(this.#expirationMs));
    const content = this.keyFile();
    await this.#write(`${JSON.stringify(content, null, 2)}\n`);
    return content;
  }

  /** TorchServe's key_file.json: each key with its expiration time (ISO), the API key bare. */
  keyFile(): Record<string, unknown> {
    const entry = (kind: KeyKind): Record<string, string> => {
      const key = this.#keys.get(kind) as Key;
      return {
        key: key.value,
        ...(key.expiresAt !== undefined ? { 'expiration time': new Date(key.expiresAt).toISOString() } : {}),
      };
    };
    return { management: entry('management'), inference: entry('inference'), API: entry('API') };
  }

  async #write(text: string): Promise<void> {
    if (this.#file === undefined) return;
    await writeFile(this.#file, text, { mode: 0o600 });
    await chmod(this.#file, 0o600);
  }
}

/**
 * Wraps a route so it runs only for `Authorization: Bearer <key of this kind>` (401 otherwise);
 * with no keys (`--no-auth`), or none of this kind, the route is open.
 */
export function authenticated(keys: KeyRing | undefined, kind: KeyKind, handle: Route['handle']): Route['handle'] {
  if (!keys?.guards(kind)) return handle;
  return async (req, res, params, url) => {
    keys.check(kind, req.headers.authorization);
    await handle(req, res, params, url);
  };
}
