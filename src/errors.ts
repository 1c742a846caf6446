/**
 * Every expected failure in batchserve is a BatchserveError with a stable `code`.
 * Callers and tests match on `code`; messages are for people and may change.
 * `httpStatus` is the one place an error is mapped to an HTTP status.
 * docs/errors.md lists every code; a test keeps the two in sync.
 */
export class BatchserveError extends Error {
  readonly code: string = 'BS_ERR_UNKNOWN';
  readonly httpStatus: number = 500;
  /** Process exit code when this error ends a CLI command. */
  readonly exitCode: number = 1;

  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

export class UsageError extends BatchserveError {
  override readonly code = 'BS_ERR_USAGE';
  override readonly httpStatus = 400;
  override readonly exitCode = 2;
}

// --- archives -------------------------------------------------------------

export class InvalidModelNameError extends BatchserveError {
  override readonly code = 'BS_ERR_INVALID_MODEL_NAME';
  override readonly httpStatus = 400;
  override readonly exitCode = 2;
}

export class OutputExistsError extends BatchserveError {
  override readonly code = 'BS_ERR_OUTPUT_EXISTS';
}

export class InputFileError extends BatchserveError {
  override readonly code = 'BS_ERR_INPUT_FILE';
}

export class ArchiveUnsafePathError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_UNSAFE_PATH';
  override readonly httpStatus = 400;
}

export class ArchiveSymlinkError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_SYMLINK';
  override readonly httpStatus = 400;
}

export class ArchiveDuplicateEntryError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_DUPLICATE_ENTRY';
  override readonly httpStatus = 400;
}

export class ArchiveTooManyEntriesError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_TOO_MANY_ENTRIES';
  override readonly httpStatus = 400;
}

export class ArchiveTooLargeError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_TOO_LARGE';
  override readonly httpStatus = 400;
}

export class ArchiveCorruptError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_CORRUPT';
  override readonly httpStatus = 400;
}

export class ArchiveManifestError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_MANIFEST';
  override readonly httpStatus = 400;
}

export class ArchiveMissingFileError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_MISSING_FILE';
  override readonly httpStatus = 400;
}

export class ArchiveIntegrityError extends BatchserveError {
  override readonly code = 'BS_ERR_ARCHIVE_INTEGRITY';
  override readonly httpStatus = 400;
}

// --- config, model, handler -------------------------------------------------

export class ConfigInvalidError extends BatchserveError {
  override readonly code = 'BS_ERR_CONFIG_INVALID';
  override readonly httpStatus = 400;
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

export class ModelSignatureMismatchError extends BatchserveError {
  override readonly code = 'BS_ERR_MODEL_SIGNATURE_MISMATCH';
  override readonly httpStatus = 400;
  readonly problems: readonly string[];

  constructor(source: string, problems: readonly string[]) {
    super(`${source} disagrees with the model: ${problems.join('; ')}`);
    this.problems = problems;
  }
}

export class ModelLoadError extends BatchserveError {
  override readonly code = 'BS_ERR_MODEL_LOAD';
}

export class HandlerInvalidError extends BatchserveError {
  override readonly code = 'BS_ERR_HANDLER_INVALID';
  override readonly httpStatus = 400;
}

export class InferenceInputError extends BatchserveError {
  override readonly code = 'BS_ERR_INFERENCE_INPUT';
  override readonly httpStatus = 400;
}

// --- serving ---------------------------------------------------------------

export class ModelNotFoundError extends BatchserveError {
  override readonly code = 'BS_ERR_MODEL_NOT_FOUND';
  override readonly httpStatus = 404;
}

export class ModelConflictError extends BatchserveError {
  override readonly code = 'BS_ERR_MODEL_EXISTS';
  override readonly httpStatus = 409;
}

/** The model's `version_policy` does not keep the version being loaded. */
export class VersionPolicyError extends BatchserveError {
  override readonly code = 'BS_ERR_VERSION_POLICY';
  override readonly httpStatus = 409;
}

/** A canary is running where none may be, or none is running where one must be. */
export class CanaryConflictError extends BatchserveError {
  override readonly code = 'BS_ERR_CANARY_CONFLICT';
  override readonly httpStatus = 409;
}

export class CanaryNotFoundError extends BatchserveError {
  override readonly code = 'BS_ERR_CANARY_NOT_FOUND';
  override readonly httpStatus = 404;
}

export class ModelNotReadyError extends BatchserveError {
  override readonly code = 'BS_ERR_MODEL_NOT_READY';
  override readonly httpStatus = 503;
}

export class BatchTooLargeError extends BatchserveError {
  override readonly code = 'BS_ERR_BATCH_TOO_LARGE';
  override readonly httpStatus = 400;
}

export class QueueFullError extends BatchserveError {
  override readonly code = 'BS_ERR_QUEUE_FULL';
  override readonly httpStatus = 503;
}

export class QueueTimeoutError extends BatchserveError {
  override readonly code = 'BS_ERR_QUEUE_TIMEOUT';
  override readonly httpStatus = 503;
}

/** The client went away while its request was queued; nothing is sent back. */
export class RequestCancelledError extends BatchserveError {
  override readonly code = 'BS_ERR_REQUEST_CANCELLED';
  override readonly httpStatus = 499;
}

export class InferenceFailedError extends BatchserveError {
  override readonly code = 'BS_ERR_INFERENCE_FAILED';
  override readonly httpStatus = 500;
}

export class RouteNotFoundError extends BatchserveError {
  override readonly code = 'BS_ERR_ROUTE_NOT_FOUND';
  override readonly httpStatus = 404;
}

export class MethodNotAllowedError extends BatchserveError {
  override readonly code = 'BS_ERR_METHOD_NOT_ALLOWED';
  override readonly httpStatus = 405;
  readonly allowed: readonly string[];

  constructor(method: string, path: string, allowed: readonly string[]) {
    super(`${method} is not allowed on ${path}; use ${allowed.join(' or ')}`);
    this.allowed = allowed;
  }
}

export class PayloadTooLargeError extends BatchserveError {
  override readonly code = 'BS_ERR_PAYLOAD_TOO_LARGE';
  override readonly httpStatus = 413;
}

export class UnsupportedMediaTypeError extends BatchserveError {
  override readonly code = 'BS_ERR_UNSUPPORTED_MEDIA_TYPE';
  override readonly httpStatus = 415;
}

export class UnauthorizedError extends BatchserveError {
  override readonly code = 'BS_ERR_UNAUTHORIZED';
  override readonly httpStatus = 401;
}

export class ForbiddenError extends BatchserveError {
  override readonly code = 'BS_ERR_FORBIDDEN';
  override readonly httpStatus = 403;
}

// --- management clients ----------------------------------------------------

/** A CLI command's call to the management API failed: unreachable, or answered with an error. */
export class ManagementCallError extends BatchserveError {
  override readonly code = 'BS_ERR_MANAGEMENT_CALL';
  override readonly httpStatus = 502;
}

// --- bench -----------------------------------------------------------------

/** `bench --fail-on` or `--baseline` found violations; the message lists each. */
export class BenchGateError extends BatchserveError {
  override readonly code = 'BS_ERR_BENCH_GATE';
  override readonly httpStatus = 400;
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
  ArchiveMissingFileError,
  ArchiveIntegrityError,
  ConfigInvalidError,
  ModelSignatureMismatchError,
  ModelLoadError,
  HandlerInvalidError,
  InferenceInputError,
  ModelNotFoundError,
  ModelConflictError,
  VersionPolicyError,
  CanaryConflictError,
  CanaryNotFoundError,
  ModelNotReadyError,
  BatchTooLargeError,
  QueueFullError,
  QueueTimeoutError,
  RequestCancelledError,
  InferenceFailedError,
  RouteNotFoundError,
  MethodNotAllowedError,
  PayloadTooLargeError,
  UnsupportedMediaTypeError,
  UnauthorizedError,
  ForbiddenError,
  ManagementCallError,
  BenchGateError,
] as const;
