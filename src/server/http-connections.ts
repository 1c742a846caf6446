import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';

/**
 * How long a connection must sit idle in a drain before it is closed. A keep-alive client sends
 * its next request on a connection as soon as its last answer arrives, before it can know of the
 * drain; a request already on the way when the connection closes is reset, never answered. One
 * that arrives in this time is answered instead, with `Connection: close`. A connection idle
 * longer belongs to a client that is not sending on it.
 */
const DRAIN_IDLE_MS = 1000;

/**
 * An HTTP port's open connections and the answers in progress on each, so that a drain closes
 * every connection without cutting a request a client has sent on it. Node's own
 * `closeIdleConnections` (which `server.close()` calls since Node 19) destroys a connection
 * whose next request is still in the socket, or a millisecond away, as idle: its client gets
 * ECONNRESET.
 */
export class HttpConnections {
  readonly #server: Server;
  /** Each open connection, with its answers not yet finished (more than one when pipelined). */
  readonly #answers = new Map<Socket, Set<ServerResponse>>();
  readonly #idleTimers = new Map<Socket, NodeJS.Timeout>();
  #draining = false;
  #drained: (() => void) | undefined;

  constructor(server: Server) {
    this.#server = server;
    // An HTTPS server's requests come on the TLS socket, which 'secureConnection' gives.
    server.on(server instanceof TlsServer ? 'secureConnection' : 'connection', (socket: Socket) => {
      this.#answers.set(socket, new Set());
      socket.once('close', () => this.#forget(socket));
    });
    // Before the routes' listener: a route may write its headers before returning.
    server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => this.#answering(req.socket, res));
  }

  /**
   * Stops listening and ends every connection once nothing can be lost on it: each answer from
   * now on says `Connection: close` (Node closes the connection after it), and a connection
   * with no answer in progress is closed once it has been idle for DRAIN_IDLE_MS. Resolves when
   * no connection is open.
   */
  drain(): Promise<void> {
    this.#draining = true;
    // net.Server's close alone: http.Server's would destroy the idle connections at once.
    NetServer.prototype.close.call(this.#server);
    for (const [socket, answers] of this.#answers) {
      for (const res of answers) if (!res.headersSent) res.setHeader('Connection', 'close');
      if (answers.size === 0) this.#closeWhenIdle(socket);
    }
    const drained = new Promise<void>((resolve) => (this.#drained = resolve));
    this.#checkDrained();
    return drained;
  }

  /** Cuts every connection, whatever is on it: past a drain's deadline, or at close. */
  closeAll(): void {
    this.#server.closeAllConnections();
  }

  #answering(socket: Socket, res: ServerResponse): void {
    const answers = this.#answers.get(socket);
    if (!answers) return;
    if (this.#draining) res.setHeader('Connection', 'close');
    clearTimeout(this.#idleTimers.get(socket));
    this.#idleTimers.delete(socket);
    answers.add(res);
    res.once('close', () => {
      answers.delete(res);
      // An answer whose headers went out before the drain kept its connection alive.
      if (this.#draining && answers.size === 0 && this.#answers.has(socket)) this.#closeWhenIdle(socket);
    });
  }

  #closeWhenIdle(socket: Socket): void {
    clearTimeout(this.#idleTimers.get(socket));
    const timer = setTimeout(() => {
      this.#idleTimers.delete(socket);
      if (this.#answers.get(socket)?.size === 0) socket.destroy();
    }, DRAIN_IDLE_MS);
    this.#idleTimers.set(socket, timer);
  }

  #forget(socket: Socket): void {
    clearTimeout(this.#idleTimers.get(socket));
    this.#idleTimers.delete(socket);
    this.#answers.delete(socket);
    this.#checkDrained();
  }

  #checkDrained(): void {
    if (this.#draining && this.#answers.size === 0) this.#drained?.();
  }
}
