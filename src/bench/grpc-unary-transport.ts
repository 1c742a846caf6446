import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import {
  CallStatus,
  framed,
  GrpcConnection,
  NGHTTP2_CANCEL,
  requestHeaders,
  streamErrorKind,
  type GrpcRequest,
} from './grpc-http2.js';
import { RequestSlot, type LoadTransport, type Settle } from './request-slot.js';
import { Rotation } from './rotation.js';

/**
 * Unary ModelInfer, one HTTP/2 stream per call, every call on one connection as a gRPC
 * channel multiplexes them: closed-loop slots differ from the open loop's only in how they
 * are reused.
 */
export class GrpcUnaryTransport implements LoadTransport {
  readonly #connection: GrpcConnection;
  readonly #headers: Record<string, string>;
  readonly #frames: Rotation<Buffer>;
  readonly #settle: Settle;

  constructor(request: GrpcRequest, settle: Settle) {
    this.#connection = new GrpcConnection(request.url, request.tls);
    this.#headers = requestHeaders(request.path);
    this.#frames = new Rotation(request.bodies).map(framed);
    this.#settle = settle;
  }

  ownSlot(): RequestSlot {
    return this.sharedSlot();
  }

  sharedSlot(): RequestSlot {
    return new UnaryCallSlot(this.#settle, this.#connection, this.#headers, this.#frames);
  }

  close(): Promise<void> {
    this.#connection.close();
    return Promise.resolve();
  }
}

class UnaryCallSlot extends RequestSlot {
  #stream: ClientHttp2Stream | undefined;
  readonly #status = new CallStatus();
  readonly #onHeaders = (headers: IncomingHttpHeaders): void => this.#status.read(headers);
  readonly #onData = (): void => undefined;
  readonly #onError = (error: Error): void => {
    this.#status.error = streamErrorKind(error);
  };
  readonly #onClose = (): void => {
    this.#stream = undefined;
    const outcome = this.#status.outcome();
    this.settle(this, outcome, this.#status.version, outcome === undefined ? undefined : this.#status.retryAfterMs);
  };

  constructor(
    settle: Settle,
    readonly connection: GrpcConnection,
    readonly headers: Record<string, string>,
    readonly frames: Rotation<Buffer>,
  ) {
    super(settle);
  }

  send(): void {
    this.#status.reset();
    let stream: ClientHttp2Stream;
    try {
      stream = this.connection.request(this.headers);
    } catch (error) {
      // A session already closing refuses at once; the engine hears of it as of any failure.
      const kind = streamErrorKind(error as Error);
      queueMicrotask(() => this.settle(this, kind));
      return;
    }
    this.#stream = stream;
    stream.on('response', this.#onHeaders);
    stream.on('trailers', this.#onHeaders);
    stream.on('data', this.#onData);
    stream.on('error', this.#onError);
    stream.on('close', this.#onClose);
    stream.end(this.frames.next());
  }

  abandon(): void {
    this.#stream?.close(NGHTTP2_CANCEL);
  }
}
