import winston from 'winston';
import { currentRequestId } from './request-context.js';
import { redact } from './redact.js';

export type Logger = winston.Logger;

export interface LoggerOptions {
  service: string;
  level?: string;
  /** Where lines go; stdout by default. Tests pass a stream to read what was logged. */
  stream?: NodeJS.WritableStream;
  /** Log nothing (tools and tests that provoke errors on purpose). */
  silent?: boolean;
}

// Winston keeps its own symbols (level, message, splat) on the info object; copy them through.
const redactSecrets = winston.format((info) => {
  const masked = redact({ ...info }) as Record<string, unknown>;
  for (const key of Object.keys(info)) {
    if (key !== 'level' && key !== 'message') delete (info as Record<string, unknown>)[key];
  }
  Object.assign(info, masked, { level: info.level, message: info.message });
  return info;
});

/**
 * Where the ids of the active trace come from, set by @latchkey/tracing while tracing is on
 * (this library does not depend on OpenTelemetry); undefined otherwise, and lines carry none.
 */
let traceIds: (() => { trace_id: string; span_id: string } | undefined) | undefined;

export function useTraceIds(source: typeof traceIds): void {
  traceIds = source;
}

const addRequestId = winston.format((info) => {
  if (info['requestId'] === undefined) {
    const requestId = currentRequestId();
    if (requestId !== undefined) info['requestId'] = requestId;
  }
  if (traceIds !== undefined && info['trace_id'] === undefined) {
    const ids = traceIds();
    if (ids !== undefined) Object.assign(info, ids);
  }
  return info;
});

/** JSON lines, one per event, with service, timestamp, request id and secrets masked. */
export function createLogger(options: LoggerOptions): Logger {
  const transport = options.stream
    ? new winston.transports.Stream({ stream: options.stream })
    : new winston.transports.Console();
  return winston.createLogger({
    level: options.level ?? 'info',
    defaultMeta: { service: options.service },
    format: winston.format.combine(
      winston.format.errors({ stack: true }),
      addRequestId(),
      redactSecrets(),
      winston.format.timestamp(),
      winston.format.json(),
    ),
    transports: [transport],
    silent: options.silent ?? false,
  });
}
