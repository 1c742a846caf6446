import http2, { type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import type { ClientTls } from '../core/client-tls.js';
import { grpcStatusKind, grpcTarget, isSecureGrpcUrl } from './grpc-channel.js';
import type { Outcome } from './request-slot.js';

/*
 * gRPC spoken straight over node:http2 by the bench's load, as the HTTP transport speaks
 * undici's dispatch API: a load generator must cost less than the server it measures.
 * grpc-js runs each call through its channel, resolver, load balancer, retry and filter
 * layers, which cost a 2-core load machine about twice the client CPU a call of this file
 * costs, and so capped the rate it could offer. Requests are framed once and the same bytes
 * go out each time; answers are never decoded.
 */

/** What every request of a gRPC run sends. */
export interface GrpcRequest {
  /** `grpc://host:port`, or `grpcs://host:port` over TLS. */
  readonly url: string;
  /** What a grpcs:// connection trusts and presents. */
  readonly tls?: ClientTls;
  /** The method: `/inference.GRPCInferenceService/ModelInfer` or `…/ModelStreamInfer`. */
  readonly path: string;
  /** Serialized ModelInferRequests, sent in rotation (one, or `--input-pool`'s). */
  readonly bodies: readonly Uint8Array[];
}

/** Receive windows: answers of any size flow without waiting for window updates. */
const WINDOW_BYTES = 16 * 1024 * 1024;
const { HTTP2_HEADER_METHOD, HTTP2_HEADER_PATH, HTTP2_HEADER_STATUS } = http2.constants;
export const { NGHTTP2_CANCEL } = http2.constants;

/** The request as gRPC puts it on the wire: uncompressed flag, 4-byte big-endian length, message. */
export function framed(message: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(5 + message.byteLength);
  frame[0] = 0;
  frame.writeUInt32BE(message.byteLength, 1);
  frame.set(message, 5);
  return frame;
}

/** A call's request headers; `:scheme` and `:authority` come from the connection. */
export function requestHeaders(path: string): Record<string, string> {
  return {
    [HTTP2_HEADER_METHOD]: 'POST',
    [HTTP2_HEADER_PATH]: path,
    'content-type': 'application/grpc',
    te: 'trailers',
  };
}

/** One HTTP/2 connection to the server: opened at the first request, and again after it closes. */
export class GrpcConnection {
  #session: ClientHttp2Session | undefined;
  readonly #origin: string;
  readonly #tls: ClientTls;

  constructor(url: string, tls: ClientTls = {}) {
    this.#origin = `${isSecureGrpcUrl(url) ? 'https' : 'http'}://${grpcTarget(url)}`;
    this.#tls = tls;
  }

  request(headers: Record<string, string>): ClientHttp2Stream {
    return (this.#session ??= this.#connect()).request(headers);
  }

  close(): void {
    this.#session?.destroy();
    this.#session = undefined;
  }

  #connect(): ClientHttp2Session {
    const session = http2.connect(this.#origin, { ...this.#tls, settings: { initialWindowSize: WINDOW_BYTES } });
    session.once('connect', () => session.setLocalWindowSize(WINDOW_BYTES));
    // Each stream on it fails with its own error, which is what gets counted.
    session.on('error', () => undefined);
    session.once('close', () => {
      if (this.#session === session) this.#session = undefined;
    });
    return session;
  }
}

/** A failed stream's kind: a refused or lost connection, or anything else. */
export function streamErrorKind(error: Error): string {
  // A stream cut by its session's failure carries that failure as its cause.
  const { code, cause } = error as { code?: string; cause?: { code?: string } };
  switch (cause?.code ?? code) {
    case 'ECONNREFUSED':
    case 'ECONNRESET':
    case 'EPIPE':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'ERR_HTTP2_GOAWAY_SESSION':
    case 'ERR_HTTP2_INVALID_SESSION':
    case 'ERR_HTTP2_SESSION_ERROR':
    case 'ERR_HTTP2_STREAM_CANCEL':
      return 'connection';
    case 'ETIMEDOUT':
      return 'timeout';
    default:
      return 'other';
  }
}

/**
 * How a call ended: its grpc-status (from the trailers, or from the headers of a
 * trailers-only answer); an HTTP status other than 200 when it has none (not a gRPC server);
 * else the stream's error.
 */
export class CallStatus {
  grpcStatus: string | undefined;
  httpStatus = 0;
  error: string | undefined;
  /** The version that answered: the x-model-version metadata. */
  version: string | undefined;
  /** A refusal's server pushback (`grpc-retry-pushback-ms`, gRFC A6): wait this long before the next call. */
  retryAfterMs: number | undefined;

  reset(): void {
    this.grpcStatus = undefined;
    this.httpStatus = 0;
    this.error = undefined;
    this.version = undefined;
    this.retryAfterMs = undefined;
  }

  read(headers: IncomingHttpHeaders): void {
    const grpcStatus = headers['grpc-status'];
    if (typeof grpcStatus === 'string') this.grpcStatus = grpcStatus;
    const pushback = headers['grpc-retry-pushback-ms'];
    // gRFC A6: a value that is not a whole number of ms means "do not retry"; it is ignored here.
    if (typeof pushback === 'string' && /^\d+$/.test(pushback)) this.retryAfterMs = Number(pushback);
    const version = headers['x-model-version'];
    if (typeof version === 'string') this.version = version;
    const httpStatus = headers[HTTP2_HEADER_STATUS];
    if (typeof httpStatus === 'number') this.httpStatus = httpStatus;
  }

  outcome(): Outcome {
    if (this.grpcStatus !== undefined)
      return this.grpcStatus === '0' ? undefined : grpcStatusKind(Number(this.grpcStatus));
    if (this.error !== undefined) return this.error;
    return this.httpStatus !== 0 && this.httpStatus !== 200 ? String(this.httpStatus) : 'other';
  }
}
