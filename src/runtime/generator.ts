import type ort from 'onnxruntime-node';
import type { GenerationOptions } from '../config/model-config.js';
import {
  BatchserveError,
  InferenceFailedError,
  InferenceInputError,
  ModelNotReadyError,
  QueueFullError,
  RequestCancelledError,
} from '../core/errors.js';
import { mulberry32 } from '../core/random.js';
import type { ChatTemplate } from '../handlers/chat-template.js';
import type { TextTokenizer } from '../handlers/text-tokens.js';
import { EMPTY_CACHE, runDecoderStep, type DecoderLayout, type SequenceCache } from './decoder-step.js';
import { pickToken } from './sampling.js';
import type { StepPacer } from './step-pacer.js';

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
}

export type FinishReason = 'stop' | 'length';

export interface GenerationResult {
  readonly text: string;
  readonly finishReason: FinishReason;
  readonly promptTokens: number;
  readonly completionTokens: number;
}

/** What the metrics hear: seconds to a sequence's first token and between its tokens, the active count. */
export interface GenerationObserver {
  firstToken(seconds: number): void;
  nextToken(seconds: number): void;
  activeChanged(active: number): void;
}

interface Sequence {
  readonly request: GenerationRequest;
  readonly random: () => number;
  /** Its prompt plus max_tokens: what it may come to hold in the cache. */
  readonly reserved: number;
  /** The length of its longest stop string: how much new text is held back until it can't start one. */
  readonly longestStop: number;
  readonly startedAt: number;
  readonly ids: number[];
  cache: SequenceCache;
  text: string;
  emitted: number;
  /** Incremental detokenizing: the ids from prefixOffset decode to text's tail, up to readOffset. */
  prefixOffset: number;
  readOffset: number;
  lastTokenAt: number | undefined;
  resolve(result: GenerationResult): void;
  reject(error: unknown): void;
}

/**
 * Iteration-level ("continuous") batching of one decoder: every step runs the next token of
 * every active sequence as one batch, sequences that finish leave at once and waiting ones
 * join between steps (their prompts run in that step, or in one of their own when they are
 * much longer than one token; within max_tokens_per_step),
 * each keeping its own key/value cache, re-batched at every step. A client that goes away
 * frees its place at the next step. With scheduling `request`, sequences join only a batch
 * that has not started decoding: whole-request batching, kept to measure against.
 */
export class Generator {
  readonly #waiting: Sequence[] = [];
  readonly #active: Sequence[] = [];
  readonly #eos: ReadonlySet<number>;
  #reserved = 0;
  #running = false;
  /** Request scheduling: the batch still takes sequences until its first decoding step. */
  #forming = true;
  #closed = false;

  constructor(
    private readonly session: ort.InferenceSession,
    readonly layout: DecoderLayout,
    readonly tokenizer: TextTokenizer,
    /** How the chat route turns messages into a prompt. */
    readonly chat: ChatTemplate,
    readonly options: GenerationOptions,
    private readonly observer?: GenerationObserver,
    /** On the simulated device: holds each step to its cost. */
    private readonly pace?: StepPacer,
  ) {
    this.#eos = new Set(options.eos_token_ids);
  }

  /** Runs one token through the model, so a decoder that cannot run fails its load. */
  async warmUp(): Promise<void> {
    await runDecoderStep(this.session, this.layout, [{ ids: [0], cache: EMPTY_CACHE(this.layout.layers.length) }]);
  }

  get activeSequences(): number {
    return this.#active.length;
  }

  /** Queues a sequence; refused at once when it could never run, or when too many wait. */
  generate(request: GenerationRequest): Promise<GenerationResult> {
    const { options } = this;
    if (this.#closed) return Promise.reject(new ModelNotReadyError('the model is unloading'));
    if (request.promptIds.length === 0) return Promise.reject(new InferenceInputError('the prompt has no tokens'));
    const reserved = request.promptIds.length + request.maxTokens;
    if (reserved > options.max_context) {
      return Promise.reject(
        new InferenceInputError(
          `the prompt's ${request.promptIds.length} tokens and max_tokens ${request.maxTokens} come to ${reserved}, over this model's max_context of ${options.max_context}`,
        ),
      );
    }
    if (reserved > options.max_total_tokens) {
      return Promise.reject(
        new InferenceInputError(
          `the prompt and max_tokens come to ${reserved} tokens, over max_total_tokens ${options.max_total_tokens}`,
        ),
      );
    }
    if (this.#waiting.length >= options.max_waiting) {
      return Promise.reject(new QueueFullError(`${this.#waiting.length} requests already wait to be generated`));
    }
    if (request.signal?.aborted) return Promise.reject(new RequestCancelledError('the client went away'));
    return new Promise<GenerationResult>((resolve, reject) => {
      this.#waiting.push({
        request,
        random: mulberry32(request.seed ?? Math.floor(Math.random() * 2 ** 32)),
        reserved,
        longestStop: request.stop.reduce((most, stop) => Math.max(most, stop.length), 0),
        startedAt: performance.now(),
        ids: [],
        cache: EMPTY_CACHE(this.layout.layers.length),
        text: '',
        emitted: 0,
        prefixOffset: 0,
        readOffset: 0,
        lastTokenAt: undefined,
        resolve,
        reject,
      });
      if (!this.#running) void this.#run().catch((error: unknown) => this.#failAll(error));
    });
  }

  /** Refuses what waits and ends what runs: the model is going away. */
  close(): void {
    this.#closed = true;
    this.#failAll(new ModelNotReadyError('the model was unloaded while generating'));
  }

  /** Ends every sequence with `error`: on close, or if the loop itself broke (never the process). */
  #failAll(error: unknown): void {
    const reason =
      error instanceof BatchserveError ? error : new InferenceFailedError(`generation failed: ${String(error)}`);
    for (const sequence of [...this.#waiting, ...this.#active]) sequence.reject(reason);
    this.#waiting.length = 0;
    this.#active.length = 0;
    this.#reserved = 0;
  }

  async #run(): Promise<void> {
    this.#running = true;
    try {
      while (!this.#closed && (this.#waiting.length > 0 || this.#active.length > 0)) {
        this.#dropCancelled();
        const joining = this.#admit();
        const decoding = joining.length === 0 || sharesStep(this.#active.length, joining) ? this.#active : [];
        // A copy: sequences that finish leave #active while the step's results are handed out.
        const rows = [...decoding, ...joining];
        if (rows.length === 0) break;
        if (decoding.length > 0) this.#forming = false;
        let step;
        try {
          const startedAt = performance.now();
          const fed = rows.map((sequence) => ({
            ids: sequence.cache.length === 0 ? sequence.request.promptIds : [sequence.ids.at(-1) as number],
            cache: sequence.cache,
          }));
          step = await runDecoderStep(this.session, this.layout, fed);
          await this.pace?.(
            fed.reduce((sum, row) => sum + row.ids.length, 0),
            startedAt,
          );
        } catch (error) {
          const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
          for (const sequence of rows)
            this.#end(sequence, undefined, new InferenceFailedError(`generation failed: ${message}`));
          continue;
        }
        if (this.#closed) break;
        this.#active.push(...joining);
        this.observer?.activeChanged(this.#active.length);
        rows.forEach((sequence, index) => {
          sequence.cache = step.caches[index] as SequenceCache;
          try {
            this.#advance(sequence, step.logits[index] as Float32Array);
          } catch (error) {
            // A tokenizer that cannot decode what the model chose fails that sequence, not the loop.
            const message = error instanceof Error ? error.message : String(error);
            this.#end(sequence, undefined, new InferenceFailedError(`generation failed: ${message}`));
          }
        });
      }
    } finally {
      this.#running = false;
      this.observer?.activeChanged(this.#active.length);
    }
  }

  /** Who joins before the next step: in order, while there is room for them. */
  #admit(): Sequence[] {
    const { options } = this;
    if (this.#active.length === 0) this.#forming = true;
    if (options.scheduling === 'request' && !this.#forming) return [];
    const joining: Sequence[] = [];
    let budget = options.max_tokens_per_step;
    for (;;) {
      const next = this.#waiting[0];
      if (next === undefined) break;
      if (this.#active.length + joining.length >= options.max_active_sequences) break;
      if (this.#reserved + next.reserved > options.max_total_tokens) break;
      if (joining.length > 0 && next.request.promptIds.length > budget) break;
      budget -= next.request.promptIds.length;
      this.#waiting.shift();
      this.#reserved += next.reserved;
      joining.push(next);
    }
    return joining;
  }

  #dropCancelled(): void {
    for (const list of [this.#waiting, this.#active]) {
      for (let index = list.length - 1; index >= 0; index--) {
        const sequence = list[index] as Sequence;
        if (!sequence.request.signal?.aborted) continue;
        list.splice(index, 1);
        if (list === this.#active) this.#reserved -= sequence.reserved;
        sequence.reject(new RequestCancelledError('the client went away'));
      }
    }
  }

  /** The sequence's next token: drawn, timed, added to its text; the sequence ends when it should. */
  #advance(sequence: Sequence, logits: Float32Array): void {
    const now = performance.now();
    if (sequence.lastTokenAt === undefined) this.observer?.firstToken((now - sequence.startedAt) / 1000);
    else this.observer?.nextToken((now - sequence.lastTokenAt) / 1000);
    sequence.lastTokenAt = now;
    const { request } = sequence;
    const token = pickToken(logits, request, sequence.random);
    sequence.ids.push(token);
    if (this.#eos.has(token)) {
      this.#end(sequence, 'stop');
      return;
    }
    this.#detokenize(sequence);
    const stopAt = firstStop(sequence.text, request.stop, sequence.emitted);
    if (stopAt !== undefined) {
      sequence.text = sequence.text.slice(0, stopAt);
      this.#end(sequence, 'stop');
      return;
    }
    const context = request.promptIds.length + sequence.ids.length;
    if (sequence.ids.length >= request.maxTokens || context >= this.options.max_context) {
      this.#end(sequence, 'length');
      return;
    }
    this.#emit(sequence, false);
  }

  /**
   * Adds the new token's text without decoding the whole answer again (vLLM's incremental
   * detokenizer): the ids since the last read are decoded with the token before them, which
   * brings the space or the word piece joining them, and what grew is appended; a token that
   * adds nothing yet (a special one, half a character) waits for the next.
   */
  #detokenize(sequence: Sequence): void {
    const decode = (from: number, to = sequence.ids.length): string =>
      to > from ? this.tokenizer.decode(sequence.ids.slice(from, to), { skip_special_tokens: true }) : '';
    const before = decode(sequence.prefixOffset, sequence.readOffset);
    const after = decode(sequence.prefixOffset);
    if (after.length > before.length && !after.endsWith('\ufffd')) {
      sequence.text += after.slice(before.length);
      sequence.prefixOffset = sequence.readOffset;
      sequence.readOffset = sequence.ids.length;
    }
  }

  /** Sends what no stop string can still claim (and no half a character), or everything at the end. */
  #emit(sequence: Sequence, final: boolean): void {
    const { text } = sequence;
    let end = final ? text.length : Math.max(text.length - Math.max(sequence.longestStop - 1, 0), 0);
    if (!final && text.charCodeAt(end - 1) === 0xfffd) end -= 1;
    if (end > sequence.emitted) {
      sequence.request.onText?.(text.slice(sequence.emitted, end));
      sequence.emitted = end;
    }
  }

  #end(sequence: Sequence, reason: FinishReason | undefined, error?: unknown): void {
    const index = this.#active.indexOf(sequence);
    if (index >= 0) this.#active.splice(index, 1);
    // Held since it joined, whether its first step ran or failed.
    this.#reserved -= sequence.reserved;
    if (reason === undefined) {
      sequence.reject(error);
      return;
    }
    this.#emit(sequence, true);
    sequence.resolve({
      text: sequence.text,
      finishReason: reason,
      promptTokens: sequence.request.promptIds.length,
      completionTokens: sequence.ids.length,
    });
  }
}

/** Where the first stop string begins, looking only where a new one could (from `from` back by the longest). */
function firstStop(text: string, stops: readonly string[], from: number): number | undefined {
  let first: number | undefined;
  for (const stop of stops) {
    const at = text.indexOf(stop, Math.max(from - stop.length, 0));
    if (at >= 0 && (first === undefined || at < first)) first = at;
  }
  return first;
}

/**
 * Whether joining prompts run in the active sequences' decoding step rather than a step of
 * their own, which would hold every active sequence back a step: yes when padding every row to
 * the longest prompt at most doubles the tokens the step feeds.
 */
function sharesStep(active: number, joining: readonly Sequence[]): boolean {
  const prompts = joining.map((sequence) => sequence.request.promptIds.length);
  const longest = Math.max(...prompts);
  const fed = active + prompts.reduce((sum, length) => sum + length, 0);
  return (active + joining.length) * longest <= 2 * fed;
}
