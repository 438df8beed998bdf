/**
 * Every metric a Latchkey service exports, in one list: the metric's Prometheus name, kind,
 * labels and meaning. docs/operations.md ("Metrics") lists the same, and a test checks that the
 * dashboard and alert rules in deploy/ use only these names.
 *
 * Names follow the OpenTelemetry semantic conventions where one exists, translated the Prometheus
 * way (dots to underscores, unit suffix): `http.server.request.duration` is
 * `http_server_request_duration_seconds`. Latchkey's own live under `latchkey_`.
 *
 * Labels are closed lists or bounded values only: route templates, subject templates, catalog
 * provider keys, error codes, outcomes. Never an id, a URL, a customer-chosen name or a secret.
 */
export type MetricKind = 'counter' | 'gauge' | 'histogram';

export interface MetricSpec {
  kind: MetricKind;
  help: string;
  labels: readonly string[];
  /** Histograms: bucket upper bounds in seconds. */
  buckets?: readonly number[];
}

/** Request and call latencies: a few milliseconds to a minute. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60] as const;
/** Runs of syncs and actions: up to the function limits. */
const RUN_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300] as const;

export const METRICS = {
  // OpenTelemetry semantic conventions.
  http_server_request_duration_seconds: {
    kind: 'histogram',
    help: 'Duration of HTTP requests the gateway answered, by route template, method and status code.',
    labels: ['http_route', 'http_request_method', 'http_response_status_code'],
    buckets: LATENCY_BUCKETS,
  },
  messaging_client_operation_duration_seconds: {
    kind: 'histogram',
    help: 'Duration of NATS requests this service sent, by subject template; error_type is the error code of a failed one.',
    labels: ['messaging_system', 'messaging_operation_name', 'messaging_destination_name', 'error_type'],
    buckets: LATENCY_BUCKETS,
  },
  messaging_process_duration_seconds: {
    kind: 'histogram',
    help: 'Duration of handling one NATS request or JetStream message, by subject template; error_type is the error code of a failed one.',
    labels: ['messaging_system', 'messaging_operation_name', 'messaging_destination_name', 'error_type'],
    buckets: LATENCY_BUCKETS,
  },

  // Proxy.
  latchkey_proxy_upstream_duration_seconds: {
    kind: 'histogram',
    help: 'Duration of calls to provider APIs (each attempt), by catalog provider, method and status class (2xx..5xx, or error).',
    labels: ['provider', 'method', 'status_class'],
    buckets: LATENCY_BUCKETS,
  },
  latchkey_proxy_retries_total: { kind: 'counter', help: 'Upstream calls the proxy retried, by catalog provider.', labels: ['provider'] },
  latchkey_proxy_refused_addresses_total: {
    kind: 'counter',
    help: 'Upstream calls refused because the address is not public, by the kind of address range.',
    labels: ['range'],
  },
  latchkey_proxy_calls_shed_total: {
    kind: 'counter',
    help: 'Proxy calls a replica answered with an error of its own rather than carrying them through, by reason (in_flight_limit: refused at once, PROXY_MAX_IN_FLIGHT calls held; shutdown_deadline: still unanswered when a stopping replica could wait no longer).',
    labels: ['reason'],
  },

  // Credential vault.
  latchkey_vault_refreshes_total: { kind: 'counter', help: 'Credential refreshes this replica made, by outcome (success, failed, deferred: the token endpoint failed for now and the still-valid token was handed out; superseded: a newer refresh stored first; recovered: stored the answer a replica got and died before storing).', labels: ['outcome'] },
  latchkey_vault_refresh_lock_wait_seconds: {
    kind: 'histogram',
    help: 'Time a refresh waited for the lock of its connection (another replica refreshing it).',
    labels: [],
    buckets: LATENCY_BUCKETS,
  },
  latchkey_vault_credential_reads_total: {
    kind: 'counter',
    help: 'Plaintext credential reads served (each audited), by purpose (proxy, fetch, import).',
    labels: ['purpose'],
  },

  // Webhook router.
  latchkey_webhooks_inbound_total: { kind: 'counter', help: 'Provider webhooks recorded, by outcome (forwarded, not_forwarded, rejected).', labels: ['outcome'] },
  latchkey_webhook_deliveries_total: {
    kind: 'counter',
    help: 'Webhook delivery jobs handled, by outcome (delivered, failed for good, retrying, held by an open circuit or a busy URL).',
    labels: ['outcome'],
  },
  latchkey_webhook_delivery_attempts_total: { kind: 'counter', help: 'HTTP attempts to deliver a webhook to a customer endpoint.', labels: [] },
  latchkey_webhook_backlog: {
    kind: 'gauge',
    help: 'Messages waiting for a webhook consumer (JetStream num_pending), sampled at scrape, by queue (durable name).',
    labels: ['queue'],
  },
  latchkey_webhook_parked: {
    kind: 'gauge',
    help: "Deliveries parked in the router's database, waiting out a retry longer than WEBHOOK_PARK_AFTER_MS or an open circuit, all replicas together, sampled at scrape.",
    labels: [],
  },
  latchkey_webhook_breaker_state: {
    kind: 'gauge',
    help: 'Customer URLs whose delivery circuit is not closed, by state (failing: failures below the threshold, open, half_open: probing), per replica.',
    labels: ['state'],
  },

  // Sync scheduler and action-runner.
  latchkey_sync_runs_total: { kind: 'counter', help: 'Sync run attempts, by outcome (success, error, retrying: a service was away and the run comes back, handed_back: its replica was stopping and another resumes it).', labels: ['outcome'] },
  latchkey_sync_run_duration_seconds: { kind: 'histogram', help: 'Duration of sync run attempts, by outcome.', labels: ['outcome'], buckets: RUN_BUCKETS },
  latchkey_records_written_total: { kind: 'counter', help: 'Records written by syncs (added, updated, deleted).', labels: [] },
  latchkey_action_runs_total: { kind: 'counter', help: 'Function runs in the sandbox, by kind (action, sync, on-event, dryrun) and outcome (success, the error code, or handed_back: stopped as its replica stopped).', labels: ['kind', 'outcome'] },
  latchkey_action_run_duration_seconds: { kind: 'histogram', help: 'Duration of function runs, by kind.', labels: ['kind'], buckets: RUN_BUCKETS },
  latchkey_sandbox_timeouts_total: { kind: 'counter', help: 'Function runs stopped at their time limit.', labels: [] },
  latchkey_sandbox_memory_kills_total: { kind: 'counter', help: 'Function runs stopped at their memory limit.', labels: [] },

  // Every service's operations log.
  latchkey_operations_log_sent_total: { kind: 'counter', help: 'Operations of the operations log that JetStream stored, on their way to the gateway.', labels: [] },
  latchkey_operations_log_dropped_total: {
    kind: 'counter',
    help: 'Operations the operations log dropped, by reason (buffer_full: the bus slow or away; send_failed: their batch was not stored; invalid_environment: an environment id no page may hold).',
    labels: ['reason'],
  },

  // Gateway.
  latchkey_gateway_rate_limited_total: { kind: 'counter', help: 'API requests refused by the per-account rate limit.', labels: [] },
  latchkey_gateway_auth_failures_total: {
    kind: 'counter',
    help: 'Requests refused for their credentials, by error code (missing_auth_header, unknown_api_key, forbidden, auth_blocked, ...).',
    labels: ['code'],
  },
} as const satisfies Record<string, MetricSpec>;

export type MetricName = keyof typeof METRICS;
export type LabelsOf<N extends MetricName> = (typeof METRICS)[N]['labels'][number];
