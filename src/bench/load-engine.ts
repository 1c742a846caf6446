import { performance } from 'node:perf_hooks';
import { build, type Histogram } from 'hdr-histogram-js';
import { GrpcStreamTransport } from './grpc-stream-transport.js';
import { GrpcUnaryTransport } from './grpc-unary-transport.js';
import { HttpTransport } from './http-transport.js';
import type { ClientTls } from '../core/client-tls.js';
import type { LoadLevel, Protocol } from './report-types.js';
import type { LoadTransport, Outcome, RequestSlot, Settle } from './request-slot.js';

/** One thread's share of a load level: plain data, so it can be handed to a worker thread. */
export interface EngineSettings {
  /** The server: `http://…` (or `https://`) for the REST protocols, `grpc://host:port` (or `grpcs://`) for gRPC. */
  readonly url: string;
  /** What TLS connections trust and present. */
  readonly tls?: ClientTls;
  readonly protocol: Protocol;
  /** The HTTP path, or the gRPC method's. */
  readonly path: string;
  readonly headers: Record<string, string>;
  /** What each request carries, in rotation: one body, or `--input-pool`'s. */
  readonly bodies: readonly Uint8Array[];
  readonly level: LoadLevel;
  /** When this engine's first open-loop request is due, after start. */
  readonly phaseMs: number;
  /** Open-loop HTTP connections. */
  readonly connections: number;
  readonly requestTimeoutMs: number;
  /** Measured requests this engine may complete; Infinity for no limit. */
  readonly budget: number;
}

export interface WindowSample {
  readonly histogram: Histogram;
  readonly successes: number;
  readonly errors: Record<string, number>;
  /** Successes by the model version their answers named; answers naming none are not in it. */
  readonly versions: Record<string, number>;
}

/** The longest a timed-out request goes unnoticed: timeouts are swept, not timed one by one. */
const MAX_SWEEP_MS = 250;

export function newHistogram(): Histogram {
  // Microseconds, 3 significant digits, up to an hour before it resizes.
  return build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3 });
}

/**
 * One thread's load: sends on schedule (closed or open loop), times and counts each answer,
 * and hands over what completed at each snapshot. The transport carries the requests; the
 * hot loop reuses its slots and allocates nothing of its own per request.
 */
export class LoadEngine {
  #histogram = newHistogram();
  #successes = 0;
  #errors: Record<string, number> = {};
  #versions: Record<string, number> = {};
  #measuring = false;
  /** Measured requests counted so far, toward the budget. */
  #counted = 0;
  /** Sent and not yet counted. */
  #outstanding = 0;
  /** Slots the transport still holds (a timed-out request stays here until it lets go). */
  #inFlight = 0;
  #stopped = false;
  readonly #slots: RequestSlot[] = [];
  readonly #idle: RequestSlot[] = [];
  readonly #transport: LoadTransport;
  #nextAt = 0;
  readonly #onTick = (): void => this.#tick();
  readonly #onResend = (slot: RequestSlot): void => this.#resend(slot);
  #tickTimer: NodeJS.Timeout | undefined;
  #sweepTimer: NodeJS.Timeout | undefined;
  #markFinished: () => void = () => undefined;
  readonly finished = new Promise<void>((resolve) => {
    this.#markFinished = resolve;
  });
  readonly #settings: EngineSettings;

  constructor(settings: EngineSettings) {
    this.#settings = settings;
    this.#transport = transportFor(settings, (slot, outcome, version, retryAfterMs) =>
      this.#settle(slot, outcome, version, retryAfterMs),
    );
    const { level } = settings;
    if (level.kind === 'concurrency') {
      for (let i = 0; i < level.concurrency; i++) this.#slots.push(this.#transport.ownSlot());
    }
  }

  start(): void {
    const sweepMs = Math.min(MAX_SWEEP_MS, Math.max(5, this.#settings.requestTimeoutMs / 4));
    this.#sweepTimer = setInterval(() => this.#sweep(), sweepMs);
    if (this.#settings.level.kind === 'concurrency') {
      for (const slot of this.#slots) this.#send(slot, performance.now());
      return;
    }
    this.#nextAt = performance.now() + this.#settings.phaseMs;
    this.#tick();
  }

  snapshot(): WindowSample {
    const sample = {
      histogram: this.#histogram,
      successes: this.#successes,
      errors: this.#errors,
      versions: this.#versions,
    };
    this.#histogram = newHistogram();
    this.#successes = 0;
    this.#errors = {};
    this.#versions = {};
    this.#measuring = true;
    this.#checkFinished();
    return sample;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#tickTimer);
    clearInterval(this.#sweepTimer);
    await this.#transport.close();
  }

  /** Open loop: send everything due, then sleep until the next request is due. */
  #tick(): void {
    const level = this.#settings.level;
    if (level.kind !== 'rate') return;
    const meanGapMs = 1000 / level.rate;
    const now = performance.now();
    while (this.#nextAt <= now && this.#mayStart()) {
      this.#send(this.#idle.pop() ?? this.#newSlot(), this.#nextAt);
      this.#nextAt += level.arrival === 'constant' ? meanGapMs : -Math.log(1 - Math.random()) * meanGapMs;
    }
    if (this.#mayStart()) this.#tickTimer = setTimeout(this.#onTick, Math.max(0, this.#nextAt - now));
  }

  #newSlot(): RequestSlot {
    const slot = this.#transport.sharedSlot();
    this.#slots.push(slot);
    return slot;
  }

  #mayStart(): boolean {
    return !this.#stopped && !(this.#measuring && this.#counted + this.#outstanding >= this.#settings.budget);
  }

  #send(slot: RequestSlot, scheduledAt: number): void {
    slot.scheduledAt = scheduledAt;
    slot.busy = true;
    slot.timedOut = false;
    this.#outstanding += 1;
    this.#inFlight += 1;
    slot.send();
  }

  /**
   * The transport is done with the slot's request: count it (unless already timed out), reuse
   * the slot. A closed-loop client refused with `Retry-After` waits that long before it asks
   * again, as a client that honours the header does: resending at once would measure a retry
   * storm (on a server with few cores, refusals answered as fast as it can refuse take the CPU
   * its forward passes need).
   */
  #settle(slot: RequestSlot, outcome: Outcome, version: string | undefined, retryAfterMs?: number): void {
    if (!slot.busy) return;
    slot.busy = false;
    this.#inFlight -= 1;
    if (this.#stopped) return;
    if (!slot.timedOut) {
      if (outcome === undefined) {
        this.#histogram.recordValue(Math.max(1, Math.round((performance.now() - slot.scheduledAt) * 1000)));
        if (version !== undefined) this.#versions[version] = (this.#versions[version] ?? 0) + 1;
      }
      this.#count(outcome);
    }
    if (this.#settings.level.kind === 'rate') this.#idle.push(slot);
    // After a failure the transport may still be failing its other requests (a refused
    // connection fails undici's whole queue): sending from here would re-enter it.
    else if (outcome !== undefined && retryAfterMs !== undefined && retryAfterMs > 0) {
      // Unref'd: a client told to wait past the end of the run must not hold the process open.
      setTimeout(this.#onResend, retryAfterMs, slot).unref();
    } else if (outcome !== undefined) setImmediate(this.#onResend, slot);
    else if (this.#mayStart()) this.#send(slot, performance.now());
    this.#checkFinished();
  }

  /** Closed loop: the slot's next request, unless the run is over. */
  #resend(slot: RequestSlot): void {
    if (!slot.busy && this.#mayStart()) this.#send(slot, performance.now());
  }

  /** Counts one outcome: undefined is a success (its latency already recorded). */
  #count(outcome: Outcome): void {
    this.#outstanding -= 1;
    if (this.#measuring) this.#counted += 1;
    if (outcome === undefined) this.#successes += 1;
    else this.#errors[outcome] = (this.#errors[outcome] ?? 0) + 1;
  }

  #sweep(): void {
    const deadline = performance.now() - this.#settings.requestTimeoutMs;
    for (const slot of this.#slots) {
      if (!slot.busy || slot.timedOut || slot.scheduledAt > deadline) continue;
      slot.timedOut = true;
      this.#count('timeout');
      slot.abandon();
    }
    this.#checkFinished();
  }

  #checkFinished(): void {
    if (this.#measuring && this.#inFlight === 0 && !this.#mayStart()) this.#markFinished();
  }
}

function transportFor(settings: EngineSettings, settle: Settle): LoadTransport {
  switch (settings.protocol) {
    case 'grpc':
      return new GrpcUnaryTransport(settings, settle);
    case 'grpc-stream':
      return new GrpcStreamTransport(settings, settle);
    default:
      return new HttpTransport({ ...settings, origin: new URL(settings.url).origin }, settings.connections, settle);
  }
}
