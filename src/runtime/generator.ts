import { InferenceFailedError, ModelNotReadyError } from '../core/errors.js';
import type { ChatTemplate } from '../handlers/chat-template.js';
import type { TextTokenizer } from '../handlers/text-tokens.js';
import { cacheBytesPerToken, type DecoderLayout } from './decoder-layout.js';
import type { FinishReason, GenerationEvents, GenerationSubmission } from './generation-engine.js';
import { sequenceRefusal, type ServedGenerationOptions } from './generation-options.js';
import { fromWireError } from './worker-protocol.js';
import { traceNow } from '../core/trace-channels.js';

export interface GenerationRequest {
  readonly promptIds: readonly number[];
  readonly maxTokens: number;
  readonly temperature: number;
  readonly topP: number;
  readonly stop: readonly string[];
  readonly seed: number | undefined;
  readonly signal?: AbortSignal;
  /** Told each piece of new text once it is final: no stop string can begin in it any more. */
  readonly onText?: (text: string) => void;
  /** Set for a traced request only: the generator notes on it when its prefill began and ended. */
  readonly trace?: GenerationTrace | undefined;
}

/** When a traced sequence went to its engine and when its first token came back (trace-channels.ts's clock, epoch ms). */
export interface GenerationTrace {
  submittedAt: number;
  firstTokenAt: number;
}

export interface GenerationResult {
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** What the metrics hear: seconds to a sequence's first token and between its tokens, the running rows and cache. */
export interface GenerationObserver {
  firstToken(seconds: number): void;
  nextToken(seconds: number): void;
  activeChanged(active: number): void;
  cacheBytes(used: number, reserved: number, prefix: number): void;
  /** Sequences that started from a cached prefix, and the prompt tokens they did not read. */
  prefixReused(sequences: number, tokens: number): void;
}

export interface GenerationListener {
  events(events: GenerationEvents): void;
  /** The thread holding the session stopped: its sequences are lost. */
  stopped(error: Error): void;
}

/** The thread that holds a decoder's session and its engine, as the requests' side sees it. */
export interface GenerationChannel {
  submitGeneration(submission: GenerationSubmission): void;
  cancelGeneration(id: number): void;
  /** Its events reach `listener`, which replaces any before it. */
  listenGeneration(listener: GenerationListener): void;
}

interface Pending {
  readonly request: GenerationRequest;
  readonly channel: GenerationChannel;
  readonly startedAt: number;
  lastTokenAt: number | undefined;
  resolve(result: GenerationResult): void;
  reject(error: unknown): void;
}

/**
 * The requests' side of generation, on the server's thread: checks a request against the
 * model's limits at the door, sends it to an instance's engine (generation-engine.ts, in the
 * instance's worker thread beside its session) and hands its text back as the engine's step
 * events arrive. With several instances, a sequence goes to the one with the fewest.
 */
export class Generator {
  readonly #pending = new Map<number, Pending>();
  readonly #listening = new WeakSet<GenerationChannel>();
  readonly #state = new Map<GenerationChannel, { active: number; used: number; reserved: number; prefix: number }>();
  readonly #bytesPerToken: number;
  #nextId = 0;
  #closed = false;

  constructor(
    /** The instances now: they change when one restarts or the count is scaled. */
    private readonly channels: () => readonly GenerationChannel[],
    readonly layout: DecoderLayout,
    readonly tokenizer: TextTokenizer,
    /** How the chat route turns messages into a prompt. */
    readonly chat: ChatTemplate,
    readonly options: ServedGenerationOptions,
    private readonly observer?: GenerationObserver,
  ) {
    this.#bytesPerToken = cacheBytesPerToken(layout);
  }

  /** Queues a sequence; refused at once when it could never run. */
  generate(request: GenerationRequest): Promise<GenerationResult> {
    if (this.#closed) return Promise.reject(new ModelNotReadyError('the model is unloading'));
    const refusal = sequenceRefusal(this.options, this.#bytesPerToken, request.promptIds.length, request.maxTokens);
    if (refusal) return Promise.reject(refusal);
    const channel = this.#leastBusy();
    if (!channel) return Promise.reject(new ModelNotReadyError('no instance of the model is running'));
    const id = this.#nextId++;
    return new Promise<GenerationResult>((resolve, reject) => {
      const { signal } = request;
      const cancel = (): void => channel.cancelGeneration(id);
      signal?.addEventListener('abort', cancel, { once: true });
      const settle =
        <T>(finish: (value: T) => void) =>
        (value: T) => {
          signal?.removeEventListener('abort', cancel);
          finish(value);
        };
      this.#pending.set(id, {
        request,
        channel,
        startedAt: performance.now(),
        lastTokenAt: undefined,
        resolve: settle(resolve),
        reject: settle(reject),
      });
      if (request.trace) request.trace.submittedAt = traceNow();
      try {
        channel.submitGeneration({
          id,
          promptIds: request.promptIds,
          maxTokens: request.maxTokens,
          temperature: request.temperature,
          topP: request.topP,
          stop: request.stop,
          seed: request.seed ?? Math.floor(Math.random() * 2 ** 32),
        });
      } catch (error) {
        this.#pending.delete(id);
        reject(error instanceof Error ? error : new InferenceFailedError(String(error)));
        return;
      }
      if (signal?.aborted) cancel();
    });
  }

  /** Sequences running now, over every instance. */
  get activeSequences(): number {
    let active = 0;
    for (const state of this.#state.values()) active += state.active;
    return active;
  }

  /** Refuses what is still waiting for an answer: the model is going away (its instances end the rest). */
  close(): void {
    this.#closed = true;
    const error = new ModelNotReadyError('the model was unloaded while generating');
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
  }

  #leastBusy(): GenerationChannel | undefined {
    let best: GenerationChannel | undefined;
    let fewest = Infinity;
    for (const channel of this.channels()) {
      if (!this.#listening.has(channel)) {
        this.#listening.add(channel);
        channel.listenGeneration({
          events: (events) => this.#heard(channel, events),
          stopped: (error) => this.#stopped(channel, error),
        });
      }
      let load = 0;
      for (const pending of this.#pending.values()) if (pending.channel === channel) load++;
      if (load < fewest) {
        fewest = load;
        best = channel;
      }
    }
    return best;
  }

  #heard(channel: GenerationChannel, events: GenerationEvents): void {
    const now = performance.now();
    for (const [id, text] of events.tokens) {
      const pending = this.#pending.get(id);
      if (!pending) continue;
      if (pending.lastTokenAt === undefined) {
        this.observer?.firstToken((now - pending.startedAt) / 1000);
        if (pending.request.trace) pending.request.trace.firstTokenAt = traceNow();
      } else this.observer?.nextToken((now - pending.lastTokenAt) / 1000);
      pending.lastTokenAt = now;
      if (text !== '') pending.request.onText?.(text);
    }
    for (const end of events.ended) {
      const pending = this.#pending.get(end.id);
      if (!pending) continue;
      this.#pending.delete(end.id);
      if ('error' in end) pending.reject(fromWireError(end.error));
      else pending.resolve(end);
    }
    this.#state.set(channel, {
      active: events.active,
      used: events.usedBytes,
      reserved: events.reservedBytes,
      prefix: events.prefixBytes,
    });
    if (events.prefixHits > 0) this.observer?.prefixReused(events.prefixHits, events.prefixTokens);
    this.#observeState();
  }

  #stopped(channel: GenerationChannel, error: Error): void {
    const failure = new InferenceFailedError(`generation failed: ${error.message}`);
    for (const [id, pending] of this.#pending) {
      if (pending.channel !== channel) continue;
      this.#pending.delete(id);
      pending.reject(failure);
    }
    this.#state.delete(channel);
    this.#observeState();
  }

  #observeState(): void {
    let used = 0;
    let reserved = 0;
    let prefix = 0;
    for (const state of this.#state.values()) {
      used += state.used;
      reserved += state.reserved;
      prefix += state.prefix;
    }
    this.observer?.activeChanged(this.activeSequences);
    this.observer?.cacheBytes(used, reserved, prefix);
  }
}
