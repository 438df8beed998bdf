export { createLogger, useTraceIds, type Logger, type LoggerOptions } from './create-logger.js';
export { REDACTED, isSecretKey, redact } from './redact.js';
export {
  currentContext,
  currentRequestId,
  isValidRequestId,
  newRequestId,
  requestIdFrom,
  runWithContext,
  type RequestContext,
} from './request-context.js';
