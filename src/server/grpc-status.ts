import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { BatchserveError, LatencyBudgetError, QueueFullError } from '../core/errors.js';
import { cutText } from '../core/quote.js';

/** The trailing metadata key that carries an error's stable `BS_ERR_*` code. */
export const ERROR_CODE_KEY = 'bs-error-code';

/**
 * gRPC's server pushback (gRFC A6): how long a client should wait before it retries, ms. Sent
 * with the load-shedding refusals, as REST sends `Retry-After: 1`; grpc-js clients with a
 * retry policy honour it.
 */
export const RETRY_PUSHBACK_KEY = 'grpc-retry-pushback-ms';
const RETRY_PUSHBACK_MS = '1000';

/**
 * A failure as a gRPC status, mapped as Triton maps its own (the status is each code's line in
 * core/errors.ts): a full queue and a queued timeout are UNAVAILABLE with Triton's messages
 * (our errors carry them already), bad tensors INVALID_ARGUMENT, an unknown model or version
 * NOT_FOUND, a version policy FAILED_PRECONDITION. Anything unexpected is INTERNAL with no
 * details, which stay in the server log.
 */
export function grpcError(error: unknown): Partial<ServiceError> {
  if (!(error instanceof BatchserveError)) {
    return { code: status.INTERNAL, details: 'internal server error (see the server log)' };
  }
  const metadata = new Metadata();
  metadata.set(ERROR_CODE_KEY, error.code);
  if (error instanceof QueueFullError || error instanceof LatencyBudgetError) {
    metadata.set(RETRY_PUSHBACK_KEY, RETRY_PUSHBACK_MS);
  }
  return { code: status[error.grpcStatus], details: statusMessage(error.message), metadata };
}

/**
 * Characters of a status message sent. It travels in the HTTP/2 trailers, percent-encoded (up
 * to 9 bytes a character); trailers past what the client takes (nghttp2: 64 KiB, gRPC C core:
 * 16 KiB) never arrive, and the call hangs to its deadline on a stalled connection. Echoed
 * names and shapes are cut where messages are made (quoted, formatDims); this holds for
 * whatever a message is made of.
 */
export const STATUS_MESSAGE_MAX_CHARACTERS = 1024;

function statusMessage(message: string): string {
  if (message.length <= STATUS_MESSAGE_MAX_CHARACTERS) return message;
  return `${cutText(message, STATUS_MESSAGE_MAX_CHARACTERS)}… (${message.length} characters)`;
}
