import type { ClientHttp2Stream, IncomingHttpHeaders } from 'node:http2';
import protobuf from 'protobufjs';
import {
  CallStatus,
  framed,
  GrpcConnection,
  NGHTTP2_CANCEL,
  requestHeaders,
  streamErrorKind,
  type GrpcRequest,
} from './grpc-http2.js';
import { RequestSlot, type LoadTransport, type Outcome, type Settle } from './request-slot.js';
import { Rotation } from './rotation.js';

/**
 * ModelStreamInfer: a stream of its own per closed-loop slot, which sends its next request
 * when its answer arrives; one stream for the open loop, which sends as requests fall due
 * whatever is unanswered. Each slot's request carries an id of its own, and each answer is
 * matched to its slot by the id it echoes, since a stream answers requests as they finish.
 */
export class GrpcStreamTransport implements LoadTransport {
  readonly #connection: GrpcConnection;
  readonly #headers: Record<string, string>;
  readonly #bodies: readonly Uint8Array[];
  /** Which of the bodies goes next, whichever slot sends it: each slot frames all of them with its own id. */
  readonly #turn: Rotation<number>;
  readonly #settle: Settle;
  readonly #streams: RequestStream[] = [];
  #shared: RequestStream | undefined;
  #slots = 0;

  constructor(request: GrpcRequest, settle: Settle) {
    this.#connection = new GrpcConnection(request.url, request.tls);
    this.#headers = requestHeaders(request.path);
    this.#bodies = request.bodies;
    this.#turn = new Rotation(request.bodies.map((_, index) => index));
    this.#settle = settle;
  }

  ownSlot(): RequestSlot {
    return this.#slotOn(this.#newStream(true));
  }

  sharedSlot(): RequestSlot {
    this.#shared ??= this.#newStream(false);
    return this.#slotOn(this.#shared);
  }

  close(): Promise<void> {
    for (const stream of this.#streams) stream.close();
    this.#connection.close();
    return Promise.resolve();
  }

  #newStream(owned: boolean): RequestStream {
    const stream = new RequestStream(this.#connection, this.#headers, owned);
    this.#streams.push(stream);
    return stream;
  }

  #slotOn(stream: RequestStream): StreamSlot {
    const id = String(this.#slots++);
    const frames = this.#bodies.map((body) => framed(withId(body, id)));
    return new StreamSlot(this.#settle, stream, id, frames, this.#turn);
  }
}

class StreamSlot extends RequestSlot {
  constructor(
    settle: Settle,
    readonly stream: RequestStream,
    readonly id: string,
    readonly frames: readonly Buffer[],
    readonly turn: Rotation<number>,
  ) {
    super(settle);
  }

  /** The request to write now: the next body of the rotation, framed with this slot's id. */
  nextFrame(): Buffer {
    return this.frames[this.turn.next()] as Buffer;
  }

  send(): void {
    this.stream.send(this);
  }

  abandon(): void {
    this.stream.abandon();
  }

  answered(outcome: Outcome, servedVersion?: string): void {
    this.settle(this, outcome, servedVersion);
  }
}

/** One ModelStreamInfer call: opened by its first request, and again by the first after it ends. */
class RequestStream {
  #stream: ClientHttp2Stream | undefined;
  readonly #pending = new Map<string, StreamSlot>();

  constructor(
    readonly connection: GrpcConnection,
    readonly headers: Record<string, string>,
    /** One slot's alone: a timed-out request cancels it, and the slot's next request reopens it. */
    readonly owned: boolean,
  ) {}

  send(slot: StreamSlot): void {
    this.#pending.set(slot.id, slot);
    try {
      (this.#stream ??= this.#open()).write(slot.nextFrame());
    } catch (error) {
      const kind = streamErrorKind(error as Error);
      queueMicrotask(() => this.#failPending(kind));
    }
  }

  /** The shared stream goes on: a timed-out request's slot is freed when its answer comes. */
  abandon(): void {
    if (this.owned) this.#stream?.close(NGHTTP2_CANCEL);
  }

  close(): void {
    this.#stream?.close(NGHTTP2_CANCEL);
  }

  #open(): ClientHttp2Stream {
    const stream = this.connection.request(this.headers);
    const status = new CallStatus();
    const messages = new MessageReader((message) => this.#answer(stream, message));
    stream.on('response', (headers: IncomingHttpHeaders) => status.read(headers));
    stream.on('trailers', (headers: IncomingHttpHeaders) => status.read(headers));
    stream.on('data', (chunk: Buffer) => {
      if (stream === this.#stream) messages.push(chunk);
    });
    stream.on('error', (error: Error) => {
      status.error = streamErrorKind(error);
    });
    // Requests still unanswered when the call ends (an OK end included: the server drained) failed with it.
    stream.on('close', () => {
      if (stream !== this.#stream) return;
      this.#stream = undefined;
      this.#failPending(status.outcome() ?? 'connection');
    });
    return stream;
  }

  #answer(stream: ClientHttp2Stream, message: Buffer): void {
    let answer: StreamAnswer;
    try {
      answer = peekStreamAnswer(message);
    } catch {
      stream.close(NGHTTP2_CANCEL);
      return;
    }
    const slot = this.#pending.get(answer.id);
    if (!slot) return;
    this.#pending.delete(answer.id);
    slot.answered(answer.failed ? 'error_message' : undefined, answer.version);
  }

  #failPending(kind: string): void {
    const unanswered = [...this.#pending.values()];
    this.#pending.clear();
    for (const slot of unanswered) slot.answered(kind);
  }
}

/**
 * gRPC's length-prefixed messages out of a response body's chunks. A message split across
 * chunks is joined once, when its last byte arrives; the answers are never compressed, since
 * the request offers no grpc-accept-encoding.
 */
class MessageReader {
  #chunks: Buffer[] = [];
  #length = 0;

  constructor(readonly onMessage: (message: Buffer) => void) {}

  push(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#length += chunk.length;
    while (this.#length >= 5) {
      if ((this.#chunks[0] as Buffer).length < 5) this.#join();
      const head = this.#chunks[0] as Buffer;
      const size = 5 + head.readUInt32BE(1);
      if (this.#length < size) return;
      if (head.length < size) this.#join();
      const first = this.#chunks[0] as Buffer;
      this.onMessage(first.subarray(5, size));
      if (first.length === size) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(size);
      this.#length -= size;
    }
  }

  #join(): void {
    this.#chunks = [Buffer.concat(this.#chunks, this.#length)];
  }
}

// Field tags (number << 3 | wire type 2, length-delimited) of the inference protos.
/** ModelInferRequest.id and ModelInferResponse.id. */
const ID_TAG = (3 << 3) | 2;
/** ModelInferResponse.model_version. */
const MODEL_VERSION_TAG = (2 << 3) | 2;
const ERROR_MESSAGE_TAG = (1 << 3) | 2;
const INFER_RESPONSE_TAG = (2 << 3) | 2;

/**
 * The request with `id` appended as one more field: a decoder keeps the last value of a
 * field, so the serialized request needs no re-encoding. Ids are short ASCII (one length byte).
 */
function withId(body: Uint8Array, id: string): Buffer {
  return Buffer.concat([body, Buffer.from([ID_TAG, id.length]), Buffer.from(id, 'latin1')]);
}

interface StreamAnswer {
  readonly failed: boolean;
  readonly id: string;
  /** Empty on an answer that names none (a failed one may not). */
  readonly version: string | undefined;
}

/**
 * A ModelStreamInferResponse's error_message (set or not) and its infer_response's id and
 * model_version, read without decoding the rest: the output tensors are skipped over, not copied.
 */
function peekStreamAnswer(bytes: Uint8Array): StreamAnswer {
  const reader = protobuf.Reader.create(bytes);
  let failed = false;
  let id = '';
  let version: string | undefined;
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    if (tag === ERROR_MESSAGE_TAG) {
      const length = reader.uint32();
      failed ||= length > 0;
      reader.skip(length);
    } else if (tag === INFER_RESPONSE_TAG) {
      const end = reader.uint32() + reader.pos;
      while (reader.pos < end) {
        const field = reader.uint32();
        if (field === ID_TAG) id = reader.string();
        else if (field === MODEL_VERSION_TAG) version = reader.string() || undefined;
        else reader.skipType(field & 7);
      }
    } else reader.skipType(tag & 7);
  }
  return { failed, id, version };
}
