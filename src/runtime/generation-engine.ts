import type ort from 'onnxruntime-node';
import {
  InferenceFailedError,
  InferenceInputError,
  ModelNotReadyError,
  QueueFullError,
  RequestCancelledError,
} from '../core/errors.js';
import { mulberry32 } from '../core/random.js';
import type { TextTokenizer } from '../handlers/text-tokens.js';
import { BatchCache, type StepTokens } from './batch-cache.js';
import { cacheBytesPerToken, type DecoderLayout } from './decoder-layout.js';
import { IncrementalDetokenizer } from './detokenizer.js';
import { sequenceRefusal, type ServedGenerationOptions } from './generation-options.js';
import type { DecoderBatching } from './padding-probe.js';
import { adjustLogits, logprobOf, pickToken, type TokenLogprob } from './sampling.js';
import type { GrammarState, Grammars, ResponseFormat } from './grammar.js';
import { PrefixCache, type PrefixHit } from './prefix-cache.js';
import type { StepPacer } from './step-pacer.js';
import { promptChunk } from './prompt-chunk.js';
import { StepCostModel } from './step-cost.js';
import { toWireError, type WireError } from './worker-protocol.js';

/** One sequence to generate, as it crosses to the thread that holds the session. */
export interface GenerationSubmission {
  readonly id: number;
  readonly promptIds: readonly number[];
  readonly maxTokens: number;
  readonly temperature: number;
  readonly topP: number;
  readonly stop: readonly string[];
  readonly seed: number;
  readonly presencePenalty?: number;
  readonly frequencyPenalty?: number;
  /** Token id → added to its logit. */
  readonly logitBias?: readonly (readonly [number, number])[];
  /** Set to report each token's log probability and this many alternatives' (0: the token's alone). */
  readonly logprobs?: number;
  /** Set for an answer that must parse as JSON, and match a schema when it names one. */
  readonly responseFormat?: ResponseFormat;
  /**
   * Answers to the same prompt (OpenAI's n), ids `id` to `id + choices − 1`, each with its own
   * draw (seed + its index): the prompt is read once, and its cache copied to the others.
   */
  readonly choices?: number;
}

export type FinishReason = 'stop' | 'length';

export type SequenceToken = readonly [id: number, text: string, logprob?: TokenLogprob & { readonly token: number }];

export type SequenceEnd =
  | {
      readonly id: number;
      readonly text: string;
      readonly finishReason: FinishReason;
      readonly promptTokens: number;
      readonly completionTokens: number;
    }
  | { readonly id: number; readonly error: WireError };

/** What one step did, sent to the requests' side once a step (or at once for a refusal). */
export interface GenerationEvents {
  /**
   * Each sequence that took a token: its id, the text that became final (often ''), and when
   * asked, the token and its log probabilities.
   */
  readonly tokens: readonly SequenceToken[];
  readonly ended: readonly SequenceEnd[];
  readonly active: number;
  /** Bytes the running batches' caches hold now, padding included. */
  readonly usedBytes: number;
  /** Bytes they may come to hold before their sequences end: what admission counts. */
  readonly reservedBytes: number;
  /** Sequences that started from a cached prefix since the last events, and the prompt tokens they did not read. */
  readonly prefixHits: number;
  readonly prefixTokens: number;
  /** Bytes the prefix cache holds. */
  readonly prefixBytes: number;
}

interface Sequence {
  /** The submission's id, plus its choice for the second answer on. */
  readonly id: number;
  readonly submission: GenerationSubmission;
  readonly random: () => number;
  /** The length of its longest stop string: how much new text is held back until it can't start one. */
  readonly longestStop: number;
  readonly detokenizer: IncrementalDetokenizer;
  /** Prompt tokens in the cache: a prompt longer than max_tokens_per_step is read over several steps. */
  read: number;
  /** The token it took last: what its next step feeds once its prompt is read. */
  last: number;
  /** The cached prefix it starts from, found when it was first weighed for admission. */
  prefix: PrefixHit | undefined;
  /** How often each token stands in its answer, for the presence and frequency penalties (none asked: undefined). */
  readonly counts: Map<number, number> | undefined;
  /** The last token's log probabilities, when asked, until its text goes out. */
  logprob: SequenceToken[2];
  /** Its response_format's grammar state: masks every token the answer may not take next. */
  grammar: GrammarState | undefined;
  /** The other answers to its prompt, held until it has read it (then they take copies of its row). */
  siblings: Sequence[];
  generated: number;
  text: string;
  emitted: number;
  /** Its end was sent; its row leaves at the next repack. */
  ended: boolean;
  cancelled: boolean;
}

interface RunningBatch {
  sequences: Sequence[];
  cache: BatchCache;
  /** A step of it decoded (not only read prompts): request scheduling then takes no one. */
  decoding: boolean;
}

/**
 * Iteration-level ("continuous") batching of one decoder, in the thread that holds its
 * session: every step runs the next token of every row of a running batch as one pass;
 * sequences that end leave and waiting ones join between steps. The batch's key/value cache
 * stays where the pass left it (batch-cache.ts): rows are copied only when some join or leave.
 *
 * `padded` decoders keep one running batch: joining prompts share the decoding step when
 * padding costs at most double, else they run a step of their own and merge after it.
 * `equal-length` decoders run a batch per prompt length that started together, in turn.
 * Admission counts rows (max_active_sequences), tokens (max_total_tokens) and the bytes the
 * caches may come to hold, padding included (kv_cache_bytes); who cannot join waits, in order.
 */
export class GenerationEngine {
  readonly #waiting: Sequence[] = [];
  readonly #byId = new Map<number, Sequence>();
  #batches: RunningBatch[] = [];
  #turn = 0;
  readonly #cost = new StepCostModel();
  /** Padded batching only: an equal-length batch's rows cannot start from prefixes of other lengths. */
  readonly #prefixes: PrefixCache | undefined;
  #prefixHits = 0;
  #prefixTokens = 0;
  /** The step loop while it runs: resolved once it has nothing to do. */
  #loop: Promise<void> | undefined;
  #closed = false;
  readonly #bytesPerToken: number;
  #tokens: SequenceToken[] = [];
  #ended: SequenceEnd[] = [];
  #emit: (events: GenerationEvents) => void = () => undefined;

  constructor(
    private readonly session: ort.InferenceSession,
    readonly layout: DecoderLayout,
    private readonly tokenizer: TextTokenizer,
    readonly options: ServedGenerationOptions,
    readonly batching: DecoderBatching,
    /** On the simulated device: holds each step to its cost. */
    private readonly pace?: StepPacer,
    /** The tokenizer's grammars, for answers bound to a response_format (none: such requests are refused). */
    readonly grammars?: Grammars,
  ) {
    this.#bytesPerToken = cacheBytesPerToken(layout);
    this.#prefixes =
      batching === 'padded' && options.prefix_cache_bytes > 0
        ? new PrefixCache(options.prefix_cache_bytes, {
            heads: layout.heads,
            headDim: layout.headDim,
            tensors: layout.layers.length * 2,
          })
        : undefined;
  }

  /** Where the events of every step go (one listener: the thread's link to the requests' side). */
  listen(emit: (events: GenerationEvents) => void): void {
    this.#emit = emit;
  }

  /** Queues a sequence; its tokens and its end come back through the listener. */
  submit(submission: GenerationSubmission): void {
    const refusal = this.#refusal(submission);
    const choices = submission.choices ?? 1;
    if (refusal) {
      for (let choice = 0; choice < choices; choice++) {
        this.#ended.push({ id: submission.id + choice, error: toWireError(refusal) });
      }
      this.#send();
      return;
    }
    const all = Array.from({ length: choices }, (_, choice) => this.#sequence(submission, choice));
    const [reader, ...siblings] = all as [Sequence, ...Sequence[]];
    reader.siblings = siblings;
    for (const sequence of all) this.#byId.set(sequence.id, sequence);
    if (!submission.responseFormat) {
      this.#queue(reader);
      return;
    }
    // Compiling a schema takes a while the first time: the sequences wait for it, not the steps.
    const { grammars } = this;
    if (!grammars) {
      for (const sequence of all)
        this.#end(sequence, new InferenceInputError('"response_format" is not served by this model'));
      this.#send();
      return;
    }
    const format = submission.responseFormat;
    Promise.all(all.map(() => grammars.state(format))).then(
      (states) => {
        all.forEach((sequence, index) => (sequence.grammar = states[index]));
        if (reader.ended) for (const sequence of all) sequence.grammar?.dispose();
        else if (reader.cancelled) {
          for (const sequence of all) this.#end(sequence, new RequestCancelledError('the client went away'));
          this.#send();
        } else this.#queue(reader);
      },
      (error: unknown) => {
        for (const sequence of all) {
          if (!sequence.ended)
            this.#end(sequence, error instanceof Error ? error : new InferenceFailedError(String(error)));
        }
        this.#send();
      },
    );
  }

  /** One answer of a submission: `choice` draws from its own stream. */
  #sequence(submission: GenerationSubmission, choice: number): Sequence {
    return {
      id: submission.id + choice,
      submission,
      random: mulberry32(submission.seed + choice),
      longestStop: submission.stop.reduce((most, stop) => Math.max(most, stop.length), 0),
      detokenizer: new IncrementalDetokenizer(this.tokenizer, submission.promptIds),
      read: 0,
      last: 0,
      prefix: undefined,
      counts: submission.presencePenalty || submission.frequencyPenalty ? new Map() : undefined,
      logprob: undefined,
      grammar: undefined,
      siblings: [],
      generated: 0,
      text: '',
      emitted: 0,
      ended: false,
      cancelled: false,
    };
  }

  #queue(sequence: Sequence): void {
    this.#waiting.push(sequence);
    this.#wake();
  }

  /** The client went away: a waiting sequence ends now, a running one at the next step. */
  cancel(id: number): void {
    const sequence = this.#byId.get(id);
    if (!sequence || sequence.ended) return;
    sequence.cancelled = true;
    const index = this.#waiting.indexOf(sequence);
    // Running: it ends at the next step; compiling its grammar: once that is done.
    if (index < 0) return;
    this.#waiting.splice(index, 1);
    this.#end(sequence, new RequestCancelledError('the client went away'));
    this.#send();
  }

  /** Ends every sequence, and resolves once no step runs: the session may then be released. */
  close(): Promise<void> {
    this.#closed = true;
    const error = new ModelNotReadyError('the model was unloaded while generating');
    for (const sequence of [...this.#byId.values()]) if (!sequence.ended) this.#end(sequence, error);
    this.#waiting.length = 0;
    this.#batches = [];
    this.#send();
    return this.#loop ?? Promise.resolve();
  }

  #refusal(submission: GenerationSubmission): Error | undefined {
    if (this.#closed) return new ModelNotReadyError('the model is unloading');
    const never = sequenceRefusal(this.options, this.#bytesPerToken, submission.promptIds.length, submission.maxTokens);
    if (never) return never;
    if ((submission.choices ?? 1) > this.#rowLimit) {
      return new InferenceInputError(
        `"n" ${submission.choices} is over the ${this.#rowLimit} sequences this model decodes together`,
      );
    }
    // Those that will join at the next step are not waiting: only the rest count.
    const rows = this.#batches.reduce((sum, batch) => sum + live(batch).length, 0);
    const places = Math.max(this.#rowLimit - rows, 0);
    if (this.#waiting.length - places >= this.options.max_waiting) {
      return new QueueFullError(`${this.#waiting.length - places} requests already wait to be generated`);
    }
    return undefined;
  }

  /**
   * Starts the step loop unless it runs; its first plan waits for the turn to end, so
   * sequences that arrive together (a burst's messages, queued in one turn) start together.
   */
  #wake(): void {
    this.#loop ??= new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.#run())
      .finally(() => {
        this.#loop = undefined;
        // Sequences that arrived while the loop was ending.
        if (this.#waiting.length > 0 && !this.#closed) this.#wake();
      });
  }

  async #run(): Promise<void> {
    try {
      for (;;) {
        const batch = this.#plan();
        if (!batch || this.#closed) {
          // A plan that ended sequences and runs none (the last running one was cancelled)
          // still tells them, or their clients' calls would never settle.
          this.#send();
          break;
        }
        await this.#step(batch);
        // A batch whose every sequence ended holds its cache no longer.
        this.#batches = this.#batches.filter((running) => live(running).length > 0);
        this.#merge();
        this.#send();
        // onnxruntime-node runs the pass inside a setImmediate callback and resolves within it,
        // so without a turn here the next step would be planned before the messages that came
        // during this one (new sequences, cancellations) are read: each would wait a step more.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    } catch (error) {
      // The loop's own bookkeeping broke: every sequence hears it, the thread goes on.
      const failure = new InferenceFailedError(`generation failed: ${String(error)}`);
      for (const sequence of this.#byId.values()) if (!sequence.ended) this.#end(sequence, failure);
      this.#waiting.length = 0;
      this.#batches = [];
      this.#send();
    }
  }

  /** Who joins, which batch runs next, and the one repack that either needs. */
  #plan(): RunningBatch | undefined {
    for (const batch of this.#batches) {
      for (const sequence of batch.sequences) {
        if (sequence.cancelled && !sequence.ended)
          this.#end(sequence, new RequestCancelledError('the client went away'));
      }
    }
    const joining = this.#admit();
    let next: RunningBatch | undefined;
    if (joining.length > 0) {
      const host = this.#hostFor(joining);
      if (host) {
        host.cache = BatchCache.pack(this.layout, [
          { cache: host.cache, rows: liveRows(host) },
          { cache: this.#startingCache(joining), rows: joining.map((_, row) => row) },
        ]);
        host.sequences = [...live(host), ...joining];
        next = host;
      } else {
        next = { sequences: joining, cache: this.#startingCache(joining), decoding: false };
        this.#batches.push(next);
      }
    }
    this.#batches = this.#batches.filter((batch) => live(batch).length > 0);
    if (!next && this.#batches.length > 0) {
      // A batch that never ran first (its first token is what a client waits for), then in
      // turn: a long prompt read in chunks alternates with the running sequences' steps.
      this.#turn = (this.#turn + 1) % this.#batches.length;
      next = this.#batches.find((batch) => batch.cache.width === 0) ?? this.#batches[this.#turn];
    }
    if (!next) return undefined;
    if (live(next).length < next.sequences.length) {
      next.cache = BatchCache.pack(this.layout, [{ cache: next.cache, rows: liveRows(next) }]);
      next.sequences = live(next);
    }
    return next;
  }

  /**
   * The running batch joining prompts share a step with, or none (they run a step of their
   * own): padded, a batch whose rows all decode, where the step's padding and the cache's after
   * it pay (#stepPaddingPays, #cachePaddingPays); of those, the one padded least.
   */
  #hostFor(joining: readonly Sequence[]): RunningBatch | undefined {
    if (this.batching !== 'padded') return undefined;
    const prompts = joining.map(unread);
    const read = shapeOf(prompts);
    if (read.widest > this.options.max_tokens_per_step) return undefined;
    let host: RunningBatch | undefined;
    let leastPadding = Infinity;
    for (const batch of this.#batches) {
      const rows = live(batch).length;
      // The step: each running row feeds one token, padded to the longest prompt.
      if (!decodesOnly(batch) || !this.#stepPaddingPays(rows + read.rows, read.widest, rows + read.real)) continue;
      // After it: every running row one token longer, every joiner its whole prompt long.
      const running = liveRows(batch).map((row) => (batch.cache.lengths[row] as number) + 1);
      const joined = joining.map((sequence) => sequence.submission.promptIds.length);
      const shape = shapeOf([...running, ...joined]);
      if (!this.#cachePaddingPays(shape, [shapeOf(running), shapeOf(joined)])) continue;
      const padding = shape.rows * shape.widest - shape.real;
      if (padding < leastPadding) {
        host = batch;
        leastPadding = padding;
      }
    }
    return host;
  }

  /** Looks a waiting sequence's prompt up in the prefix cache, once: it then reads only what follows. */
  #findPrefix(sequence: Sequence): void {
    if (!this.#prefixes || sequence.prefix || sequence.read > 0) return;
    const hit = this.#prefixes.lookup(sequence.submission.promptIds);
    if (hit.tokens === 0) return;
    sequence.prefix = hit;
    sequence.read = hit.tokens;
  }

  /** The cache joining sequences start from: their cached prefixes, or nothing. */
  #startingCache(joining: readonly Sequence[]): BatchCache {
    const prefixes = this.#prefixes;
    if (!prefixes || joining.every((sequence) => !sequence.prefix))
      return BatchCache.empty(this.layout, joining.length);
    return BatchCache.fromRows(
      this.layout,
      joining.map((sequence) => {
        if (!sequence.prefix) return { length: 0, tensors: [] };
        this.#prefixHits++;
        this.#prefixTokens += sequence.prefix.tokens;
        return prefixes.row(sequence.prefix);
      }),
    );
  }

  /** Rows a step may hold. */
  get #rowLimit(): number {
    return this.layout.singleRow ? 1 : this.options.max_active_sequences;
  }

  /** Who joins before the next step: in order, while every limit holds (equal-length: the first one's length only). */
  #admit(): Sequence[] {
    const { options } = this;
    if (this.#waiting.length === 0) return [];
    if (options.scheduling === 'request' && this.#batches.some((batch) => batch.decoding)) return [];
    const rowLimit = this.#rowLimit;
    let rows = 0;
    let tokens = 0;
    for (const batch of this.#batches) {
      rows += live(batch).length;
      for (const sequence of live(batch)) tokens += reservedTokens(sequence);
    }
    const length = (this.#waiting[0] as Sequence).submission.promptIds.length;
    const joining: Sequence[] = [];
    let promptBudget = options.max_tokens_per_step;
    for (const next of this.#waiting) {
      this.#findPrefix(next);
      const prompt = next.submission.promptIds.length;
      if (this.batching === 'equal-length' && prompt !== length) continue;
      if (rows + rowsOf(joining) + rowsOf([next]) > rowLimit) break;
      if (tokens + reservedTokens(next) > options.max_total_tokens) break;
      if (joining.length > 0 && prompt > promptBudget) break;
      // Prompts read in one step are padded to the longest: one much longer waits for the next.
      const read = shapeOf([...joining, next].map(unread));
      if (!this.#stepPaddingPays(read.rows, read.widest, read.real)) break;
      if (this.#reservedBytesWith([...joining, next]) > options.kv_cache_bytes) break;
      promptBudget -= prompt;
      tokens += reservedTokens(next);
      joining.push(next);
    }
    if (joining.length > 0) {
      const joined = new Set(joining);
      const left = this.#waiting.filter((sequence) => !joined.has(sequence));
      this.#waiting.length = 0;
      this.#waiting.push(...left);
    }
    return joining;
  }

  /**
   * The bytes every batch may come to hold if `joining` joined: a batch's rows times the width
   * its longest-lived row can reach. Padded, the joiners share the one batch's width.
   */
  #reservedBytesWith(joining: readonly Sequence[]): number {
    const batches = this.#batches.map((batch) => live(batch));
    if (joining.length > 0) {
      const host = this.#hostFor(joining);
      if (host) batches[this.#batches.indexOf(host)]?.push(...joining);
      else batches.push([...joining]);
    }
    let tokens = 0;
    this.#batches.forEach((batch, index) => {
      tokens += worstWidth(batch.cache.width, batches[index] as Sequence[]) * rowsOf(batches[index] as Sequence[]);
    });
    const fresh = batches[this.#batches.length];
    if (fresh) tokens += worstWidth(0, fresh) * rowsOf(fresh);
    return tokens * this.#bytesPerToken;
  }

  async #step(batch: RunningBatch): Promise<void> {
    const rows = batch.sequences;
    const chunk = this.#chunkTokens(batch);
    const tokens = rows.map((sequence): StepTokens => {
      const { promptIds } = sequence.submission;
      return sequence.read < promptIds.length ? promptIds.slice(sequence.read, sequence.read + chunk) : [sequence.last];
    });
    if (rows.some((sequence) => sequence.generated > 0)) batch.decoding = true;
    const width = batch.cache.width;
    let outputs: ort.InferenceSession.ReturnType;
    try {
      const startedAt = performance.now();
      outputs = await this.session.run(batch.cache.feeds(tokens), batch.cache.fetches());
      batch.cache.advance(outputs, tokens);
      await this.pace?.(
        tokens.reduce((sum, row) => sum + row.length, 0),
        startedAt,
      );
      const fed = batch.cache.width - width;
      this.#cost.record(rows.length * fed, rows.length * batch.cache.width, performance.now() - startedAt);
    } catch (error) {
      const message = error instanceof Error ? error.message.split('\n')[0] : String(error);
      const failure = new InferenceFailedError(`generation failed: ${message}`);
      for (const sequence of rows) if (!sequence.ended) this.#end(sequence, failure);
      this.#batches = this.#batches.filter((other) => other !== batch);
      return;
    }
    if (this.#closed) return;
    // Holes a shared prompt step left go now, while every row is still in the batch.
    if (batch.cache.worthRepacking) {
      batch.cache = BatchCache.pack(this.layout, [{ cache: batch.cache, rows: rows.map((_, row) => row) }]);
    }
    const logits = outputs[this.layout.logits] as ort.Tensor;
    const [, fed = 1, vocab = 0] = logits.dims;
    const data = logits.data as Float32Array;
    const rowLogits = (r: number): Float32Array => data.subarray((r * fed + fed - 1) * vocab, (r * fed + fed) * vocab);
    // Each answer bound to a grammar may take only the tokens it allows next.
    const masks: Promise<void>[] = [];
    rows.forEach((sequence, r) => {
      const done = sequence.read + (tokens[r] as StepTokens).length >= sequence.submission.promptIds.length;
      if (sequence.grammar && done && !sequence.ended) masks.push(sequence.grammar.mask(rowLogits(r)));
    });
    await Promise.all(masks);
    const forks: { row: number; siblings: Sequence[] }[] = [];
    rows.forEach((sequence, r) => {
      const { promptIds } = sequence.submission;
      const { length } = promptIds;
      if (sequence.read < length) {
        sequence.read += (tokens[r] as StepTokens).length;
        if (sequence.read === length) this.#prefixes?.insert(promptIds, (from, to) => batch.cache.slice(r, from, to));
      }
      // A prompt not read to its end takes no token yet.
      if (sequence.ended || sequence.read < length) return;
      const logits = rowLogits(r);
      if (sequence.siblings.length > 0) {
        // The other answers draw their first token from the same logits, before this one's
        // penalties and bias change them, and take copies of its row.
        const siblings = sequence.siblings.filter((sibling) => !this.#cancelledNow(sibling));
        sequence.siblings = [];
        for (const sibling of siblings) {
          sibling.read = length;
          this.#draw(sibling, logits.slice());
        }
        forks.push({ row: r, siblings });
      }
      this.#draw(sequence, logits);
    });
    if (forks.length > 0) {
      batch.cache = BatchCache.pack(this.layout, [
        {
          cache: batch.cache,
          rows: [...rows.keys(), ...forks.flatMap(({ row, siblings }) => siblings.map(() => row))],
        },
      ]);
      batch.sequences = [...rows, ...forks.flatMap(({ siblings }) => siblings)];
    }
  }

  /** A sibling cancelled while it waited for its prompt: ended now, not forked. */
  #cancelledNow(sequence: Sequence): boolean {
    if (sequence.cancelled) this.#end(sequence, new RequestCancelledError('the client went away'));
    return sequence.cancelled;
  }

  #draw(sequence: Sequence, logits: Float32Array): void {
    try {
      this.#advance(sequence, logits);
    } catch (error) {
      // A tokenizer that cannot decode what the model chose fails that sequence, not the loop.
      const message = error instanceof Error ? error.message : String(error);
      this.#end(sequence, new InferenceFailedError(`generation failed: ${message}`));
    }
  }

  /** The sequence's next token: drawn, added to its text; the sequence ends when it should. */
  #advance(sequence: Sequence, logits: Float32Array): void {
    const { submission } = sequence;
    adjustLogits(logits, submission, sequence.counts ?? NO_COUNTS);
    const token = pickToken(logits, submission, sequence.random);
    if (submission.logprobs !== undefined) {
      sequence.logprob = { token, ...logprobOf(logits, token, submission.logprobs) };
    }
    sequence.counts?.set(token, (sequence.counts.get(token) ?? 0) + 1);
    sequence.generated++;
    sequence.last = token;
    const complete = sequence.grammar?.accept(token) ?? false;
    if (this.options.eos_token_ids.includes(token)) {
      this.#finish(sequence, 'stop');
      return;
    }
    sequence.text += sequence.detokenizer.push(token);
    const stopAt = firstStop(sequence.text, submission.stop, sequence.emitted);
    if (stopAt !== undefined) {
      sequence.text = sequence.text.slice(0, stopAt);
      this.#finish(sequence, 'stop');
      return;
    }
    // The grammar's text is complete (a model without an end token ends here; one with ends on it).
    if (complete) {
      sequence.text += sequence.detokenizer.flush();
      this.#finish(sequence, 'stop');
      return;
    }
    const context = submission.promptIds.length + sequence.generated;
    if (sequence.generated >= submission.maxTokens || context >= this.options.max_context) {
      sequence.text += sequence.detokenizer.flush();
      this.#finish(sequence, 'length');
      return;
    }
    this.#tokens.push(this.#tokenEvent(sequence, this.#release(sequence, false)));
  }

  #tokenEvent(sequence: Sequence, text: string): SequenceToken {
    const { logprob } = sequence;
    return logprob ? [sequence.id, text, logprob] : [sequence.id, text];
  }

  /** Text no stop string can still claim (and no half a character), or everything at the end. */
  #release(sequence: Sequence, final: boolean): string {
    const { text } = sequence;
    let end = final ? text.length : Math.max(text.length - Math.max(sequence.longestStop - 1, 0), 0);
    if (!final && text.charCodeAt(end - 1) === 0xfffd) end -= 1;
    if (end <= sequence.emitted) return '';
    const piece = text.slice(sequence.emitted, end);
    sequence.emitted = end;
    return piece;
  }

  #finish(sequence: Sequence, reason: FinishReason): void {
    sequence.grammar?.dispose();
    this.#tokens.push(this.#tokenEvent(sequence, this.#release(sequence, true)));
    sequence.ended = true;
    this.#byId.delete(sequence.id);
    this.#ended.push({
      id: sequence.id,
      text: sequence.text,
      finishReason: reason,
      promptTokens: sequence.submission.promptIds.length,
      completionTokens: sequence.generated,
    });
  }

  #end(sequence: Sequence, error: Error): void {
    sequence.grammar?.dispose();
    // Answers still waiting for this one to read their prompt share its fate.
    for (const sibling of sequence.siblings) if (!sibling.ended) this.#end(sibling, error);
    sequence.siblings = [];
    sequence.ended = true;
    this.#byId.delete(sequence.id);
    this.#ended.push({ id: sequence.id, error: toWireError(error) });
  }

  /** Batches that can share a step become one: padded, all of them; equal-length, those of one length. */
  #merge(): void {
    const ready = this.#batches.filter((batch) => live(batch).length > 0 && decodesOnly(batch));
    if (ready.length < 2) return;
    for (const group of this.#mergeable(ready)) {
      if (group.length < 2) continue;
      const merged: RunningBatch = {
        sequences: group.flatMap(live),
        cache: BatchCache.pack(
          this.layout,
          group.map((batch) => ({ cache: batch.cache, rows: liveRows(batch) })),
        ),
        decoding: group.some((batch) => batch.decoding),
      };
      this.#batches = [merged, ...this.#batches.filter((batch) => !group.includes(batch))];
    }
  }

  /**
   * Batches that become one: equal-length, those of one width with no padding; padded, by
   * width, each with the next while the merged cache's padding stays within double — a long
   * sequence beside short ones would make every short row as wide as it, so it runs apart and
   * the batches take turns.
   */
  #mergeable(ready: readonly RunningBatch[]): RunningBatch[][] {
    const groups: RunningBatch[][] = [];
    if (this.batching === 'equal-length') {
      const byWidth = new Map<number, RunningBatch[]>();
      for (const batch of ready) {
        if (batch.cache.dense) byWidth.set(batch.cache.width, [...(byWidth.get(batch.cache.width) ?? []), batch]);
      }
      return [...byWidth.values()];
    }
    const lengthsOf = (batch: RunningBatch): number[] =>
      liveRows(batch).map((row) => batch.cache.lengths[row] as number);
    const byWidth = [...ready].sort((a, b) => shapeOf(lengthsOf(a)).widest - shapeOf(lengthsOf(b)).widest);
    let group: RunningBatch[] = [];
    let lengths: number[] = [];
    for (const batch of byWidth) {
      const joined = [...lengths, ...lengthsOf(batch)];
      if (group.length > 0 && !this.#cachePaddingPays(shapeOf(joined), [shapeOf(lengths), shapeOf(lengthsOf(batch))])) {
        groups.push(group);
        group = [];
        lengths = [];
      }
      group.push(batch);
      lengths.push(...lengthsOf(batch));
    }
    groups.push(group);
    return groups;
  }

  /** How many prompt tokens a row of `batch` reads this step (promptChunk), max_tokens_per_step before a cost is learnt. */
  #chunkTokens(batch: RunningBatch): number {
    const most = this.options.max_tokens_per_step;
    const fit = this.#cost.fit();
    if (!fit) return most;
    let othersStepMs = 0;
    for (const other of this.#batches) {
      const rows = live(other).length;
      if (other === batch || rows === 0) continue;
      const ms = fit.fixed.value + fit.perToken.value * rows + fit.perPosition.value * rows * other.cache.width;
      othersStepMs = Math.max(othersStepMs, ms);
    }
    return promptChunk(fit, othersStepMs, live(batch).length, most);
  }

  /**
   * Whether rows read in one step, each padded to the widest, beat a step of their own: the
   * padded tokens' cost against the fixed cost of the step saved. Until the step cost is
   * known well enough to say, padding may at most double the tokens read.
   */
  #stepPaddingPays(rows: number, widest: number, fed: number): boolean {
    return this.#pays(rows * widest - fed, 0, 1) ?? rows * widest <= 2 * fed;
  }

  /**
   * Whether `merged` as one batch beats the same rows in `apart`'s batches taking turns: each
   * step of it saves the others' fixed costs and pays for the positions its padding adds.
   * Until the step cost is known well enough to say, padding may at most double the positions held.
   */
  #cachePaddingPays(merged: Shape, apart: readonly Shape[]): boolean {
    const added = apart.reduce((sum, shape) => sum - shape.rows * shape.widest, merged.rows * merged.widest);
    return this.#pays(0, added, apart.length - 1) ?? merged.rows * merged.widest <= 2 * merged.real;
  }

  /**
   * Whether `steps` fixed costs saved outweigh `tokens` padded tokens and `positions` padded
   * positions: yes or no when the learnt step cost's bounds agree, undefined while they do not.
   */
  #pays(tokens: number, positions: number, steps: number): boolean | undefined {
    const fit = this.#cost.fit();
    if (!fit) return undefined;
    const { fixed, perToken, perPosition } = fit;
    const cost = (sign: 1 | -1): number =>
      Math.max(perToken.value + sign * perToken.error, 0) * tokens +
      Math.max(perPosition.value + sign * perPosition.error, 0) * positions;
    if (cost(1) <= (fixed.value - fixed.error) * steps) return true;
    if (cost(-1) > (fixed.value + fixed.error) * steps) return false;
    return undefined;
  }

  #send(): void {
    if (this.#tokens.length === 0 && this.#ended.length === 0 && this.#prefixHits === 0) return;
    let usedBytes = 0;
    let active = 0;
    for (const batch of this.#batches) {
      usedBytes += batch.cache.bytes;
      active += live(batch).length;
    }
    const events: GenerationEvents = {
      tokens: this.#tokens,
      ended: this.#ended,
      active,
      usedBytes,
      reservedBytes: this.#reservedBytesWith([]),
      prefixHits: this.#prefixHits,
      prefixTokens: this.#prefixTokens,
      prefixBytes: this.#prefixes?.bytes ?? 0,
    };
    this.#tokens = [];
    this.#ended = [];
    this.#prefixHits = 0;
    this.#prefixTokens = 0;
    this.#emit(events);
  }
}

function live(batch: RunningBatch): Sequence[] {
  return batch.sequences.filter((sequence) => !sequence.ended);
}

function liveRows(batch: RunningBatch): number[] {
  const rows: number[] = [];
  batch.sequences.forEach((sequence, row) => {
    if (!sequence.ended) rows.push(row);
  });
  return rows;
}

/** Tokens a sequence may hold in the cache: its prompt and every token it may add, for it and each answer it will fork. */
function reservedTokens(sequence: Sequence): number {
  return (sequence.submission.promptIds.length + sequence.submission.maxTokens) * (1 + sequence.siblings.length);
}

/** Rows sequences take, with the answers they will fork. */
function rowsOf(sequences: readonly Sequence[]): number {
  return sequences.reduce((sum, sequence) => sum + 1 + sequence.siblings.length, 0);
}

/** The width a batch's cache can reach: today's, plus the longest unread prompt, plus the most tokens any row may still add. */
function worstWidth(width: number, sequences: readonly Sequence[]): number {
  let start = width;
  let unfed = 0;
  let remaining = 0;
  for (const sequence of sequences) {
    // A sequence not yet in a batch may start from a cached prefix.
    start = Math.max(start, sequence.read);
    unfed = Math.max(unfed, unread(sequence));
    remaining = Math.max(remaining, sequence.submission.maxTokens - sequence.generated);
  }
  return start + unfed + remaining;
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

interface Shape {
  readonly rows: number;
  /** The longest row: the width a batch of these rows needs. */
  readonly widest: number;
  /** Positions holding real tokens. */
  readonly real: number;
}

function shapeOf(lengths: readonly number[]): Shape {
  let widest = 0;
  let real = 0;
  for (const length of lengths) {
    widest = Math.max(widest, length);
    real += length;
  }
  return { rows: lengths.length, widest, real };
}

/** Every row of the batch has read its prompt: its steps feed one token a row. */
function decodesOnly(batch: RunningBatch): boolean {
  return batch.cache.width > 0 && live(batch).every((sequence) => unread(sequence) === 0);
}

/** A sequence whose request asks no penalty counts nothing. */
const NO_COUNTS: ReadonlyMap<number, number> = new Map();

/** Prompt tokens a sequence has still to read. */
function unread(sequence: Sequence): number {
  return sequence.submission.promptIds.length - sequence.read;
}
