import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import type { SubmitResult, TracedSubmission } from '../batching/batch-request.js';
import { traceNow } from '../core/trace-channels.js';
import type { LoadedModel } from '../repository/loaded-model.js';
import type { GenerationTrace } from '../runtime/generator.js';
import type { TraceSettings } from './trace-settings.js';

/**
 * One request's spans. The request's own span opens once the version that answers is known
 * (sampling is per model), from the time the request reached the inference call; its children
 * are made when it ends, from what the batcher and generator noted on the way: the time queued,
 * the batch it rode in (linked to the other traced requests of that batch), the forward pass,
 * and for a generation the time to its first token, the prefill and the decoding after it.
 */
export class RequestTrace {
  readonly #tracer: Tracer;
  readonly #settings: TraceSettings;
  readonly #startedAt: number;
  readonly #parent: Context | undefined;
  #span: Span | undefined;
  #decided = false;
  #submissions: SubmissionTrace[] | undefined;
  #generation: GenerationTrace | undefined;

  constructor(tracer: Tracer, settings: TraceSettings, startedAt: number, parent: Context | undefined) {
    this.#tracer = tracer;
    this.#settings = settings;
    this.#startedAt = startedAt;
    this.#parent = parent;
  }

  /** Decides whether the request is traced (once) and opens its span; attributes say who answers. */
  open(name: string, model: LoadedModel | undefined, attributes: Attributes): void {
    if (this.#decided) return;
    this.#decided = true;
    const parentSampled = ((this.#parent && trace.getSpanContext(this.#parent)?.traceFlags) ?? 0) % 2 === 1;
    if (!this.#settings.sample(name, parentSampled)) return;
    this.#span = this.#tracer.startSpan(
      `infer ${name}`,
      {
        kind: SpanKind.SERVER,
        startTime: this.#startedAt,
        attributes: {
          'batchserve.model': name,
          ...(model ? { 'batchserve.model.version': model.version } : {}),
          ...attributes,
        },
      },
      this.#parent ?? ROOT_CONTEXT,
    );
  }

  /** The note for the batcher to fill, for a traced request; undefined otherwise. */
  submission(): SubmissionTrace | undefined {
    const span = this.#span;
    if (span === undefined) return undefined;
    const note = new SubmissionTrace(span.spanContext());
    (this.#submissions ??= []).push(note);
    return note;
  }

  /** The note for the generator to fill, for a traced request; undefined otherwise. */
  generation(): GenerationTrace | undefined {
    if (this.#span === undefined) return undefined;
    this.#generation = { submittedAt: NaN, firstTokenAt: NaN };
    return this.#generation;
  }

  /** Closes the request's span and makes its children; `results` are the submissions' when it answered. */
  end(status: number, errorCode: string | undefined, attributes: Attributes, results?: readonly SubmitResult[]): void {
    const span = this.#span;
    if (span === undefined) return;
    const endedAt = traceNow();
    const parent = trace.setSpan(ROOT_CONTEXT, span);
    let batchRows = 0;
    this.#submissions?.forEach((note, index) => {
      const result = results?.[index];
      if (result && !Number.isNaN(note.answeredAt)) this.#batchSpans(parent, note, result);
      if (result) batchRows = Math.max(batchRows, result.batchRows);
    });
    const generation = this.#generation;
    if (generation && !Number.isNaN(generation.firstTokenAt)) {
      const { submittedAt, firstTokenAt } = generation;
      this.#child(parent, 'time to first token', this.#startedAt, firstTokenAt);
      this.#child(parent, 'prefill', submittedAt, firstTokenAt);
      this.#child(parent, 'decode', firstTokenAt, endedAt);
    }
    span.setAttributes(attributes);
    span.setAttribute('batchserve.status', status);
    if (batchRows > 0) span.setAttribute('batchserve.batch.size', batchRows);
    if (errorCode !== undefined) span.setAttribute('error.type', errorCode);
    if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR, ...(errorCode ? { message: errorCode } : {}) });
    span.end(endedAt);
  }

  #batchSpans(parent: Context, note: SubmissionTrace, result: SubmitResult): void {
    const tracer = this.#tracer;
    if (!Number.isNaN(note.queuedAt) && !Number.isNaN(note.dispatchedAt)) {
      this.#child(parent, 'queue', note.queuedAt, note.dispatchedAt);
    }
    if (Number.isNaN(note.dispatchedAt)) return;
    const links: Link[] = [];
    for (const mate of note.batch) if (mate !== note) links.push({ context: mate.span as SpanContext });
    const batch = tracer.startSpan(
      'batch',
      {
        startTime: note.dispatchedAt,
        links,
        attributes: {
          'batchserve.batch.size': result.batchRows,
          'batchserve.batch.traced_requests': note.batch.length,
          'batchserve.instance': result.instanceId,
        },
      },
      parent,
    );
    const { timings } = result;
    const startedAt = timings.startedAt ?? note.dispatchedAt;
    const computeMs = (timings.computeInputNs + timings.computeInferNs + timings.computeOutputNs) / 1e6;
    this.#child(trace.setSpan(ROOT_CONTEXT, batch), 'forward', startedAt, startedAt + computeMs, {
      'batchserve.batch.size': result.batchRows,
    });
    batch.end(note.answeredAt);
  }

  #child(parent: Context, name: string, start: number, end: number, attributes?: Attributes): void {
    this.#tracer.startSpan(name, { startTime: start, ...(attributes ? { attributes } : {}) }, parent).end(end);
  }
}

/** What the batcher notes of one traced submission, and when its answer came back. */
export class SubmissionTrace implements TracedSubmission {
  queuedAt = NaN;
  dispatchedAt = NaN;
  batch: readonly TracedSubmission[] = [];
  answeredAt = NaN;

  constructor(readonly span: SpanContext) {}
}
