/**
 * Every expected failure in batchserve is a BatchserveError with a stable `code`.
 * Callers and tests match on `code`; messages are for people and may change.
 * `httpStatus` is the one place an error is mapped to an HTTP status. Code, status and exit
 * code are statics, so they can be read from the class without constructing an error.
 * docs/errors.md lists every code; a test keeps the two in sync.
 */
export class BatchserveError extends Error {
  static readonly code: string = 'BS_ERR_UNKNOWN';
  static readonly httpStatus: number = 500;
  /** Process exit code when this error ends a CLI command. */
  static readonly exitCode: number = 1;

  // Each instance carries its class's statics, so `error.code` and `ErrorClass.code` never differ.
  readonly code: string = (this.constructor as typeof BatchserveError).code;
  readonly httpStatus: number = (this.constructor as typeof BatchserveError).httpStatus;
  readonly exitCode: number = (this.constructor as typeof BatchserveError).exitCode;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class UsageError extends BatchserveError {
  static override readonly code = 'BS_ERR_USAGE';
  static override readonly httpStatus = 400;
  static override readonly exitCode = 2;
  declare readonly code: typeof UsageError.code;
}

// --- archives -------------------------------------------------------------

export class InvalidModelNameError extends BatchserveError {
  static override readonly code = 'BS_ERR_INVALID_MODEL_NAME';
  static override readonly httpStatus = 400;
  static override readonly exitCode = 2;
  declare readonly code: typeof InvalidModelNameError.code;
}

export class OutputExistsError extends BatchserveError {
  static override readonly code = 'BS_ERR_OUTPUT_EXISTS';
  declare readonly code: typeof OutputExistsError.code;
}

export class InputFileError extends BatchserveError {
  static override readonly code = 'BS_ERR_INPUT_FILE';
  declare readonly code: typeof InputFileError.code;
}

export class ArchiveUnsafePathError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_UNSAFE_PATH';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveUnsafePathError.code;
}

export class ArchiveSymlinkError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_SYMLINK';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveSymlinkError.code;
}

export class ArchiveDuplicateEntryError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_DUPLICATE_ENTRY';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveDuplicateEntryError.code;
}

export class ArchiveTooManyEntriesError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_TOO_MANY_ENTRIES';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveTooManyEntriesError.code;
}

export class ArchiveTooLargeError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_TOO_LARGE';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveTooLargeError.code;
}

export class ArchiveCorruptError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_CORRUPT';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveCorruptError.code;
}

export class ArchiveManifestError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_MANIFEST';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveManifestError.code;
}

/**
 * An archive torch-model-archiver made: its MANIFEST.json has no hashes, and what it serves
 * may be a PyTorch file or a Python handler that cannot run here; `model-archive import` converts it.
 */
export class TorchServeArchiveError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_TORCHSERVE';
  static override readonly httpStatus = 400;
  declare readonly code: typeof TorchServeArchiveError.code;
}

export class ArchiveMissingFileError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_MISSING_FILE';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveMissingFileError.code;
}

export class ArchiveIntegrityError extends BatchserveError {
  static override readonly code = 'BS_ERR_ARCHIVE_INTEGRITY';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ArchiveIntegrityError.code;
}

// --- config, model, handler -------------------------------------------------

export class ConfigInvalidError extends BatchserveError {
  static override readonly code = 'BS_ERR_CONFIG_INVALID';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ConfigInvalidError.code;
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
export class TritonConfigUnsupportedError extends BatchserveError {
  static override readonly code = 'BS_ERR_TRITON_CONFIG_UNSUPPORTED';
  static override readonly httpStatus = 400;
  declare readonly code: typeof TritonConfigUnsupportedError.code;
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

export class ModelSignatureMismatchError extends BatchserveError {
  static override readonly code = 'BS_ERR_MODEL_SIGNATURE_MISMATCH';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ModelSignatureMismatchError.code;
  readonly problems: readonly string[];

  constructor(source: string, problems: readonly string[]) {
    super(`${source} disagrees with the model: ${problems.join('; ')}`);
    this.problems = problems;
  }
}

export class ModelLoadError extends BatchserveError {
  static override readonly code = 'BS_ERR_MODEL_LOAD';
  declare readonly code: typeof ModelLoadError.code;
}

export class HandlerInvalidError extends BatchserveError {
  static override readonly code = 'BS_ERR_HANDLER_INVALID';
  static override readonly httpStatus = 400;
  declare readonly code: typeof HandlerInvalidError.code;
}

/** A handler's import ran past `handler_load_timeout`; the thread importing it was stopped. */
export class HandlerLoadTimeoutError extends BatchserveError {
  static override readonly code = 'BS_ERR_HANDLER_LOAD_TIMEOUT';
  static override readonly httpStatus = 400;
  declare readonly code: typeof HandlerLoadTimeoutError.code;
}

export class InferenceInputError extends BatchserveError {
  static override readonly code = 'BS_ERR_INFERENCE_INPUT';
  static override readonly httpStatus = 400;
  declare readonly code: typeof InferenceInputError.code;
}

// --- serving ---------------------------------------------------------------

export class ModelNotFoundError extends BatchserveError {
  static override readonly code = 'BS_ERR_MODEL_NOT_FOUND';
  static override readonly httpStatus = 404;
  declare readonly code: typeof ModelNotFoundError.code;
}

export class ModelConflictError extends BatchserveError {
  static override readonly code = 'BS_ERR_MODEL_EXISTS';
  static override readonly httpStatus = 409;
  declare readonly code: typeof ModelConflictError.code;
}

/** A loaded pipeline uses the model (version) being unloaded; `force` unloads it anyway. */
export class ModelInUseError extends BatchserveError {
  static override readonly code = 'BS_ERR_MODEL_IN_USE';
  static override readonly httpStatus = 409;
  declare readonly code: typeof ModelInUseError.code;
}

/**
 * A pipeline that cannot load: step models not loaded, or its tensors do not fit the loaded
 * models' inputs and outputs. Every problem is listed at once.
 */
export class PipelineInvalidError extends BatchserveError {
  static override readonly code = 'BS_ERR_PIPELINE_INVALID';
  static override readonly httpStatus = 400;
  declare readonly code: typeof PipelineInvalidError.code;
  readonly problems: readonly string[];

  constructor(pipeline: string, problems: readonly string[]) {
    super(`pipeline ${pipeline} cannot load:\n  ${problems.join('\n  ')}`);
    this.problems = problems;
  }
}

/** A pipeline step failed other than on bad input; the message names the step. */
export class PipelineStepError extends BatchserveError {
  static override readonly code = 'BS_ERR_PIPELINE_STEP';
  static override readonly httpStatus = 500;
  declare readonly code: typeof PipelineStepError.code;
}

/** The model's `version_policy` does not keep the version being loaded. */
export class VersionPolicyError extends BatchserveError {
  static override readonly code = 'BS_ERR_VERSION_POLICY';
  static override readonly httpStatus = 409;
  declare readonly code: typeof VersionPolicyError.code;
}

/** A canary is running where none may be, or none is running where one must be. */
export class CanaryConflictError extends BatchserveError {
  static override readonly code = 'BS_ERR_CANARY_CONFLICT';
  static override readonly httpStatus = 409;
  declare readonly code: typeof CanaryConflictError.code;
}

export class CanaryNotFoundError extends BatchserveError {
  static override readonly code = 'BS_ERR_CANARY_NOT_FOUND';
  static override readonly httpStatus = 404;
  declare readonly code: typeof CanaryNotFoundError.code;
}

export class ModelNotReadyError extends BatchserveError {
  static override readonly code = 'BS_ERR_MODEL_NOT_READY';
  static override readonly httpStatus = 503;
  declare readonly code: typeof ModelNotReadyError.code;
}

export class BatchTooLargeError extends BatchserveError {
  static override readonly code = 'BS_ERR_BATCH_TOO_LARGE';
  static override readonly httpStatus = 400;
  declare readonly code: typeof BatchTooLargeError.code;
}

export class QueueFullError extends BatchserveError {
  static override readonly code = 'BS_ERR_QUEUE_FULL';
  static override readonly httpStatus = 503;
  declare readonly code: typeof QueueFullError.code;
}

/**
 * `max_queue_delay: auto` refused a request its expected completion would put past
 * `max_latency` (BentoML answers the same 503): better a fast no than a late yes.
 */
export class LatencyBudgetError extends BatchserveError {
  static override readonly code = 'BS_ERR_LATENCY_BUDGET';
  static override readonly httpStatus = 503;
  declare readonly code: typeof LatencyBudgetError.code;
}

export class QueueTimeoutError extends BatchserveError {
  static override readonly code = 'BS_ERR_QUEUE_TIMEOUT';
  static override readonly httpStatus = 503;
  declare readonly code: typeof QueueTimeoutError.code;
}

/** The client went away while its request was queued; nothing is sent back. */
export class RequestCancelledError extends BatchserveError {
  static override readonly code = 'BS_ERR_REQUEST_CANCELLED';
  static override readonly httpStatus = 499;
  declare readonly code: typeof RequestCancelledError.code;
}

export class InferenceFailedError extends BatchserveError {
  static override readonly code = 'BS_ERR_INFERENCE_FAILED';
  static override readonly httpStatus = 500;
  declare readonly code: typeof InferenceFailedError.code;
}

/** A route other servers offer that batchserve knows and does not serve (TorchServe's explanations). */
export class NotImplementedError extends BatchserveError {
  static override readonly code = 'BS_ERR_NOT_IMPLEMENTED';
  static override readonly httpStatus = 501;
  declare readonly code: typeof NotImplementedError.code;
}

export class RouteNotFoundError extends BatchserveError {
  static override readonly code = 'BS_ERR_ROUTE_NOT_FOUND';
  static override readonly httpStatus = 404;
  declare readonly code: typeof RouteNotFoundError.code;
}

export class MethodNotAllowedError extends BatchserveError {
  static override readonly code = 'BS_ERR_METHOD_NOT_ALLOWED';
  static override readonly httpStatus = 405;
  declare readonly code: typeof MethodNotAllowedError.code;
  readonly allowed: readonly string[];

  constructor(method: string, path: string, allowed: readonly string[]) {
    super(`${method} is not allowed on ${path}; use ${allowed.join(' or ')}`);
    this.allowed = allowed;
  }
}

export class PayloadTooLargeError extends BatchserveError {
  static override readonly code = 'BS_ERR_PAYLOAD_TOO_LARGE';
  static override readonly httpStatus = 413;
  declare readonly code: typeof PayloadTooLargeError.code;
}

export class UnsupportedMediaTypeError extends BatchserveError {
  static override readonly code = 'BS_ERR_UNSUPPORTED_MEDIA_TYPE';
  static override readonly httpStatus = 415;
  declare readonly code: typeof UnsupportedMediaTypeError.code;
}

export class UnauthorizedError extends BatchserveError {
  static override readonly code = 'BS_ERR_UNAUTHORIZED';
  static override readonly httpStatus = 401;
  declare readonly code: typeof UnauthorizedError.code;
}

export class ForbiddenError extends BatchserveError {
  static override readonly code = 'BS_ERR_FORBIDDEN';
  static override readonly httpStatus = 403;
  declare readonly code: typeof ForbiddenError.code;
}

/** Something was to be written into the model store (a download), which is read-only or one archive. */
export class ModelStoreReadOnlyError extends BatchserveError {
  static override readonly code = 'BS_ERR_MODEL_STORE_READ_ONLY';
  static override readonly httpStatus = 403;
  declare readonly code: typeof ModelStoreReadOnlyError.code;
}

/**
 * A port `serve` must listen on is taken. Checked before any model loads; the exit code is
 * sysexits' EX_UNAVAILABLE, beside 70 (EX_SOFTWARE) for bugs. Never an HTTP answer.
 */
export class PortInUseError extends BatchserveError {
  static override readonly code = 'BS_ERR_PORT_IN_USE';
  static override readonly exitCode = 69;
  declare readonly code: typeof PortInUseError.code;
}

/**
 * A TLS file (a certificate, a key, a CA bundle) that cannot be used: unreadable, not PEM, an
 * encrypted key, or a key that is not the certificate's. The message names the file. At
 * `serve` it stops the start; on a SIGHUP reload it is logged and the certificates in use stay.
 */
export class TlsFileError extends BatchserveError {
  static override readonly code = 'BS_ERR_TLS_FILE';
  declare readonly code: typeof TlsFileError.code;
}

// --- tracing -----------------------------------------------------------------

/**
 * A Triton trace setting (`POST /v2[/models/{m}]/trace/setting`) that is not one batchserve
 * takes: an unknown name, a value out of range, or a Triton-mode file setting.
 */
export class TraceSettingError extends BatchserveError {
  static override readonly code = 'BS_ERR_TRACE_SETTING';
  static override readonly httpStatus = 400;
  declare readonly code: typeof TraceSettingError.code;
}

/** Trace settings were posted to a server that exports no traces (no `--otlp-endpoint`). */
export class TracingOffError extends BatchserveError {
  static override readonly code = 'BS_ERR_TRACING_OFF';
  static override readonly httpStatus = 409;
  declare readonly code: typeof TracingOffError.code;
}

// --- management clients ----------------------------------------------------

/** A CLI command's call to the management API failed: unreachable, or answered with an error. */
export class ManagementCallError extends BatchserveError {
  static override readonly code = 'BS_ERR_MANAGEMENT_CALL';
  static override readonly httpStatus = 502;
  declare readonly code: typeof ManagementCallError.code;
}

// --- bench -----------------------------------------------------------------

/** `bench --fail-on` or `--baseline` found violations; the message lists each. */
export class BenchGateError extends BatchserveError {
  static override readonly code = 'BS_ERR_BENCH_GATE';
  static override readonly httpStatus = 400;
  declare readonly code: typeof BenchGateError.code;
}

// --- pack-time conversion ----------------------------------------------------

/** `pack --precision`: the converted model's answers differ from the original's beyond the limits. */
export class AccuracyGateError extends BatchserveError {
  static override readonly code = 'BS_ERR_ACCURACY_GATE';
  static override readonly httpStatus = 400;
  declare readonly code: typeof AccuracyGateError.code;
}

// --- predict (batch inference) ----------------------------------------------

/** `predict`'s dataset cannot be read as its format, or the model cannot take it (dtype, shape, columns). */
export class DatasetError extends BatchserveError {
  static override readonly code = 'BS_ERR_DATASET';
  static override readonly httpStatus = 400;
  static override readonly exitCode = 2;
  declare readonly code: typeof DatasetError.code;
}

/** A `predict` checkpoint is unreadable, belongs to another input or options, or a partial run is in the way. */
export class CheckpointError extends BatchserveError {
  static override readonly code = 'BS_ERR_CHECKPOINT';
  static override readonly httpStatus = 400;
  static override readonly exitCode = 2;
  declare readonly code: typeof CheckpointError.code;
}

/** `predict merge` was given shards that are unfinished, missing, overlapping or of different jobs. */
export class ShardMergeError extends BatchserveError {
  static override readonly code = 'BS_ERR_SHARD_MERGE';
  static override readonly httpStatus = 400;
  static override readonly exitCode = 2;
  declare readonly code: typeof ShardMergeError.code;
}

/** `predict` finished, but some rows failed; they are listed in the errors file. */
export class PredictRowsFailedError extends BatchserveError {
  static override readonly code = 'BS_ERR_PREDICT_ROWS_FAILED';
  declare readonly code: typeof PredictRowsFailedError.code;
}

// --- experiments (prediction log, feedback, report) ---------------------------

/** The prediction log (or a `--log` path) cannot be read, or holds no records of the model asked for. */
export class PredictionLogReadError extends BatchserveError {
  static override readonly code = 'BS_ERR_PREDICTION_LOG_READ';
  static override readonly httpStatus = 400;
  static override readonly exitCode = 2;
  declare readonly code: typeof PredictionLogReadError.code;
}

/** Feedback came for a model that keeps no prediction log, so there is nothing to join it to. */
export class PredictionLogOffError extends BatchserveError {
  static override readonly code = 'BS_ERR_PREDICTION_LOG_OFF';
  static override readonly httpStatus = 409;
  declare readonly code: typeof PredictionLogOffError.code;
}

/** A feedback body is not `{"id", "value" | "label" | "reward"}`. */
export class FeedbackInvalidError extends BatchserveError {
  static override readonly code = 'BS_ERR_FEEDBACK_INVALID';
  static override readonly httpStatus = 400;
  declare readonly code: typeof FeedbackInvalidError.code;
}

/** Feedback names a request id the model's prediction log does not hold. */
export class FeedbackUnknownIdError extends BatchserveError {
  static override readonly code = 'BS_ERR_FEEDBACK_UNKNOWN_ID';
  static override readonly httpStatus = 404;
  declare readonly code: typeof FeedbackUnknownIdError.code;
}

/** The log holds too little to report on: fewer than two variants, or a variant without a sample. */
export class ExperimentDataError extends BatchserveError {
  static override readonly code = 'BS_ERR_EXPERIMENT_DATA';
  static override readonly httpStatus = 400;
  static override readonly exitCode = 2;
  declare readonly code: typeof ExperimentDataError.code;
}

// --- model conversion (fp16, int8) ----------------------------------------------

/** A model cannot be converted to another precision: unreadable, no float weights, or a graph the converter does not handle. */
export class ModelConversionError extends BatchserveError {
  static override readonly code = 'BS_ERR_CONVERSION_FAILED';
  static override readonly httpStatus = 400;
  declare readonly code: typeof ModelConversionError.code;
}

/** Every error class, for docs/errors.md and the test that keeps it in sync. */
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
