import { InferenceFailedError, ModelNotReadyError } from '../core/errors.js';
import type { ChatTemplate } from '../handlers/chat-template.js';
import type { TextTokenizer } from '../handlers/text-tokens.js';
import { cacheBytesPerToken, type DecoderLayout } from './decoder-layout.js';
import type { FinishReason, GenerationEvents, GenerationSubmission } from './generation-engine.js';
import { sequenceRefusal, type ServedGenerationOptions } from './generation-options.js';
import { fromWireError } from './worker-protocol.js';
import { traceNow } from '../core/trace-channels.js';

/** A submission as the routes make it: no id yet, and a seed only when the request names one. */
export interface GenerationRequest extends Omit<GenerationSubmission, 'id' | 'seed'> {
  readonly seed: number | undefined;
  readonly signal?: AbortSignal;
  /**
   * Told each piece of new text of answer `choice` once it is final (no stop string can begin
   * in it any more), with the tokens drawn since the last piece when logprobs were asked.
   */
  readonly onText?: (text: string, choice: number, tokens: readonly TokenLogprobs[]) => void;
  /** Set for a traced request only: the generator notes on it when its prefill began and ended. */
  readonly trace?: GenerationTrace | undefined;
}

/** When a traced sequence went to its engine and when its first token came back (trace-channels.ts's clock, epoch ms). */
export interface GenerationTrace {
  submittedAt: number;
  firstTokenAt: number;
}

/** A drawn token as the routes report it: its id, its log probability, the likeliest alternatives [id, logprob]. */
export interface TokenLogprobs {
  readonly token: number;
  readonly logprob: number;
  readonly top: readonly (readonly [number, number])[];
}

export interface ChoiceResult {
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly completionTokens: number;
  /** Every token drawn but an end token, when logprobs were asked. */
  readonly tokens: readonly TokenLogprobs[] | undefined;
}

export interface GenerationResult {
  /** The first answer's text and finish; usage counts them all. */
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly promptTokens: number;
  /** Over every answer. */
  readonly completionTokens: number;
  /** Every answer, in order (one unless `choices` asked for more). */
  readonly choices: readonly ChoiceResult[];
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
  /** Each answer once it ended, by choice. */
  readonly ended: (ChoiceResult | undefined)[];
  /** Each answer's tokens since its last piece of text went out (logprobs asked), and all of them. */
  readonly unsent: TokenLogprobs[][];
  readonly drawn: TokenLogprobs[][];
  left: number;
  resolve(result: GenerationResult): void;
  reject(error: Error): void;
}

const NO_TOKENS: readonly TokenLogprobs[] = [];

/**
 * The requests' side of generation, on the server's thread: checks a request against the
 * model's limits at the door, sends it to an instance's engine (generation-engine.ts, in the
 * instance's worker thread beside its session) and hands its text back as the engine's step
 * events arrive. With several instances, a sequence goes to the one with the fewest.
 */
export class Generator {
  /** By sequence id: an answer's id is its request's first plus its choice. */
  readonly #pending = new Map<number, { readonly pending: Pending; readonly choice: number }>();
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
    const choices = request.choices ?? 1;
    const id = this.#nextId;
    this.#nextId += choices;
    return new Promise<GenerationResult>((resolve, reject) => {
      const { signal } = request;
      const cancel = (): void => {
        for (let choice = 0; choice < choices; choice++) channel.cancelGeneration(id + choice);
      };
      signal?.addEventListener('abort', cancel, { once: true });
      let settled = false;
      /** True the first time: a request with several answers settles once. */
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        signal?.removeEventListener('abort', cancel);
        for (let choice = 0; choice < choices; choice++) this.#pending.delete(id + choice);
        return true;
      };
      const pending: Pending = {
        request,
        channel,
        startedAt: performance.now(),
        lastTokenAt: undefined,
        ended: new Array<ChoiceResult | undefined>(choices).fill(undefined),
        unsent: Array.from({ length: choices }, () => []),
        drawn: Array.from({ length: choices }, () => []),
        left: choices,
        resolve: (result) => {
          if (settle()) resolve(result);
        },
        reject: (error) => {
          if (settle()) reject(error);
        },
      };
      for (let choice = 0; choice < choices; choice++) this.#pending.set(id + choice, { pending, choice });
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
          ...(request.presencePenalty ? { presencePenalty: request.presencePenalty } : {}),
          ...(request.frequencyPenalty ? { frequencyPenalty: request.frequencyPenalty } : {}),
          ...(request.logitBias?.length ? { logitBias: request.logitBias } : {}),
          ...(request.logprobs !== undefined ? { logprobs: request.logprobs } : {}),
          ...(request.responseFormat ? { responseFormat: request.responseFormat } : {}),
          ...(choices > 1 ? { choices } : {}),
        });
      } catch (error) {
        settle();
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
    for (const { pending } of [...this.#pending.values()]) pending.reject(error);
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
      for (const { pending } of this.#pending.values()) if (pending.channel === channel) load++;
      if (load < fewest) {
        fewest = load;
        best = channel;
      }
    }
    return best;
  }

  #heard(channel: GenerationChannel, events: GenerationEvents): void {
    const now = performance.now();
    const eos = this.options.eos_token_ids;
    for (const [id, text, logprob] of events.tokens) {
      const found = this.#pending.get(id);
      if (!found) continue;
      const { pending, choice } = found;
      // Timed by the first answer: the others step with it.
      if (choice === 0) {
        if (pending.lastTokenAt === undefined) {
          this.observer?.firstToken((now - pending.startedAt) / 1000);
          if (pending.request.trace) pending.request.trace.firstTokenAt = traceNow();
        } else this.observer?.nextToken((now - pending.lastTokenAt) / 1000);
        pending.lastTokenAt = now;
      }
      const unsent = pending.unsent[choice] as TokenLogprobs[];
      if (logprob && !eos.includes(logprob.token)) {
        const token = { token: logprob.token, logprob: logprob.logprob, top: logprob.top };
        unsent.push(token);
        pending.drawn[choice]?.push(token);
      }
      if (text !== '' && pending.request.onText) {
        pending.request.onText(text, choice, unsent.length > 0 ? unsent.splice(0) : NO_TOKENS);
      }
    }
    for (const end of events.ended) {
      const found = this.#pending.get(end.id);
      if (!found) continue;
      const { pending, choice } = found;
      this.#pending.delete(end.id);
      if ('error' in end) {
        // One answer failing fails the request: the others are not waited for.
        for (const [other, each] of this.#pending)
          if (each.pending === pending) pending.channel.cancelGeneration(other);
        pending.reject(fromWireError(end.error));
        continue;
      }
      const unsent = pending.unsent[choice] as TokenLogprobs[];
      // Tokens that added no text of their own (the end token's, a stop string's) go with the last piece.
      if (unsent.length > 0) pending.request.onText?.('', choice, unsent.splice(0));
      pending.ended[choice] = {
        text: end.text,
        finishReason: end.finishReason,
        completionTokens: end.completionTokens,
        tokens: pending.request.logprobs !== undefined ? pending.drawn[choice] : undefined,
      };
      if (--pending.left > 0) continue;
      const choices = pending.ended as ChoiceResult[];
      const first = choices[0] as ChoiceResult;
      pending.resolve({
        text: first.text,
        finishReason: first.finishReason,
        promptTokens: end.promptTokens,
        completionTokens: choices.reduce((sum, each) => sum + each.completionTokens, 0),
        choices,
      });
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
    for (const { pending } of [...this.#pending.values()]) if (pending.channel === channel) pending.reject(failure);
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
