import { ERROR_CODES, isErrorCode, type ErrorCode } from './codes.js';

/** One item of a validation failure: which field, and what is wrong with it. */
export interface ErrorItem {
  code: string;
  message: string;
  path: string;
}

export interface AppErrorOptions {
  /** Validation problems, one per field. */
  errors?: ErrorItem[];
  /** Extra data the caller may act on. Never put secrets here: it reaches HTTP bodies. */
  payload?: Record<string, unknown>;
  cause?: unknown;
}

/** The wire form of an error, in HTTP bodies and NATS replies alike. */
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  errors?: ErrorItem[];
  payload?: Record<string, unknown>;
}

export class AppError extends Error {
  override readonly name = 'AppError';
  readonly code: ErrorCode;
  readonly errors: ErrorItem[] | undefined;
  readonly payload: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.errors = options.errors;
    this.payload = options.payload;
  }

  get status(): number {
    return ERROR_CODES[this.code].status;
  }

  get retryable(): boolean {
    return ERROR_CODES[this.code].retryable;
  }

  toBody(): ErrorBody {
    return {
      code: this.code,
      message: this.message,
      ...(this.errors === undefined ? {} : { errors: this.errors }),
      ...(this.payload === undefined ? {} : { payload: this.payload }),
    };
  }

  /** Rebuilds an error that crossed a process boundary; an unknown code becomes internal_error. */
  static fromBody(body: { code: string; message: string; errors?: ErrorItem[] | undefined; payload?: Record<string, unknown> | undefined }): AppError {
    const code = isErrorCode(body.code) ? body.code : 'internal_error';
    const options: AppErrorOptions = {};
    if (body.errors !== undefined) options.errors = body.errors;
    if (body.payload !== undefined) options.payload = body.payload;
    return new AppError(code, body.message, options);
  }
}

/**
 * Turns anything thrown into an AppError. Unknown errors become `internal_error` with a generic
 * message: their text may hold secrets or internals, so it is logged, never sent.
 */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  return new AppError('internal_error', 'An internal error occurred', { cause: error });
}
