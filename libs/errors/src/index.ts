export { ERROR_CODES, isErrorCode, isRetryable, statusOf, type ErrorCode } from './codes.js';
export { AppError, toAppError, type AppErrorOptions, type ErrorBody, type ErrorItem } from './app-error.js';
export { toErrorItems } from './zod-issues.js';
export { withRetries, type RetryOptions } from './with-retries.js';
