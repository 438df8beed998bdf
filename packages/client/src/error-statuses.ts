/**
 * The HTTP status of each error code Latchkey answers with, so the client can tell Latchkey's
 * own error envelope from a provider's answer on the proxy. The server's error table owns these
 * codes; this is its copy for a package that ships without the server's code, and
 * `error-statuses.test.ts` fails when the two differ.
 */
export const ERROR_STATUSES: Readonly<Record<string, number>> = {
  missing_auth_header: 401,
  malformed_auth_header: 401,
  unknown_api_key: 401,
  unknown_connect_session_token: 401,
  unknown_admin_token: 401,
  forbidden: 403,
  invalid_content_type: 415,
  invalid_json: 400,
  invalid_body: 400,
  invalid_query_params: 400,
  invalid_headers: 400,
  invalid_uri_params: 400,
  payload_too_large: 413,
  route_not_found: 404,
  method_not_allowed: 405,
  unknown_environment: 404,
  unknown_provider: 404,
  unknown_provider_config: 404,
  unknown_connection: 404,
  not_found: 404,
  duplicate_environment: 409,
  duplicate_provider_config: 409,
  integration_has_connections: 409,
  refresh_token_external_error: 424,
  connection_refresh_exhausted: 424,
  connection_refresh_backoff: 424,
  connection_test_failed: 400,
  upstream_not_allowed: 400,
  upstream_timeout: 504,
  upstream_unreachable: 502,
  unknown_function: 404,
  unknown_action: 404,
  unknown_action_run: 404,
  function_compilation_failed: 400,
  function_failed: 500,
  function_timed_out: 504,
  function_memory_exceeded: 500,
  action_output_too_large: 400,
  unknown_sync: 404,
  unknown_sync_variant: 404,
  failed_sync_variant_creation: 409,
  invalid_records: 400,
  invalid_frequency: 400,
  too_many_requests: 429,
  service_unavailable: 503,
  internal_error: 500,
};

/** Whether `code` is one of Latchkey's error codes, answered with `status`. */
export function isLatchkeyError(code: unknown, status: number): boolean {
  return typeof code === 'string' && Object.hasOwn(ERROR_STATUSES, code) && ERROR_STATUSES[code] === status;
}
