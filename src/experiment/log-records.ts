/**
 * The prediction log's record format: JSON Lines, one object per line, version 1. The server
 * writes it (prediction-log.ts), `batchserve experiment report` reads it, and docs describe it;
 * a change here is a change of the file format, so fields are only ever added.
 */

/** How the version that answered was chosen. */
export type Routing =
  /** The request named the version (`/v2/models/m/versions/2/infer`). */
  | 'explicit'
  /** The model's configured A/B split (random or sticky) picked it. */
  | 'split'
  /** A running canary's split picked it. */
  | 'canary'
  /** No split applies: the default version answered. */
  | 'default'
  /** A shadow's copy of a request another version answered; never sent to the client. */
  | 'shadow';

/** One label and its score, best first, for classifiers. */
export interface RankedLabel {
  readonly label: string;
  readonly score: number;
}

/** One answered request (or a shadow's copy of it). */
export interface PredictionRecord {
  readonly type: 'prediction';
  /** ISO 8601, when the answer was ready. */
  readonly time: string;
  /** The v2 request `id`, else the client's `X-Request-Id`, else one the server made; sent back as `X-Request-Id`. */
  readonly id: string;
  readonly model: string;
  /** The variant. */
  readonly version: string;
  readonly routing: Routing;
  /** Present (true) on a shadow's record only. */
  readonly shadow?: true;
  /** The sticky key's value, when the model's split has one and the request carried it. */
  readonly sticky_key?: string;
  /** The HTTP status the request was (or, for a shadow, would have been) answered with. */
  readonly status: number;
  /** The error's stable code, for answers that are not 2xx. */
  readonly error_code?: string;
  /** From the request's headers to its answer. */
  readonly latency_ms: number;
  /** Rows in the request (its batch dimension). */
  readonly rows: number;
  /**
   * Classifiers only: the top-1 label, a string for a one-row request and a list (one per row)
   * otherwise. Feedback `label`s are compared with this for accuracy.
   */
  readonly prediction?: string | readonly string[];
  /** Classifiers only: the top labels per row (as many as `prediction_log.top_k`). */
  readonly top_k?: readonly (readonly RankedLabel[])[];
  /** Other models: the answer, v2 outputs as `{name: {datatype, shape, data}}`, or the handler's JSON. */
  readonly outputs?: unknown;
  /** As `prediction_log.inputs` says: absent (none), `{sha256}` of the body (hash), or the inputs (full). */
  readonly inputs?: unknown;
}

/** What happened after a prediction, joined to it by `id`. */
export interface FeedbackRecord {
  readonly type: 'feedback';
  readonly time: string;
  readonly id: string;
  readonly model: string;
  /** The version that answered the prediction, filled in by the server when it joined it. */
  readonly version: string;
  /** A number the experiment measures (a conversion 0/1, revenue, a score). */
  readonly value?: number;
  /** The true label, for accuracy: compared with the prediction's `prediction`. */
  readonly label?: string;
  /** A reward, as in Seldon's feedback API. */
  readonly reward?: number;
}

export type LogRecord = PredictionRecord | FeedbackRecord;
