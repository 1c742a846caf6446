import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Transform } from 'node:stream';
import { createGunzip, createInflate } from 'node:zlib';
import {
  BatchserveError,
  InferenceInputError,
  MethodNotAllowedError,
  PayloadTooLargeError,
  RouteNotFoundError,
  UnsupportedMediaTypeError,
} from '../core/errors.js';

export type RouteParams = readonly (string | undefined)[];
export type RouteHandler = (req: IncomingMessage, res: ServerResponse, params: RouteParams, url: URL) => Promise<void>;

export interface Route {
  readonly method: string;
  /** Matched against the decoded path; capture groups become `params`. */
  readonly path: RegExp;
  readonly handle: RouteHandler;
}

/**
 * Finds the route for a request: 404 when no path matches, 405 (with the methods that
 * would work) when the path matches under another method.
 */
export function matchRoute(
  routes: readonly Route[],
  method: string,
  pathname: string,
): { route: Route; params: RouteParams } {
  const allowed: string[] = [];
  for (const route of routes) {
    const match = route.path.exec(pathname);
    if (!match) continue;
    if (route.method === method || (method === 'HEAD' && route.method === 'GET')) {
      return {
        route,
        params: match.slice(1).map((part) => (part === undefined ? undefined : decodeURIComponent(part))),
      };
    }
    allowed.push(route.method);
  }
  if (allowed.length > 0) throw new MethodNotAllowedError(method, pathname, [...new Set(allowed)]);
  throw new RouteNotFoundError(`no route for ${method} ${pathname}`);
}

/**
 * Reads the whole body into one buffer of its own (the one copy between the socket and the
 * tensors), refusing (413) beyond `limit` bytes before buffering them. The buffer is placed so
 * that the byte at `alignedAt` starts on an 8-byte boundary: binary tensor data there becomes a
 * typed-array view of the body, not a second copy. Nothing else shares the buffer, so it may
 * move to a worker thread. On refusal the request stream is left open, not destroyed, so the
 * error answer can linger (see `sendError`) instead of resetting a client that is still sending.
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  alignedAt = 0,
  options: { decode?: boolean } = {},
): Promise<Buffer> {
  const coding = contentCoding(req);
  if (coding !== undefined) {
    const decoder = options.decode ? DECODERS[coding] : undefined;
    if (!decoder) {
      const taken = options.decode ? `; this route decodes ${Object.keys(DECODERS).join(', ')}` : '';
      return Promise.reject(new UnsupportedMediaTypeError(`Content-Encoding ${coding} is not accepted here${taken}`));
    }
    return readDecodedBody(req, decoder(), limit, alignedAt);
  }
  return new Promise((resolve, reject) => {
    checkDeclaredLength(req, limit);
    const padding = (8 - (alignedAt % 8)) % 8;
    const declared = Number(req.headers['content-length'] ?? NaN);
    // With a Content-Length the chunks land in place as they come; chunked bodies are gathered first.
    let body = Number.isSafeInteger(declared) ? ownBuffer(declared, padding) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer): void => {
      if (size + chunk.length > limit) {
        stop();
        req.pause();
        reject(tooLarge(size + chunk.length, limit));
        return;
      }
      if (body && size + chunk.length > body.length) {
        // More than declared (the HTTP parser does not let it happen): gather it all instead.
        chunks.push(body.subarray(0, size));
        body = undefined;
      }
      if (body) chunk.copy(body, size);
      else chunks.push(chunk);
      size += chunk.length;
    };
    const onEnd = (): void => {
      stop();
      if (body) {
        resolve(size === body.length ? body : body.subarray(0, size));
        return;
      }
      const gathered = ownBuffer(size, padding);
      let at = 0;
      for (const chunk of chunks) at += chunk.copy(gathered, at);
      resolve(gathered);
    };
    const onError = (error: Error): void => {
      stop();
      reject(error);
    };
    const stop = (): void => {
      req.off('data', onData).off('end', onEnd).off('error', onError);
    };
    req.on('data', onData).on('end', onEnd).on('error', onError);
  });
}

/**
 * The request bodies a decoding route takes compressed, as tritonclient's
 * `request_compression_algorithm` sends them. HTTP's `deflate` is zlib-wrapped.
 */
const DECODERS: Readonly<Record<string, () => Transform>> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
};

/** The body's Content-Encoding, lower-cased; undefined when absent or `identity`. */
function contentCoding(req: IncomingMessage): string | undefined {
  const coding = req.headers['content-encoding']?.trim().toLowerCase();
  return coding === undefined || coding === '' || coding === 'identity' ? undefined : coding;
}

/**
 * Inflates a compressed body as it arrives, holding the decoded bytes to `limit`: a small body
 * that inflates past it (a compression bomb) is refused (413) once the limit is passed, never
 * inflated whole. The decoded body is placed as `readBody` places a plain one.
 */
function readDecodedBody(req: IncomingMessage, decoder: Transform, limit: number, alignedAt: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    checkDeclaredLength(req, limit);
    const chunks: Buffer[] = [];
    let size = 0;
    let received = 0;
    const refuse = (error: Error): void => {
      req.off('data', countReceived);
      req.unpipe(decoder);
      req.pause();
      decoder.destroy();
      reject(error);
    };
    // The compressed bytes are held to the limit too: a chunked upload declares no length.
    const countReceived = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > limit) refuse(tooLarge(received, limit));
    };
    decoder.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        refuse(new PayloadTooLargeError(`the decoded body is over max_request_size (${limit} bytes)`));
        return;
      }
      chunks.push(chunk);
    });
    decoder.on('end', () => {
      req.off('data', countReceived);
      const body = ownBuffer(size, (8 - (alignedAt % 8)) % 8);
      let at = 0;
      for (const chunk of chunks) at += chunk.copy(body, at);
      resolve(body);
    });
    decoder.on('error', (error) => {
      refuse(
        new InferenceInputError(
          `the ${String(req.headers['content-encoding'])} body does not decode: ${error.message}`,
        ),
      );
    });
    req.on('error', (error) => refuse(error));
    req.on('data', countReceived);
    req.pipe(decoder);
  });
}

/** `size` bytes at `padding` into an ArrayBuffer of their own: never Node's shared pool. */
function ownBuffer(size: number, padding: number): Buffer {
  return Buffer.allocUnsafeSlow(size + padding).subarray(padding);
}

/** Refuses (413) a body whose Content-Length is over `limit`, before any of it is read. */
export function checkDeclaredLength(req: IncomingMessage, limit: number): void {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limit) throw tooLarge(declared, limit);
}

function tooLarge(size: number, limit: number): PayloadTooLargeError {
  return new PayloadTooLargeError(`the body is over max_request_size (${limit} bytes; got at least ${size})`);
}

/**
 * How long a refused upload is read and thrown away after its 413 is written. Many clients
 * (Python's http.client, most SDKs) send the whole body before reading: closing on them mid-body
 * turns the 413 into a broken pipe. Like nginx's lingering close, the discarding stops at the
 * body's end, after LINGER_IDLE_MS without data, LINGER_TOTAL_MS in all, or LINGER_MAX_BYTES.
 */
export const LINGER_TOTAL_MS = 30_000;
export const LINGER_IDLE_MS = 5_000;
export const LINGER_MAX_BYTES = 1024 * 1024 * 1024;

/** Ends `res` (already written) once the unread rest of `req` is discarded, within the bounds above. */
function endAfterDiscarding(req: IncomingMessage, res: ServerResponse): void {
  let discarded = 0;
  const finish = (): void => {
    clearTimeout(total);
    clearTimeout(idle);
    req.off('data', onData).off('end', finish).off('error', finish).off('close', finish);
    res.end();
    if (!req.complete) res.destroy();
  };
  const onData = (chunk: Buffer): void => {
    discarded += chunk.length;
    if (discarded > LINGER_MAX_BYTES) finish();
    else idle.refresh();
  };
  const total = setTimeout(finish, LINGER_TOTAL_MS);
  const idle = setTimeout(finish, LINGER_IDLE_MS);
  req.on('data', onData).once('end', finish).once('error', finish).once('close', finish);
  req.resume();
}

/** The media type without parameters, lower-cased; undefined when absent. */
export function mediaType(req: IncomingMessage): string | undefined {
  const header = req.headers['content-type'];
  return header ? header.split(';')[0]?.trim().toLowerCase() : undefined;
}

export function requireMediaType(req: IncomingMessage, accepted: readonly string[]): void {
  const type = mediaType(req);
  if (type !== undefined && !accepted.includes(type)) {
    throw new UnsupportedMediaTypeError(`Content-Type ${type} is not accepted here; use ${accepted.join(' or ')}`);
  }
}

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

const OPENAI_ERROR_TYPES: Readonly<Record<number, string>> = {
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  429: 'rate_limit_error',
};

/**
 * OpenAI's error object (what its clients read), for the /v1 routes; the stable code is both
 * the object's and, as on every other route, the body's.
 */
export function openAiError(message: string, status: number, code: string | undefined): Record<string, unknown> {
  const type = OPENAI_ERROR_TYPES[status] ?? (status < 500 ? 'invalid_request_error' : 'api_error');
  return { error: { message, type, param: null, code: code ?? null }, ...(code !== undefined ? { code } : {}) };
}

/** What a client is told of an error: a BatchserveError's message; of anything else, only where to look. */
export function publicMessage(error: unknown): string {
  return error instanceof BatchserveError ? error.message : 'internal server error (see the server log)';
}

/** The HTTP status an error is answered with: a BatchserveError's own, 500 for anything else. */
export function statusOf(error: unknown): number {
  return error instanceof BatchserveError ? error.httpStatus : 500;
}

/**
 * The one place errors become HTTP answers: a BatchserveError's status, message and stable
 * code (`{"error", "code"}`, the v2 error object plus the code scripts can match on);
 * anything else is a 500 whose details stay in the log. Returns the status sent.
 */
export function sendError(res: ServerResponse, error: unknown): number {
  const status = statusOf(error);
  const message = publicMessage(error);
  if (res.headersSent) {
    // Cut short, unless its route already ended it (a stream that sent its error as an event).
    if (!res.writableEnded) res.destroy();
    return status;
  }
  const headers: Record<string, string> = {};
  if (error instanceof MethodNotAllowedError) headers.allow = error.allowed.join(', ');
  if (status === 503) headers['retry-after'] = '1';
  const code = error instanceof BatchserveError ? error.code : undefined;
  const body = res.req?.url?.startsWith('/v1/')
    ? openAiError(message, status, code)
    : code !== undefined
      ? { error: message, code }
      : { error: message };
  if (status === 413) {
    headers.connection = 'close';
    const req = res.req;
    if (!req.complete) {
      // Written in full but not ended, so the connection stays open while the upload drains.
      const text = JSON.stringify(body);
      res.writeHead(status, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(text),
        ...headers,
      });
      res.write(text);
      endAfterDiscarding(req, res);
      return status;
    }
  }
  sendJson(res, status, body, headers);
  return status;
}
