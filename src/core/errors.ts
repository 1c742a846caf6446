/**
 * Every expected failure in batchserve is a BatchserveError with a stable `code`. Callers and
 * tests match on `code`; messages are for people and may change. `ERRORS` is the one place a
 * code is mapped to its HTTP status, gRPC status and CLI exit code; each class below is made
 * from its line, so `instanceof` and `ErrorClass.code` work without constructing an error.
 * docs/errors.md says more about each code; a test keeps the two in sync.
 */

/** A gRPC status by its name in grpc-js's `status`: the server maps it, so core loads no gRPC. */
export type GrpcStatusName =
  | 'INVALID_ARGUMENT'
  | 'NOT_FOUND'
  | 'FAILED_PRECONDITION'
  | 'UNAVAILABLE'
  | 'DEADLINE_EXCEEDED'
  | 'CANCELLED'
  | 'RESOURCE_EXHAUSTED'
  | 'UNAUTHENTICATED'
  | 'PERMISSION_DENIED'
  | 'INTERNAL';

/** One line a code: [HTTP status, gRPC status, CLI exit code, what it means]. */
// prettier-ignore
export const ERRORS = {
  BS_ERR_USAGE:                     [400, 'INVALID_ARGUMENT',    2,  'a flag or argument is missing, malformed or contradicts another'],
  BS_ERR_INVALID_MODEL_NAME:        [400, 'INVALID_ARGUMENT',    2,  'a model name breaks the naming rule'],
  BS_ERR_OUTPUT_EXISTS:             [500, 'INTERNAL',            1,  'the file or folder to write exists (--force replaces it)'],
  BS_ERR_INPUT_FILE:                [500, 'INTERNAL',            1,  'a file named on the command line is missing or unreadable'],
  BS_ERR_ARCHIVE_UNSAFE_PATH:       [400, 'INVALID_ARGUMENT',    1,  'an entry name escapes the archive (.., absolute, drive, NUL)'],
  BS_ERR_ARCHIVE_SYMLINK:           [400, 'INVALID_ARGUMENT',    1,  'an entry is a symbolic link'],
  BS_ERR_ARCHIVE_DUPLICATE_ENTRY:   [400, 'INVALID_ARGUMENT',    1,  'two entries share a name (also by case)'],
  BS_ERR_ARCHIVE_TOO_MANY_ENTRIES:  [400, 'INVALID_ARGUMENT',    1,  'more entries than the limit'],
  BS_ERR_ARCHIVE_TOO_LARGE:         [400, 'INVALID_ARGUMENT',    1,  'an entry or the archive inflates past the limits (zip bomb)'],
  BS_ERR_ARCHIVE_CORRUPT:           [400, 'INVALID_ARGUMENT',    1,  'not a zip, truncated, or an entry fails inflation or its CRC'],
  BS_ERR_ARCHIVE_MANIFEST:          [400, 'INVALID_ARGUMENT',    1,  'MAR-INF/MANIFEST.json missing, not JSON, or lacking keys'],
  BS_ERR_ARCHIVE_TORCHSERVE:        [400, 'INVALID_ARGUMENT',    1,  'a torch-model-archiver archive read as ours, or one import refuses'],
  BS_ERR_ARCHIVE_MISSING_FILE:      [400, 'INVALID_ARGUMENT',    1,  'the manifest names a file the archive lacks'],
  BS_ERR_ARCHIVE_INTEGRITY:         [400, 'INVALID_ARGUMENT',    1,  "a file's size or sha256 differs from the manifest, or is unlisted"],
  BS_ERR_CONFIG_INVALID:            [400, 'INVALID_ARGUMENT',    1,  "a config file's syntax, keys or values are wrong (all listed)"],
  BS_ERR_TRITON_CONFIG_UNSUPPORTED: [400, 'INVALID_ARGUMENT',    1,  'a Triton config.pbtxt asks for what batchserve cannot do'],
  BS_ERR_MODEL_SIGNATURE_MISMATCH:  [400, 'INVALID_ARGUMENT',    1,  "the config's inputs/outputs disagree with the ONNX graph's"],
  BS_ERR_MODEL_LOAD:                [500, 'INTERNAL',            1,  'onnxruntime cannot load the model, or it cannot be served'],
  BS_ERR_HANDLER_INVALID:           [400, 'INVALID_ARGUMENT',    1,  'a handler or step module cannot be imported or breaks the lifecycle'],
  BS_ERR_HANDLER_LOAD_TIMEOUT:      [400, 'INVALID_ARGUMENT',    1,  'importing a handler ran past handler_load_timeout'],
  BS_ERR_INFERENCE_INPUT:           [400, 'INVALID_ARGUMENT',    1,  "a request's tensors or body do not fit the model"],
  BS_ERR_MODEL_NOT_FOUND:           [404, 'NOT_FOUND',           1,  'no model (or version) of that name is loaded'],
  BS_ERR_MODEL_EXISTS:              [409, 'FAILED_PRECONDITION', 1,  'that model name and version is loaded already'],
  BS_ERR_MODEL_IN_USE:              [409, 'FAILED_PRECONDITION', 1,  'a loaded pipeline uses the version being unloaded'],
  BS_ERR_PIPELINE_INVALID:          [400, 'INVALID_ARGUMENT',    1,  "a pipeline's step models are not loaded, or its tensors do not fit them"],
  BS_ERR_PIPELINE_STEP:             [500, 'INTERNAL',            1,  'a pipeline step failed other than on bad input'],
  BS_ERR_VERSION_POLICY:            [409, 'FAILED_PRECONDITION', 1,  "the model's version_policy does not keep that version"],
  BS_ERR_CANARY_CONFLICT:           [409, 'FAILED_PRECONDITION', 1,  'a canary runs where none may, or none where one must'],
  BS_ERR_CANARY_NOT_FOUND:          [404, 'NOT_FOUND',           1,  'the model has never had a canary'],
  BS_ERR_MODEL_NOT_READY:           [503, 'UNAVAILABLE',         1,  'the model is loading or unloading, or the server draining'],
  BS_ERR_BATCH_TOO_LARGE:           [400, 'INVALID_ARGUMENT',    1,  'a request has more rows than max_batch_size'],
  BS_ERR_QUEUE_FULL:                [503, 'UNAVAILABLE',         1,  'the queue holds max_queue_size rows already'],
  BS_ERR_QUEUE_TIMEOUT:             [503, 'UNAVAILABLE',         1,  "the request's timeout expired while it was queued"],
  BS_ERR_DEADLINE_EXCEEDED:         [504, 'DEADLINE_EXCEEDED',   1,  "the call's own deadline (gRPC) passed while its request was queued"],
  BS_ERR_LATENCY_BUDGET:            [503, 'UNAVAILABLE',         1,  'the request would finish past max_latency (max_queue_delay: auto)'],
  BS_ERR_REQUEST_CANCELLED:         [499, 'CANCELLED',           1,  'the client went away while its request was queued'],
  BS_ERR_INFERENCE_FAILED:          [500, 'INTERNAL',            1,  'the forward pass or a handler hook threw for this request'],
  BS_ERR_NOT_IMPLEMENTED:           [501, 'INTERNAL',            1,  'a route other servers have that batchserve does not serve'],
  BS_ERR_ROUTE_NOT_FOUND:           [404, 'NOT_FOUND',           1,  'no API route at that path'],
  BS_ERR_METHOD_NOT_ALLOWED:        [405, 'INVALID_ARGUMENT',    1,  'the route exists, not for that method'],
  BS_ERR_PAYLOAD_TOO_LARGE:         [413, 'RESOURCE_EXHAUSTED',  1,  'the body is larger than max_request_size'],
  BS_ERR_UNSUPPORTED_MEDIA_TYPE:    [415, 'INVALID_ARGUMENT',    1,  "the route does not take the body's Content-Type"],
  BS_ERR_UNAUTHORIZED:              [401, 'UNAUTHENTICATED',     1,  'the route needs a bearer token it was not given'],
  BS_ERR_FORBIDDEN:                 [403, 'PERMISSION_DENIED',   1,  "the server's config does not allow the request"],
  BS_ERR_MODEL_STORE_READ_ONLY:     [403, 'INVALID_ARGUMENT',    1,  'a download into a read-only model store'],
  BS_ERR_PORT_IN_USE:               [500, 'INTERNAL',            69, 'a port serve must listen on is taken'],
  BS_ERR_TLS_FILE:                  [500, 'INTERNAL',            1,  'a TLS file is unreadable, not PEM, an encrypted key, or not the certificate\'s key'],
  BS_ERR_TRACE_SETTING:             [400, 'INVALID_ARGUMENT',    1,  'a Triton trace setting batchserve does not take'],
  BS_ERR_TRACING_OFF:               [409, 'FAILED_PRECONDITION', 1,  'trace settings for a server that exports no traces'],
  BS_ERR_MANAGEMENT_CALL:           [502, 'INTERNAL',            1,  "a CLI command's management API call failed"],
  BS_ERR_BENCH_GATE:                [400, 'INVALID_ARGUMENT',    1,  'bench --fail-on or --baseline found violations'],
  BS_ERR_ACCURACY_GATE:             [400, 'INVALID_ARGUMENT',    1,  "a converted model's answers differ beyond the limits"],
  BS_ERR_DATASET:                   [400, 'INVALID_ARGUMENT',    2,  'predict cannot read its input, or the model cannot take it'],
  BS_ERR_CHECKPOINT:                [400, 'INVALID_ARGUMENT',    2,  "predict's checkpoint is another job's, damaged, or in the way"],
  BS_ERR_SHARD_MERGE:               [400, 'INVALID_ARGUMENT',    2,  "predict merge's shards are unfinished, missing or mismatched"],
  BS_ERR_PREDICT_ROWS_FAILED:       [500, 'INTERNAL',            1,  'predict finished, but some rows failed'],
  BS_ERR_PREDICTION_LOG_READ:       [400, 'INVALID_ARGUMENT',    2,  'the prediction log is unreadable or lacks the model'],
  BS_ERR_PREDICTION_LOG_OFF:        [409, 'FAILED_PRECONDITION', 1,  'feedback for a model that keeps no prediction log'],
  BS_ERR_FEEDBACK_INVALID:          [400, 'INVALID_ARGUMENT',    1,  'a feedback body is not {id, value | label | reward}'],
  BS_ERR_FEEDBACK_UNKNOWN_ID:       [404, 'NOT_FOUND',           1,  'feedback names a request id the log does not hold'],
  BS_ERR_EXPERIMENT_DATA:           [400, 'INVALID_ARGUMENT',    2,  'too little logged to report: under two variants, or an empty one'],
  BS_ERR_CONVERSION_FAILED:         [400, 'INVALID_ARGUMENT',    1,  'a model cannot be converted to another precision'],
} as const satisfies Record<`BS_ERR_${string}`, readonly [number, GrpcStatusName, number, string]>;

export type ErrorCode = keyof typeof ERRORS;

export class BatchserveError extends Error {
  static readonly code: string = 'BS_ERR_UNKNOWN';
  static readonly httpStatus: number = 500;
  static readonly grpcStatus: GrpcStatusName = 'INTERNAL';
  /** Process exit code when this error ends a CLI command. */
  static readonly exitCode: number = 1;

  // Each instance carries its class's statics, so `error.code` and `ErrorClass.code` never differ.
  readonly code: string = (this.constructor as typeof BatchserveError).code;
  readonly httpStatus: number = (this.constructor as typeof BatchserveError).httpStatus;
  readonly grpcStatus: GrpcStatusName = (this.constructor as typeof BatchserveError).grpcStatus;
  readonly exitCode: number = (this.constructor as typeof BatchserveError).exitCode;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The base of one code's class: its statics are that code's line of `ERRORS`. */
function coded<const C extends ErrorCode>(code: C) {
  const [httpStatus, grpcStatus, exitCode] = ERRORS[code];
  return class extends BatchserveError {
    static override readonly code: C = code;
    static override readonly httpStatus: number = httpStatus;
    static override readonly grpcStatus: GrpcStatusName = grpcStatus;
    static override readonly exitCode: number = exitCode;
    declare readonly code: C;
  };
}

export class UsageError extends coded('BS_ERR_USAGE') {}

// --- archives ----------------------------------------------------------------

export class InvalidModelNameError extends coded('BS_ERR_INVALID_MODEL_NAME') {}
export class OutputExistsError extends coded('BS_ERR_OUTPUT_EXISTS') {}
export class InputFileError extends coded('BS_ERR_INPUT_FILE') {}
export class ArchiveUnsafePathError extends coded('BS_ERR_ARCHIVE_UNSAFE_PATH') {}
export class ArchiveSymlinkError extends coded('BS_ERR_ARCHIVE_SYMLINK') {}
export class ArchiveDuplicateEntryError extends coded('BS_ERR_ARCHIVE_DUPLICATE_ENTRY') {}
export class ArchiveTooManyEntriesError extends coded('BS_ERR_ARCHIVE_TOO_MANY_ENTRIES') {}
export class ArchiveTooLargeError extends coded('BS_ERR_ARCHIVE_TOO_LARGE') {}
export class ArchiveCorruptError extends coded('BS_ERR_ARCHIVE_CORRUPT') {}
export class ArchiveManifestError extends coded('BS_ERR_ARCHIVE_MANIFEST') {}

/**
 * An archive torch-model-archiver made: its MANIFEST.json has no hashes, and what it serves
 * may be a PyTorch file or a Python handler that cannot run here; `model-archive import` converts it.
 */
export class TorchServeArchiveError extends coded('BS_ERR_ARCHIVE_TORCHSERVE') {}
export class ArchiveMissingFileError extends coded('BS_ERR_ARCHIVE_MISSING_FILE') {}
export class ArchiveIntegrityError extends coded('BS_ERR_ARCHIVE_INTEGRITY') {}

// --- config, model, handler --------------------------------------------------

export class ConfigInvalidError extends coded('BS_ERR_CONFIG_INVALID') {
  readonly problems: readonly string[];

  /** `source` names the file (or "config") the problems were found in. */
  constructor(source: string, problems: readonly string[]) {
    super(
      problems.length === 1
        ? `${source}: ${problems[0]}`
        : `${source}: ${problems.length} problems: ${problems.join('; ')}`,
    );
    this.problems = problems;
  }
}

/**
 * A Triton model folder whose config.pbtxt asks for what batchserve cannot do (another
 * backend, a Python model, sequence batching…): that model is refused, naming the field.
 */
export class TritonConfigUnsupportedError extends coded('BS_ERR_TRITON_CONFIG_UNSUPPORTED') {
  readonly problems: readonly string[];

  /** `source` names the config.pbtxt; each problem is `field: why`. */
  constructor(source: string, problems: readonly string[]) {
    const more =
      problems.length > 1
        ? ` (and ${problems
            .slice(1)
            .map((problem) => problem.split(':')[0])
            .join(', ')})`
        : '';
    super(`${source}: ${problems[0] ?? 'unsupported'}${more}`);
    this.problems = problems;
  }
}

export class ModelSignatureMismatchError extends coded('BS_ERR_MODEL_SIGNATURE_MISMATCH') {
  readonly problems: readonly string[];

  constructor(source: string, problems: readonly string[]) {
    super(`${source} disagrees with the model: ${problems.join('; ')}`);
    this.problems = problems;
  }
}

export class ModelLoadError extends coded('BS_ERR_MODEL_LOAD') {}
export class HandlerInvalidError extends coded('BS_ERR_HANDLER_INVALID') {}

/** A handler's import ran past `handler_load_timeout`; the thread importing it was stopped. */
export class HandlerLoadTimeoutError extends coded('BS_ERR_HANDLER_LOAD_TIMEOUT') {}
export class InferenceInputError extends coded('BS_ERR_INFERENCE_INPUT') {}

// --- serving -----------------------------------------------------------------

export class ModelNotFoundError extends coded('BS_ERR_MODEL_NOT_FOUND') {}
export class ModelConflictError extends coded('BS_ERR_MODEL_EXISTS') {}

/** A loaded pipeline uses the model (version) being unloaded; `force` unloads it anyway. */
export class ModelInUseError extends coded('BS_ERR_MODEL_IN_USE') {}

/**
 * A pipeline that cannot load: step models not loaded, or its tensors do not fit the loaded
 * models' inputs and outputs. Every problem is listed at once.
 */
export class PipelineInvalidError extends coded('BS_ERR_PIPELINE_INVALID') {
  readonly problems: readonly string[];

  constructor(pipeline: string, problems: readonly string[]) {
    super(`pipeline ${pipeline} cannot load:\n  ${problems.join('\n  ')}`);
    this.problems = problems;
  }
}

/** A pipeline step failed other than on bad input; the message names the step. */
export class PipelineStepError extends coded('BS_ERR_PIPELINE_STEP') {}

/** The model's `version_policy` does not keep the version being loaded. */
export class VersionPolicyError extends coded('BS_ERR_VERSION_POLICY') {}

/** A canary is running where none may be, or none is running where one must be. */
export class CanaryConflictError extends coded('BS_ERR_CANARY_CONFLICT') {}
export class CanaryNotFoundError extends coded('BS_ERR_CANARY_NOT_FOUND') {}
export class ModelNotReadyError extends coded('BS_ERR_MODEL_NOT_READY') {}
export class BatchTooLargeError extends coded('BS_ERR_BATCH_TOO_LARGE') {}
export class QueueFullError extends coded('BS_ERR_QUEUE_FULL') {}
export class QueueTimeoutError extends coded('BS_ERR_QUEUE_TIMEOUT') {}

/** The queue's timeout was the call's own deadline (gRPC): DEADLINE_EXCEEDED, as grpc-js's own timer says it. */
export class DeadlineExceededError extends coded('BS_ERR_DEADLINE_EXCEEDED') {}

/**
 * `max_queue_delay: auto` refused a request its expected completion would put past
 * `max_latency` (BentoML answers the same 503): better a fast no than a late yes.
 */
export class LatencyBudgetError extends coded('BS_ERR_LATENCY_BUDGET') {}

/** The client went away while its request was queued; nothing is sent back. */
export class RequestCancelledError extends coded('BS_ERR_REQUEST_CANCELLED') {}
export class InferenceFailedError extends coded('BS_ERR_INFERENCE_FAILED') {}

/** A route other servers offer that batchserve knows and does not serve (TorchServe's explanations). */
export class NotImplementedError extends coded('BS_ERR_NOT_IMPLEMENTED') {}
export class RouteNotFoundError extends coded('BS_ERR_ROUTE_NOT_FOUND') {}

export class MethodNotAllowedError extends coded('BS_ERR_METHOD_NOT_ALLOWED') {
  readonly allowed: readonly string[];

  constructor(method: string, path: string, allowed: readonly string[]) {
    super(`${method} is not allowed on ${path}; use ${allowed.join(' or ')}`);
    this.allowed = allowed;
  }
}

export class PayloadTooLargeError extends coded('BS_ERR_PAYLOAD_TOO_LARGE') {}
export class UnsupportedMediaTypeError extends coded('BS_ERR_UNSUPPORTED_MEDIA_TYPE') {}
export class UnauthorizedError extends coded('BS_ERR_UNAUTHORIZED') {}
export class ForbiddenError extends coded('BS_ERR_FORBIDDEN') {}

/** Something was to be written into the model store (a download), which is read-only or one archive. */
export class ModelStoreReadOnlyError extends coded('BS_ERR_MODEL_STORE_READ_ONLY') {}

/**
 * A port `serve` must listen on is taken. Checked before any model loads; the exit code is
 * sysexits' EX_UNAVAILABLE, beside 70 (EX_SOFTWARE) for bugs. Never an HTTP answer.
 */
export class PortInUseError extends coded('BS_ERR_PORT_IN_USE') {}

/**
 * A TLS file (a certificate, a key, a CA bundle) that cannot be used: unreadable, not PEM, an
 * encrypted key, or a key that is not the certificate's. The message names the file. At
 * `serve` it stops the start; on a SIGHUP reload it is logged and the certificates in use stay.
 */
export class TlsFileError extends coded('BS_ERR_TLS_FILE') {}

// --- tracing -------------------------------------------------------------------

/**
 * A Triton trace setting (`POST /v2[/models/{m}]/trace/setting`) that is not one batchserve
 * takes: an unknown name, a value out of range, or a Triton-mode file setting.
 */
export class TraceSettingError extends coded('BS_ERR_TRACE_SETTING') {}

/** Trace settings were posted to a server that exports no traces (no `--otlp-endpoint`). */
export class TracingOffError extends coded('BS_ERR_TRACING_OFF') {}

// --- management clients ------------------------------------------------------

/** A CLI command's call to the management API failed: unreachable, or answered with an error. */
export class ManagementCallError extends coded('BS_ERR_MANAGEMENT_CALL') {}

// --- bench -------------------------------------------------------------------

/** `bench --fail-on` or `--baseline` found violations; the message lists each. */
export class BenchGateError extends coded('BS_ERR_BENCH_GATE') {}

// --- pack-time conversion ----------------------------------------------------

/** `pack --precision`: the converted model's answers differ from the original's beyond the limits. */
export class AccuracyGateError extends coded('BS_ERR_ACCURACY_GATE') {}

// --- predict (batch inference) -----------------------------------------------

/** `predict`'s dataset cannot be read as its format, or the model cannot take it (dtype, shape, columns). */
export class DatasetError extends coded('BS_ERR_DATASET') {}

/** A `predict` checkpoint is unreadable, belongs to another input or options, or a partial run is in the way. */
export class CheckpointError extends coded('BS_ERR_CHECKPOINT') {}

/** `predict merge` was given shards that are unfinished, missing, overlapping or of different jobs. */
export class ShardMergeError extends coded('BS_ERR_SHARD_MERGE') {}

/** `predict` finished, but some rows failed; they are listed in the errors file. */
export class PredictRowsFailedError extends coded('BS_ERR_PREDICT_ROWS_FAILED') {}

// --- experiments (prediction log, feedback, report) --------------------------

/** The prediction log (or a `--log` path) cannot be read, or holds no records of the model asked for. */
export class PredictionLogReadError extends coded('BS_ERR_PREDICTION_LOG_READ') {}

/** Feedback came for a model that keeps no prediction log, so there is nothing to join it to. */
export class PredictionLogOffError extends coded('BS_ERR_PREDICTION_LOG_OFF') {}

/** A feedback body is not `{"id", "value" | "label" | "reward"}`. */
export class FeedbackInvalidError extends coded('BS_ERR_FEEDBACK_INVALID') {}

/** Feedback names a request id the model's prediction log does not hold. */
export class FeedbackUnknownIdError extends coded('BS_ERR_FEEDBACK_UNKNOWN_ID') {}

/** The log holds too little to report on: fewer than two variants, or a variant without a sample. */
export class ExperimentDataError extends coded('BS_ERR_EXPERIMENT_DATA') {}

// --- model conversion (fp16, int8) -------------------------------------------

/** A model cannot be converted to another precision: unreadable, no float weights, or a graph the converter does not handle. */
export class ModelConversionError extends coded('BS_ERR_CONVERSION_FAILED') {}

/** Every error class, for the worker's errors crossing back and the test that keeps docs in sync. */
export const errorClasses = [
  UsageError,
  InvalidModelNameError,
  OutputExistsError,
  InputFileError,
  ArchiveUnsafePathError,
  ArchiveSymlinkError,
  ArchiveDuplicateEntryError,
  ArchiveTooManyEntriesError,
  ArchiveTooLargeError,
  ArchiveCorruptError,
  ArchiveManifestError,
  TorchServeArchiveError,
  ArchiveMissingFileError,
  ArchiveIntegrityError,
  ConfigInvalidError,
  TritonConfigUnsupportedError,
  ModelSignatureMismatchError,
  ModelLoadError,
  HandlerInvalidError,
  HandlerLoadTimeoutError,
  InferenceInputError,
  ModelNotFoundError,
  ModelConflictError,
  ModelInUseError,
  PipelineInvalidError,
  PipelineStepError,
  VersionPolicyError,
  CanaryConflictError,
  CanaryNotFoundError,
  ModelNotReadyError,
  BatchTooLargeError,
  QueueFullError,
  QueueTimeoutError,
  DeadlineExceededError,
  LatencyBudgetError,
  RequestCancelledError,
  InferenceFailedError,
  NotImplementedError,
  RouteNotFoundError,
  MethodNotAllowedError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  UnauthorizedError,
  ForbiddenError,
  ModelStoreReadOnlyError,
  PortInUseError,
  TlsFileError,
  TraceSettingError,
  TracingOffError,
  ManagementCallError,
  BenchGateError,
  AccuracyGateError,
  DatasetError,
  CheckpointError,
  ShardMergeError,
  PredictRowsFailedError,
  PredictionLogReadError,
  PredictionLogOffError,
  FeedbackInvalidError,
  FeedbackUnknownIdError,
  ExperimentDataError,
  ModelConversionError,
] as const;
