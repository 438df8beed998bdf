/** One field-level problem, as the API reports it. */
export interface LatchkeyErrorItem {
  code: string;
  message: string;
  path: string;
}

/**
 * Every failed call rejects with this: the HTTP status, the API's error code (`unknown_connection`,
 * `forbidden`, …) and message, and, where the API gave them, field errors and a payload.
 */
export class LatchkeyError extends Error {
  override readonly name = 'LatchkeyError';
  readonly status: number;
  readonly code: string;
  readonly errors: LatchkeyErrorItem[] | undefined;
  readonly payload: Record<string, unknown> | undefined;
  /** Seconds to wait before retrying, from `Retry-After` (429 and 503). */
  readonly retryAfter: number | undefined;

  constructor(init: {
    status: number;
    code: string;
    message: string;
    errors?: LatchkeyErrorItem[] | undefined;
    payload?: Record<string, unknown> | undefined;
    retryAfter?: number | undefined;
  }) {
    super(init.message);
    this.status = init.status;
    this.code = init.code;
    this.errors = init.errors;
    this.payload = init.payload;
    this.retryAfter = init.retryAfter;
  }
}

/** Reads the API's error envelope (or the legacy `{message}` body) from a failed response. */
export function errorFromResponse(status: number, body: unknown, retryAfterHeader: string | undefined): LatchkeyError {
  const retryAfter = retryAfterHeader === undefined ? undefined : Number(retryAfterHeader);
  const envelope = (body as { error?: { code?: unknown; message?: unknown; errors?: unknown; payload?: unknown } } | null)?.error;
  if (envelope && typeof envelope === 'object') {
    return new LatchkeyError({
      status,
      code: typeof envelope.code === 'string' ? envelope.code : 'unknown_error',
      message: typeof envelope.message === 'string' ? envelope.message : `HTTP ${status}`,
      errors: Array.isArray(envelope.errors) ? (envelope.errors as LatchkeyErrorItem[]) : undefined,
      payload: envelope.payload && typeof envelope.payload === 'object' ? (envelope.payload as Record<string, unknown>) : undefined,
      retryAfter: Number.isFinite(retryAfter) ? retryAfter : undefined,
    });
  }
  const message = (body as { message?: unknown } | null)?.message;
  return new LatchkeyError({
    status,
    code: 'unknown_error',
    message: typeof message === 'string' ? message : `HTTP ${status}`,
    retryAfter: Number.isFinite(retryAfter) ? retryAfter : undefined,
  });
}
