import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { eventually, startOAuthServer, type TestOAuthServer } from '@latchkey/testing';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './support/otlp-receiver.js';
import { writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';
import { ACME_PROVIDER_YAML, acmeSignature, startReceiver, webhookEnvironment, type Receiver } from './support/webhooks.js';

let stack: Stack;
let otlp: OtlpReceiver;
let oauth: TestOAuthServer;
let receiver: Receiver;
const clientSecret = `canary-client-secret-${randomBytes(12).toString('hex')}`;
const canaries: string[] = [clientSecret];
/** Every line the services printed, by service. */
const output: Array<{ service: string; text: string }> = [];

/** A caller's W3C trace context: a fresh trace id and the caller's own span id. */
function callerTrace() {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

const inTrace = (traceId: string) => otlp.spans.filter((span) => span.traceId === traceId);
const describeSpans = (spans: ReceivedSpan[]) => spans.map((span) => `${span.service}: ${span.name}`).sort();

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  oauth = await startOAuthServer({ clients: [{ client_id: 'trace-client', client_secret: clientSecret }] });
  receiver = await startReceiver();
  const providersFile = writeProvidersFile(`${ACME_PROVIDER_YAML}loopback-oauth:
  display_name: Loopback OAuth
  categories: [test]
  auth_mode: OAUTH2
  authorization_url: ${oauth.authorizationUrl}
  token_url: ${oauth.tokenUrl}
  proxy:
    base_url: ${oauth.url}/api
`);
  // Protobuf (the default) from most services, JSON from the proxy and the router: both encodings travel.
  const json = { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' };
  stack = await startStack({
    onOutput: (service, text) => output.push({ service, text }),
    env: { PROVIDERS_FILE: providersFile, PROXY_ALLOW_CIDRS: '127.0.0.1/32', OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_BSP_SCHEDULE_DELAY: '200' },
    serviceEnv: {
      proxy: json,
      'webhook-router': { ...json, WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    },
  });
}, 90_000);

afterAll(async () => {
  await stack?.dispose();
  await otlp?.close();
  await oauth?.close();
  await receiver?.close();
});

describe('traces', () => {
  it('follow a proxy call with a caller traceparent through the gateway, the proxy and the vault refresh', async () => {
    const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });
    await api('POST', '/integrations', { provider: 'loopback-oauth', unique_key: 'oauth', credentials: { client_id: 'trace-client', client_secret: clientSecret } });
    const redirectUri = 'http://127.0.0.1:9/callback';
    const authorize = await fetch(`${oauth.authorizationUrl}?response_type=code&client_id=trace-client&redirect_uri=${encodeURIComponent(redirectUri)}&state=s`, { redirect: 'manual' });
    const code = new URL(authorize.headers.get('location')!).searchParams.get('code')!;
    const issued = (await (
      await fetch(oauth.tokenUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: 'trace-client', client_secret: clientSecret }),
      })
    ).json()) as { access_token: string; refresh_token: string };
    canaries.push(issued.access_token, issued.refresh_token);
    const created = await api('POST', '/connections', {
      provider_config_key: 'oauth',
      connection_id: 'oauth',
      credentials: { type: 'OAUTH2', access_token: issued.access_token, refresh_token: issued.refresh_token, expires_at: new Date(Date.now() + 3600_000).toISOString(), raw: {} },
    });
    expect(created.status).toBe(201);
    const proxy = (traceparent?: string) =>
      fetch(`${stack.url}/proxy/profile?secret_query=${clientSecret}`, {
        headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'oauth', 'provider-config-key': 'oauth', ...(traceparent ? { traceparent } : {}) },
      });
    expect((await proxy()).status).toBe(200);

    // The provider forgets the access token: the proxy gets a 401, the vault refreshes, the proxy replays.
    oauth.revokeAccessTokens();
    oauth.stats.reset();
    const caller = callerTrace();
    const replayed = await proxy(caller.traceparent);
    expect(replayed.status).toBe(200);
    expect(oauth.stats.grants.refresh_token).toBe(1);

    const spans = await eventually(
      () => {
        const found = inTrace(caller.traceId);
        const has = (service: string, name: string) => found.some((span) => span.service === service && span.name === name);
        // Each process exports on its own schedule: wait until every span's parent has arrived too.
        const ids = new Set([caller.spanId, ...found.map((span) => span.spanId)]);
        const whole = found.every((span) => ids.has(span.parentSpanId));
        return whole && has('gateway', 'GET /proxy/*') && has('proxy', 'upstream GET') && has('credential-vault', 'vault token refresh') ? found : undefined;
      },
      20_000,
      `the proxy call's spans (have ${JSON.stringify(describeSpans(inTrace(caller.traceId)))})`,
    );
    const server = spans.find((span) => span.service === 'gateway' && span.name === 'GET /proxy/*')!;
    // The gateway continues the caller's span; every other span of the trace hangs below it.
    expect(server.parentSpanId).toBe(caller.spanId);
    expect(server.attributes).toMatchObject({ 'http.request.method': 'GET', 'http.route': '/proxy/*', 'http.response.status_code': 200 });
    // One tree: the gateway's span is the only child of the caller's.
    expect(spans.filter((span) => span.parentSpanId === caller.spanId)).toEqual([server]);
    const upstream = spans.filter((span) => span.service === 'proxy' && span.name === 'upstream GET');
    expect(upstream.map((span) => span.attributes['http.response.status_code']).sort()).toEqual([200, 401]);
    expect(upstream[0]!.attributes['server.address']).toBe('127.0.0.1');
    expect(spans.some((span) => span.service === 'credential-vault' && span.attributes['messaging.system'] === 'nats')).toBe(true);
    expect(spans.some((span) => span.service === 'credential-vault' && span.attributes['db.system.name'] === 'mongodb')).toBe(true);

    const refreshed = await api('GET', '/connections/oauth?provider_config_key=oauth');
    const fresh = refreshed.json?.credentials?.access_token as string | undefined;
    if (fresh) canaries.push(fresh);
  });

  it('follow a provider webhook from the gateway through the router to the delivery', async () => {
    const env = await webhookEnvironment(stack, 'traced', receiver.url);
    canaries.push(env.webhookSecret, env.signingKey, env.apiKey);
    const caller = callerTrace();
    const body = JSON.stringify({ marker: 'traced', account: { id: 'nobody' } });
    const sent = await fetch(`${stack.url}/webhook/${env.publicId}/acme`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-acme-signature-256': acmeSignature(env.webhookSecret, body), traceparent: caller.traceparent },
      body,
    });
    expect(sent.status).toBeLessThan(300);
    await receiver.waitFor((item) => item.json?.payload?.marker === 'traced');

    const spans = await eventually(
      () => {
        const found = inTrace(caller.traceId);
        const has = (service: string, name: string) => found.some((span) => span.service === service && span.name === name);
        const ids = new Set([caller.spanId, ...found.map((span) => span.spanId)]);
        const whole = found.every((span) => ids.has(span.parentSpanId));
        return whole && has('gateway', 'POST /webhook/*') && has('webhook-router', 'webhook delivery POST') ? found : undefined;
      },
      20_000,
      `the webhook's spans (have ${JSON.stringify(describeSpans(inTrace(caller.traceId)))})`,
    );
    expect(spans.find((span) => span.name === 'POST /webhook/*')!.parentSpanId).toBe(caller.spanId);
    const delivery = spans.find((span) => span.name === 'webhook delivery POST')!;
    expect(delivery.attributes).toMatchObject({ 'server.address': '127.0.0.1', 'http.response.status_code': 200 });
    // The router's handling of the stored job continues the gateway's trace.
    expect(spans.some((span) => span.service === 'webhook-router' && span.kind === 5 /* consumer */)).toBe(true);
  });

  it('put the trace id, span id and request id on the log lines of traced work', async () => {
    const env = await webhookEnvironment(stack, 'logged', receiver.url);
    const caller = callerTrace();
    const sent = await fetch(`${stack.url}/webhook/${env.publicId}/acme`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-acme-signature-256': 'sha256=forged', traceparent: caller.traceparent, 'x-request-id': 'traced-request-1' },
      body: JSON.stringify({ marker: 'forged' }),
    });
    expect(sent.status).toBeLessThan(300);
    const line = await eventually(
      () =>
        output
          .filter((item) => item.service === 'webhook-router')
          .flatMap((item) => item.text.split('\n'))
          .filter((text) => text.startsWith('{'))
          .map((text) => JSON.parse(text) as Record<string, unknown>)
          .find((entry) => entry['message'] === 'rejected a provider webhook' && entry['trace_id'] === caller.traceId),
      20_000,
      "the router's log line about the forged webhook",
    );
    expect(line).toMatchObject({ requestId: 'traced-request-1', span_id: expect.stringMatching(/^[0-9a-f]{16}$/) });
    const spans = await eventually(() => (inTrace(caller.traceId).some((span) => span.spanId === line['span_id']) ? inTrace(caller.traceId) : undefined), 20_000, 'the span of the log line');
    expect(spans.find((span) => span.spanId === line['span_id'])!.service).toBe('webhook-router');
  });

  it('export in both encodings and never a secret, token, query or credential', () => {
    expect([...otlp.encodings].sort()).toEqual(['json', 'protobuf']);
    const text = otlp.text();
    expect(text.length).toBeGreaterThan(0);
    for (const canary of [...canaries, stack.bootstrapKey, stack.adminToken]) expect(text).not.toContain(canary);
    expect(text).not.toContain('secret_query');
  });
});
