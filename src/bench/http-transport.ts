import { Client, Pool, type Dispatcher } from 'undici';
import type { ClientTls } from '../core/client-tls.js';
import { RequestSlot, type LoadTransport, type Settle } from './request-slot.js';
import { Rotation } from './rotation.js';

/** What every request of an HTTP run sends: the same options object each time. */
export interface HttpRequest {
  readonly origin: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  /** Sent in rotation: one body, or `--input-pool`'s. */
  readonly bodies: readonly Uint8Array[];
  /** What an https:// origin's connections trust and present. */
  readonly tls?: ClientTls;
}

/** One request per connection at a time; undici's own timeouts off: the engine's sweep times requests. */
const CONNECTION_OPTIONS = { pipelining: 1, headersTimeout: 0, bodyTimeout: 0 } as const;

/** The reason a timed-out request is aborted with; such a request is already counted. */
const TIMED_OUT = new Error('the request timed out');

/** The header a v2 server names the version that answered in (batchserve's; Triton puts it in the body only). */
const VERSION_HEADER = Buffer.from('x-model-version');

/**
 * HTTP through undici: a Client (one connection) per closed-loop slot, one Pool of
 * `connections` for the open loop.
 */
export class HttpTransport implements LoadTransport {
  readonly #options: Rotation<Dispatcher.DispatchOptions>;
  readonly #origin: string;
  readonly #connect: Client.Options;
  readonly #dispatchers: Dispatcher[] = [];
  readonly #connections: number;
  readonly #settle: Settle;
  #pool: Pool | undefined;

  constructor(request: HttpRequest, connections: number, settle: Settle) {
    this.#origin = request.origin;
    this.#connect = { ...CONNECTION_OPTIONS, ...(request.tls ? { connect: request.tls } : {}) };
    this.#connections = connections;
    this.#settle = settle;
    this.#options = new Rotation(request.bodies).map((body) => ({
      path: request.path,
      method: 'POST' as const,
      headers: request.headers,
      body: Buffer.from(body.buffer, body.byteOffset, body.byteLength),
    }));
  }

  ownSlot(): RequestSlot {
    const client = new Client(this.#origin, this.#connect);
    this.#dispatchers.push(client);
    return new HttpSlot(this.#settle, client, this.#options);
  }

  sharedSlot(): RequestSlot {
    if (!this.#pool) {
      this.#pool = new Pool(this.#origin, { ...this.#connect, connections: this.#connections });
      this.#dispatchers.push(this.#pool);
    }
    return new HttpSlot(this.#settle, this.#pool, this.#options);
  }

  async close(): Promise<void> {
    await Promise.all(this.#dispatchers.map((dispatcher) => dispatcher.destroy()));
  }
}

/**
 * One outstanding request, and its undici handler. It uses the dispatch handler hooks undici's
 * client core calls directly (onConnect/onHeaders/onData/onComplete/onError): the newer
 * controller-style hooks are adapted to these with a wrapper object and a parsed headers
 * object per request, which is what the hot loop avoids.
 */
class HttpSlot extends RequestSlot implements Dispatcher.DispatchHandler {
  #status = 0;
  #version: string | undefined = undefined;
  #retryAfterMs: number | undefined = undefined;
  readonly #versionHeader = new VersionHeader();
  #abort: ((error?: Error) => void) | undefined = undefined;
  readonly #dispatcher: Dispatcher;
  readonly #options: Rotation<Dispatcher.DispatchOptions>;

  constructor(settle: Settle, dispatcher: Dispatcher, options: Rotation<Dispatcher.DispatchOptions>) {
    super(settle);
    this.#dispatcher = dispatcher;
    this.#options = options;
  }

  send(): void {
    this.#status = 0;
    this.#version = undefined;
    this.#retryAfterMs = undefined;
    this.#abort = undefined;
    this.#dispatcher.dispatch(this.#options.next(), this);
  }

  abandon(): void {
    // Not yet on a socket (queued in the pool): onConnect aborts it when it gets there.
    this.#abort?.(TIMED_OUT);
  }

  onConnect(abort: (error?: Error) => void): void {
    if (this.timedOut) abort(TIMED_OUT);
    else this.#abort = abort;
  }

  onHeaders(statusCode: number, headers: Buffer[]): boolean {
    this.#status = statusCode;
    this.#version = this.#versionHeader.read(headers);
    // Only refusals are searched: a success's headers are read once, for the version.
    if (statusCode >= 300) this.#retryAfterMs = retryAfterMs(headers, Date.now());
    return true;
  }

  onData(): boolean {
    return true;
  }

  onComplete(): void {
    const ok = this.#status >= 200 && this.#status < 300;
    this.settle(this, ok ? undefined : String(this.#status), this.#version, ok ? undefined : this.#retryAfterMs);
  }

  onError(error: Error): void {
    this.settle(this, errorKind(error));
  }
}

/**
 * X-Model-Version out of undici's raw headers. A slot's answers nearly always name the same
 * version, so the text is made again only when the bytes change, not once per answer.
 */
class VersionHeader {
  #bytes: Buffer | undefined;
  #text: string | undefined;

  read(headers: Buffer[]): string | undefined {
    for (let i = 0; i + 1 < headers.length; i += 2) {
      if (!isVersionHeader(headers[i] as Buffer)) continue;
      const value = headers[i + 1] as Buffer;
      if (this.#bytes === undefined || !value.equals(this.#bytes)) {
        this.#bytes = Buffer.from(value);
        this.#text = value.toString('latin1');
      }
      return this.#text;
    }
    return undefined;
  }
}

/** Header names are case-insensitive; `| 0x20` lowers a letter and leaves `-` as it is. */
function isHeader(name: Buffer, wanted: Buffer): boolean {
  if (name.length !== wanted.length) return false;
  for (let i = 0; i < name.length; i++) if (((name[i] as number) | 0x20) !== wanted[i]) return false;
  return true;
}

function isVersionHeader(name: Buffer): boolean {
  return isHeader(name, VERSION_HEADER);
}

const RETRY_AFTER_HEADER = Buffer.from('retry-after');

/**
 * `Retry-After` out of undici's raw headers, ms from `nowMs`: delay-seconds or an HTTP-date
 * (RFC 9110 §10.2.3); undefined when absent or unreadable.
 */
export function retryAfterMs(headers: readonly Buffer[], nowMs: number): number | undefined {
  for (let i = 0; i + 1 < headers.length; i += 2) {
    if (!isHeader(headers[i] as Buffer, RETRY_AFTER_HEADER)) continue;
    const value = (headers[i + 1] as Buffer).toString('latin1').trim();
    if (/^\d+$/.test(value)) return Number(value) * 1000;
    const at = Date.parse(value);
    return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
  }
  return undefined;
}

function errorKind(error: Error): string {
  if (error === TIMED_OUT) return 'timeout';
  // Connecting to every address of a name fails with an AggregateError of the attempts.
  const code = (error as { code?: unknown }).code ?? (error as { errors?: { code?: unknown }[] }).errors?.[0]?.code;
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'ETIMEDOUT':
      return 'timeout';
    case 'ECONNREFUSED':
    case 'ECONNRESET':
    case 'ECONNABORTED':
    case 'EPIPE':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'UND_ERR_SOCKET':
    case 'UND_ERR_CLOSED':
      return 'connection';
    default:
      return 'other';
  }
}
