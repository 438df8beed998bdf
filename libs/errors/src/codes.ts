/**
 * The one error-code table. Every error that leaves a service carries one of these codes; the
 * gateway looks the HTTP status up here and never switches on codes itself. `retryable` decides
 * nak (retry later) versus term on JetStream and tells clients whether a retry can succeed.
 */
export const ERROR_CODES = {
  // authentication and authorization
  missing_auth_header: { status: 401, retryable: false },
  malformed_auth_header: { status: 401, retryable: false },
  unknown_api_key: { status: 401, retryable: false },
  unknown_connect_session_token: { status: 401, retryable: false },
  unknown_admin_token: { status: 401, retryable: false },
  forbidden: { status: 403, retryable: false },

  // request shape
  invalid_content_type: { status: 415, retryable: false },
  invalid_json: { status: 400, retryable: false },
  invalid_body: { status: 400, retryable: false },
  invalid_query_params: { status: 400, retryable: false },
  invalid_headers: { status: 400, retryable: false },
  invalid_uri_params: { status: 400, retryable: false },
  payload_too_large: { status: 413, retryable: false },
  route_not_found: { status: 404, retryable: false },
  method_not_allowed: { status: 405, retryable: false },

  // resources
  unknown_environment: { status: 404, retryable: false },
  unknown_provider: { status: 404, retryable: false },
  unknown_provider_config: { status: 404, retryable: false },
  unknown_connection: { status: 404, retryable: false },
  not_found: { status: 404, retryable: false },
  duplicate_environment: { status: 409, retryable: false },
  duplicate_provider_config: { status: 409, retryable: false },
  integration_has_connections: { status: 409, retryable: false },

  // credentials and refresh
  refresh_token_external_error: { status: 424, retryable: false },
  connection_refresh_exhausted: { status: 424, retryable: false },
  connection_refresh_backoff: { status: 424, retryable: true },
  /** The provider refused credentials an end user entered (verification request, token request). */
  connection_test_failed: { status: 400, retryable: false },

  // proxy
  upstream_not_allowed: { status: 400, retryable: false },
  upstream_timeout: { status: 504, retryable: true },
  upstream_unreachable: { status: 502, retryable: true },

  // functions and actions
  unknown_function: { status: 404, retryable: false },
  unknown_action: { status: 404, retryable: false },
  unknown_action_run: { status: 404, retryable: false },
  function_compilation_failed: { status: 400, retryable: false },
  /** The customer's function threw; the message is the function's own. */
  function_failed: { status: 500, retryable: false },
  function_timed_out: { status: 504, retryable: false },
  function_memory_exceeded: { status: 500, retryable: false },
  action_output_too_large: { status: 400, retryable: false },

  // syncs and records
  unknown_sync: { status: 404, retryable: false },
  unknown_sync_variant: { status: 404, retryable: false },
  /** The spec's code for a variant that could not be made (it exists already). */
  failed_sync_variant_creation: { status: 409, retryable: false },
  /** A batch of records had invalid ones; the valid ones were written. */
  invalid_records: { status: 400, retryable: false },
  invalid_frequency: { status: 400, retryable: false },

  // limits and availability
  too_many_requests: { status: 429, retryable: true },
  service_unavailable: { status: 503, retryable: true },
  internal_error: { status: 500, retryable: true },
} as const satisfies Record<string, { status: number; retryable: boolean }>;

export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODES, value);
}

export function statusOf(code: ErrorCode): number {
  return ERROR_CODES[code].status;
}

export function isRetryable(code: ErrorCode): boolean {
  return ERROR_CODES[code].retryable;
}
