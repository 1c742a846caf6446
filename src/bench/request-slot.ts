/**
 * How a request ended: undefined for a success, else the kind of failure: an HTTP status
 * ("503"), a gRPC status name ("NOT_FOUND"), "error_message" (a stream answer that carries
 * one), "connection", "timeout" or "other".
 */
export type Outcome = string | undefined;

/**
 * The load engine's side of a slot: told once per request, however it ends, with the model
 * version the answer named when it named one (so the bench reads that version's statistics),
 * and, for a refusal that said when to come back (HTTP `Retry-After`), how long to wait, ms.
 */
export type Settle = (slot: RequestSlot, outcome: Outcome, servedVersion?: string, retryAfterMs?: number) => void;

/**
 * One request in flight at a time, reused for the next: the engine's bookkeeping here, and
 * what the transport needs to send it (an undici handler, a gRPC call or stream) in each
 * subclass. A subclass calls `settle` exactly once per `send`.
 */
export abstract class RequestSlot {
  /** When the request was due (closed loop: when it was sent); latency runs from here. */
  scheduledAt = 0;
  busy = false;
  /** Already counted as a timeout: whatever the transport reports later only frees the slot. */
  timedOut = false;

  constructor(protected readonly settle: Settle) {}

  abstract send(): void;

  /** Gives up on a timed-out request, which the engine has already counted. */
  abstract abandon(): void;
}

/** What carries a load engine's requests: HTTP (undici) or gRPC, unary or streamed. */
export interface LoadTransport {
  /** A slot on a connection (or stream) of its own: the closed loop's, one request at a time. */
  ownSlot(): RequestSlot;
  /** A slot on the connections (or stream) the open loop shares. */
  sharedSlot(): RequestSlot;
  close(): Promise<void>;
}
