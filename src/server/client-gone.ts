import type { IncomingMessage } from 'node:http';

/** What a request's stream fails with when its connection is cut under it. */
const CONNECTION_GONE = new Set([
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ERR_STREAM_PREMATURE_CLOSE',
  'ERR_STREAM_DESTROYED',
]);

/**
 * Whether `error` is the client going away (an aborted upload, a closed tab, a cancelled
 * stream) rather than a fault of the server's: its connection is gone, and the error is what
 * a cut connection raises. Both must hold, so a server bug that happens to meet a hang-up is
 * still logged as one.
 */
export function clientWentAway(req: IncomingMessage, error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return req.socket.destroyed && typeof code === 'string' && CONNECTION_GONE.has(code);
}
