import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { METRICS, type MetricName } from '@latchkey/metrics';
import { eventually, freePort, idOrSecretLabels, parsePrometheusText, sampleSum, startUpstreamApi, type PromFamily, type TestUpstreamApi } from '@latchkey/testing';
import type { ServiceName } from '@latchkey/contracts';
import { apiKeyProviderYaml, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';
import { ACME_PROVIDER_YAML, sendProviderWebhook, startReceiver, webhookEnvironment, type Receiver } from './support/webhooks.js';

/**
 * Every service's /metrics, scraped and parsed strictly as Prometheus text: the documented
 * metrics are there, they move with traffic, and no label carries an id or a secret.
 */
let stack: Stack;
let upstream: TestUpstreamApi;
let receiver: Receiver;
let metricsUrl: string;
const UPSTREAM_KEY = 'upstream-key-metrics-0123456789';
const CONNECTION_ID = 'conn-metrics-customer-7f3a';
const INTEGRATION = 'metrics-api';

/** What each service must export (besides the process and messaging metrics every one has). */
const EXPECTED: Record<ServiceName, readonly MetricName[]> = {
  gateway: ['http_server_request_duration_seconds', 'latchkey_gateway_auth_failures_total', 'latchkey_gateway_rate_limited_total'],
  proxy: ['latchkey_proxy_upstream_duration_seconds', 'latchkey_proxy_retries_total', 'latchkey_proxy_refused_addresses_total'],
  'credential-vault': ['latchkey_vault_refreshes_total', 'latchkey_vault_refresh_lock_wait_seconds', 'latchkey_vault_credential_reads_total'],
  'webhook-router': [
    'latchkey_webhooks_inbound_total',
    'latchkey_webhook_deliveries_total',
    'latchkey_webhook_delivery_attempts_total',
    'latchkey_webhook_backlog',
    'latchkey_webhook_parked',
    'latchkey_webhook_breaker_state',
  ],
  'action-runner': [
    'latchkey_action_runs_total',
    'latchkey_action_run_duration_seconds',
    'latchkey_sandbox_timeouts_total',
    'latchkey_sandbox_memory_kills_total',
    'latchkey_sync_runs_total',
    'latchkey_sync_run_duration_seconds',
    'latchkey_records_written_total',
  ],
  'sync-scheduler': [],
};

const urlOf = (service: ServiceName) => (service === 'gateway' ? metricsUrl : stack.services.find((proc) => proc.service === service)!.url);

async function scrape(service: ServiceName): Promise<Map<string, PromFamily>> {
  const response = await fetch(`${urlOf(service)}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheusText(await response.text());
}

const scrapeAll = async () => Object.fromEntries(await Promise.all(Object.keys(EXPECTED).map(async (service) => [service, await scrape(service as ServiceName)] as const))) as Record<ServiceName, Map<string, PromFamily>>;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

const proxy = (path: string, headers: Record<string, string> = {}) =>
  fetch(`${stack.url}/proxy${path}`, {
    headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': CONNECTION_ID, 'provider-config-key': INTEGRATION, ...headers },
  });

const dryRun = (body: string) =>
  api('POST', '/functions/dryruns', {
    provider_config_key: INTEGRATION,
    connection_id: CONNECTION_ID,
    source: `import { defineAction } from '@latchkey/functions';\nexport default defineAction({ name: 'probe', exec: async () => { ${body} } });`,
  });

beforeAll(async () => {
  upstream = await startUpstreamApi();
  receiver = await startReceiver();
  const metricsPort = await freePort();
  metricsUrl = `http://127.0.0.1:${metricsPort}`;
  stack = await startStack({
    // Only the endless loop means to meet FUNCTION_TIMEOUT_MS: 2 s was a bet on a loaded machine
    // for the run counted as a success.
    env: { PROVIDERS_FILE: writeProvidersFile(`${apiKeyProviderYaml(upstream.url)}${ACME_PROVIDER_YAML}`), PROXY_ALLOW_CIDRS: '127.0.0.1/32', FUNCTION_TIMEOUT_MS: '10000', FUNCTION_MEMORY_MB: '64' },
    serviceEnv: { gateway: { METRICS_PORT: String(metricsPort) }, 'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' } },
  });
  expect((await api('POST', '/integrations', { provider: 'loopback-api', unique_key: INTEGRATION, allowed_hosts: ['10.0.0.1'] })).status).toBe(201);
  const connection = await api('POST', '/connections', { provider_config_key: INTEGRATION, connection_id: CONNECTION_ID, credentials: { type: 'API_KEY', apiKey: UPSTREAM_KEY } });
  expect(connection.status).toBe(201);
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  await upstream?.close();
  await receiver?.close();
}, 30_000);

describe('/metrics', () => {
  it('is served by every service, the gateway on its own port and not on its API port', async () => {
    const all = await scrapeAll();
    for (const [service, names] of Object.entries(EXPECTED) as Array<[ServiceName, readonly MetricName[]]>) {
      const families = all[service];
      for (const name of [...names, 'process_cpu_seconds_total', 'nodejs_eventloop_lag_seconds', 'messaging_process_duration_seconds']) {
        expect({ service, name, present: families.has(name) }).toEqual({ service, name, present: true });
      }
      for (const name of names) expect(families.get(name)!.type).toBe(METRICS[name].kind);
    }
    expect((await fetch(`${stack.url}/metrics`)).status).toBe(404);
  }, 30_000);

  it('moves with traffic, with route and subject templates and bounded labels only', async () => {
    const before = await scrapeAll();

    // Gateway: two authentication failures and a few API calls.
    expect((await fetch(`${stack.url}/connections`)).status).toBe(401);
    expect((await http(`${stack.url}/connections`, { token: 'lk_sk_not-a-key-of-this-stack-0123456789abcdef' })).status).toBe(401);
    expect((await api('GET', `/connections/${CONNECTION_ID}?provider_config_key=${INTEGRATION}`)).status).toBe(200);
    expect((await api('GET', '/scripts/config')).status).toBe(200);
    // Proxy and vault: a call to the provider, and one to an address the policy refuses.
    expect((await proxy('/echo/items/42?page=2')).status).toBe(200);
    expect((await proxy('/echo', { 'base-url-override': 'http://10.0.0.1' })).status).toBeGreaterThanOrEqual(400);
    // Webhook router: a provider webhook for an integration that does not exist is recorded as rejected.
    const environments = await http(`${stack.url}/admin/environments`, { token: stack.adminToken });
    const publicId = environments.json.data.find((environment: { name: string }) => environment.name === 'dev').public_id as string;
    const webhook = await fetch(`${stack.url}/webhook/${publicId}/no-such-integration`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"hello":1}' });
    expect(webhook.status).toBeLessThan(500);
    // Action-runner: a run that succeeds and one stopped at its time limit.
    expect((await dryRun('return 1 + 1;')).json).toMatchObject({ success: true });
    expect((await dryRun('for (;;) {}')).json).toMatchObject({ success: false, error: { code: 'function_timed_out' } });

    const grew = (after: Record<ServiceName, Map<string, PromFamily>>, service: ServiceName, family: string, sample: string, labels: Record<string, string> = {}) =>
      sampleSum(after[service], family, sample, labels) - sampleSum(before[service], family, sample, labels);

    // The webhook is handled from its queue: wait for it.
    const after = await eventually(
      async () => {
        const now = await scrapeAll();
        return grew(now, 'webhook-router', 'latchkey_webhooks_inbound_total', 'latchkey_webhooks_inbound_total', { outcome: 'rejected' }) === 1 ? now : undefined;
      },
      20_000,
      'the rejected webhook to be counted',
    );

    const requests = 'http_server_request_duration_seconds';
    expect(grew(after, 'gateway', requests, `${requests}_count`, { http_route: '/connections/{connectionId}', http_request_method: 'GET', http_response_status_code: '200' })).toBe(1);
    expect(grew(after, 'gateway', requests, `${requests}_count`, { http_route: '/proxy/{path}', http_request_method: 'GET' })).toBe(2);
    expect(grew(after, 'gateway', 'latchkey_gateway_auth_failures_total', 'latchkey_gateway_auth_failures_total', { code: 'missing_auth_header' })).toBe(1);
    expect(grew(after, 'gateway', 'latchkey_gateway_auth_failures_total', 'latchkey_gateway_auth_failures_total', { code: 'unknown_api_key' })).toBe(1);

    expect(grew(after, 'proxy', 'messaging_process_duration_seconds', 'messaging_process_duration_seconds_count', { messaging_destination_name: 'proxy.request', error_type: '' })).toBe(1);
    const upstreamCalls = 'latchkey_proxy_upstream_duration_seconds';
    expect(grew(after, 'proxy', upstreamCalls, `${upstreamCalls}_count`, { provider: 'loopback-api', method: 'GET', status_class: '2xx' })).toBe(1);
    expect(grew(after, 'proxy', 'latchkey_proxy_refused_addresses_total', 'latchkey_proxy_refused_addresses_total', { range: 'private' })).toBe(1);
    expect(grew(after, 'credential-vault', 'latchkey_vault_credential_reads_total', 'latchkey_vault_credential_reads_total', { purpose: 'proxy' })).toBeGreaterThanOrEqual(1);
    const processed = 'messaging_process_duration_seconds';
    expect(grew(after, 'credential-vault', processed, `${processed}_count`, { messaging_system: 'nats', messaging_destination_name: 'vault.credentials.get', error_type: '' })).toBeGreaterThanOrEqual(1);
    expect(grew(after, 'sync-scheduler', processed, `${processed}_count`)).toBeGreaterThanOrEqual(1);
    // Sampled from JetStream at scrape: both queues are there, and empty by now.
    expect(after['webhook-router'].get('latchkey_webhook_backlog')!.samples.map((sample) => [sample.labels['queue'], sample.value])).toEqual(
      expect.arrayContaining([
        ['webhook-router-inbound', 0],
        ['webhook-router-deliveries', 0],
      ]),
    );

    expect(grew(after, 'action-runner', 'latchkey_action_runs_total', 'latchkey_action_runs_total', { kind: 'dryrun', outcome: 'success' })).toBe(1);
    expect(grew(after, 'action-runner', 'latchkey_action_runs_total', 'latchkey_action_runs_total', { kind: 'dryrun', outcome: 'function_timed_out' })).toBe(1);
    expect(grew(after, 'action-runner', 'latchkey_sandbox_timeouts_total', 'latchkey_sandbox_timeouts_total')).toBe(1);

    // No label value is an id, a key, a token, a URL with a query, or anything the test sent as a secret.
    const secrets = [stack.bootstrapKey, stack.adminToken, UPSTREAM_KEY, CONNECTION_ID, publicId, '/echo/items/42'];
    for (const service of Object.keys(EXPECTED) as ServiceName[]) expect({ service, found: idOrSecretLabels(after[service], secrets) }).toEqual({ service, found: [] });
  }, 60_000);

  it('counts provider webhooks forwarded and their deliveries and attempts', async () => {
    const before = await scrape('webhook-router');
    const env = await webhookEnvironment(stack, 'metrics', receiver.url);
    const response = await sendProviderWebhook(stack, env.publicId, { marker: 'metrics' }, { secret: env.webhookSecret });
    expect(response.status).toBe(200);
    await receiver.waitFor((item) => item.body.includes('"marker":"metrics"'));
    const grew = (after: Map<string, PromFamily>, family: string, labels: Record<string, string> = {}) => sampleSum(after, family, family, labels) - sampleSum(before, family, family, labels);
    const after = await eventually(
      async () => {
        const now = await scrape('webhook-router');
        return grew(now, 'latchkey_webhook_deliveries_total', { outcome: 'delivered' }) >= 1 ? now : undefined;
      },
      20_000,
      'the delivery to be counted',
    );
    expect(grew(after, 'latchkey_webhooks_inbound_total', { outcome: 'forwarded' })).toBe(1);
    expect(grew(after, 'latchkey_webhook_deliveries_total', { outcome: 'delivered' })).toBe(1);
    expect(grew(after, 'latchkey_webhook_delivery_attempts_total')).toBe(1);
    expect(sampleSum(after, 'latchkey_webhook_breaker_state', 'latchkey_webhook_breaker_state', { state: 'open' })).toBe(0);
    expect(idOrSecretLabels(after, [env.publicId, env.webhookSecret, env.apiKey])).toEqual([]);
  }, 60_000);
});
