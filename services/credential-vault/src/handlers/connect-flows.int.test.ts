import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createBus, type Bus } from '@latchkey/bus';
import { vaultContracts, type RequestOf } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { freePort, serviceEnvironment, startMongo, startNats, startOAuthServer, type TestMongo, type TestNats, type TestOAuthServer } from '@latchkey/testing';
import { configSchema } from '../config.js';
import { startVault } from '../start-vault.js';

/**
 * An end user's connect flows as the gateway relays them, against the vault wired as main.ts
 * wires it and a real OAuth 2 server on loopback: what an end user (who holds the session token
 * and types whatever they like) can make the vault do, and what the vault tells them.
 */

const logger = createLogger({ service: 'test', silent: true });
const environment_id = 'env_connect_flows';
const REDIRECT_URI = 'http://127.0.0.1:9/oauth/callback';

let nats: TestNats;
let mongo: TestMongo;
let oauth: TestOAuthServer;
let vault: RunningService<void>;
let gateway: Bus;

/**
 * The catalog: a provider with a tenant per subdomain (as Zendesk), its API-key twin whose
 * account id goes in a header (not a host: only its pattern checks it), and self-hosted ones
 * whose token URL's whole host is a connection config field (as Keycloak).
 */
function providersFile(): string {
  const port = new URL(oauth.url).port;
  const yaml = `
tenant-oauth:
  display_name: Tenant OAuth
  categories: [test]
  auth_mode: OAUTH2
  authorization_url: http://\${connectionConfig.subdomain}.tenant.test:${port}/authorize
  token_url: ${oauth.tokenUrl}
  connection_configuration: [subdomain]
  connection_config:
    subdomain: { type: string, pattern: '^[a-z0-9-]+$' }
tenant-keys:
  display_name: Tenant keys
  categories: [test]
  auth_mode: API_KEY
  proxy:
    base_url: https://\${connectionConfig.subdomain}.tenant.test
    headers:
      X-Api-Key: \${apiKey}
      X-Account: \${connectionConfig.account_id}
  connection_configuration: [subdomain, account_id]
  connection_config:
    subdomain: { type: string, pattern: '^[a-z0-9-]+$' }
    account_id: { type: string, pattern: '^[0-9]+$' }
self-hosted:
  display_name: Self-hosted OAuth
  categories: [test]
  auth_mode: OAUTH2
  authorization_url: http://\${connectionConfig.host}/authorize
  token_url: http://\${connectionConfig.host}/token
  connection_configuration: [host]
  connection_config:
    host: { type: string, pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$' }
self-hosted-oauth1:
  display_name: Self-hosted OAuth 1
  categories: [test]
  auth_mode: OAUTH1
  request_url: http://\${connectionConfig.host}/request_token
  authorization_url: http://\${connectionConfig.host}/authorize
  token_url: http://\${connectionConfig.host}/access_token
  connection_configuration: [host]
  connection_config:
    host: { type: string, pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$' }
self-hosted-cc:
  display_name: Self-hosted client credentials
  categories: [test]
  auth_mode: OAUTH2_CC
  token_url: http://\${connectionConfig.host}/token
  connection_configuration: [host]
  connection_config:
    host: { type: string, pattern: '^[A-Za-z0-9.-]+(:[0-9]+)?$' }
`;
  const file = join(mkdtempSync(join(tmpdir(), 'latchkey-connect-flows-')), 'providers.yaml');
  writeFileSync(file, yaml);
  return file;
}

beforeAll(async () => {
  [nats, mongo, oauth] = await Promise.all([startNats(), startMongo(), startOAuthServer()]);
  const config = configSchema.parse(
    serviceEnvironment('credential-vault', nats, mongo.uri, {
      ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`,
      PROVIDERS_FILE: providersFile(),
      // The loopback OAuth server only: every other private or loopback address stays refused.
      PROXY_ALLOW_CIDRS: '127.0.0.1/32',
    }),
  );
  vault = await runService({ service: 'credential-vault', config, start: startVault, handleSignals: false });
  gateway = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('gateway'), logger, requestTimeoutMs: 10_000 });
  const client = { client_id: 'test-client', client_secret: 'test-secret' };
  for (const [provider, unique_key] of [['tenant-oauth', 'tenant'], ['tenant-keys', 'keys'], ['self-hosted', 'selfhosted'], ['self-hosted-oauth1', 'selfhosted-oauth1'], ['self-hosted-cc', 'selfhosted-cc']] as const) {
    await gateway.request(vaultContracts.createIntegration, { environment_id, provider, unique_key, credentials: client });
  }
}, 60_000);

afterAll(async () => {
  await gateway?.drain();
  await vault?.runtime.mongo.dropDatabase().catch(() => undefined);
  await vault?.shutdown();
  await Promise.all([nats?.dispose(), mongo?.dispose(), oauth?.close()]);
});

type SessionRequest = Omit<RequestOf<typeof vaultContracts.createConnectSession>, 'environment_id'>;

async function sessionToken(request: SessionRequest = {}): Promise<string> {
  return (await gateway.request(vaultContracts.createConnectSession, { environment_id, ...request })).token;
}

/** What the vault answered instead of a result: the error the gateway shows the end user. */
async function refusal(answer: Promise<unknown>): Promise<AppError> {
  const error = await answer.then(() => undefined, (thrown: unknown) => thrown);
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

/**
 * The end user's consent at the loopback server, reached at the authorization URL's path and
 * query (its host names a tenant, which on loopback is this one server): the code it hands back.
 */
async function consent(authorizationUrl: string): Promise<{ state: string; code: string }> {
  const answer = await fetch(`${oauth.authorizationUrl}${new URL(authorizationUrl).search}`, { redirect: 'manual' });
  const back = new URL(answer.headers.get('location') ?? '');
  return { state: back.searchParams.get('state') ?? '', code: back.searchParams.get('code') ?? '' };
}

async function storedConnection(provider_config_key: string, connection_id: string) {
  return gateway.request(vaultContracts.getConnection, {
    environment_id,
    reader: { key_id: 'key-1' },
    connection_id,
    provider_config_key,
    include_credentials: true,
    include_refresh_token: false,
    force_refresh: false,
    refresh_vendor_app_jwt_token: false,
  });
}

describe('a token endpoint at a host the end user named', () => {
  // A self-hosted provider's host is the end user's to name when they bring their own OAuth
  // client, and the vault resolves it in our network. Were a refused address told apart from a
  // name that does not resolve or a port that does not answer, the end user could map our
  // internal DNS: which names exist, and which of them resolve to private ranges. The policy
  // allows 127.0.0.1 only: the other loopback and private literals are refused before any
  // socket, the `.invalid` names resolve nowhere, and the closed port on 127.0.0.1 refuses.
  let hosts: string[];
  beforeAll(async () => {
    hosts = ['127.0.0.2:4701', '10.0.0.1:80', '169.254.169.254:80', 'nowhere.invalid', 'sso.latchkey.invalid:8443', `127.0.0.1:${await freePort()}`];
  });
  const leaks = /loopback|private|link-local|metadata|range|allowed|resolve|dns|not_found|refused|127\.0\.0|10\.0\.0\.1|169\.254|invalid|CIDR/i;

  /** What the end user hears for each host: one answer for all of them, naming none of it. */
  async function toldFor(attempt: (host: string) => Promise<unknown>): Promise<Record<string, unknown>> {
    const told: Record<string, unknown> = {};
    for (const host of hosts) {
      const error = await refusal(attempt(host));
      told[host] = { ...error.toBody(), status: error.status };
    }
    const first = told[hosts[0]!];
    expect(told).toEqual(Object.fromEntries(hosts.map((host) => [host, first])));
    expect(JSON.stringify(first)).not.toMatch(leaks);
    return first as Record<string, unknown>;
  }

  it("is one answer to the end user of an OAuth 2 flow's code exchange, refused or unreachable", async () => {
    const token = await sessionToken({
      allowed_integrations: ['selfhosted'],
      integrations_config_defaults: { selfhosted: { connection_config: { oauth_client_id_override: '', oauth_client_secret_override: '' } } },
    });
    const told = await toldFor(async (host) => {
      const { url } = await gateway.request(vaultContracts.startOAuth, {
        token,
        integration: 'selfhosted',
        redirect_uri: REDIRECT_URI,
        connection_config: { host },
        client_override: { client_id: 'my-own-client', client_secret: 'my-own-secret' },
      });
      return gateway.request(vaultContracts.finishOAuth, { state: new URL(url).searchParams.get('state') ?? '', code: 'a-code' });
    });
    expect(told).toMatchObject({ code: 'refresh_token_external_error', status: 424, payload: { error: 'unreachable', environment_id } });
  });

  it("is the same one answer to the end user of an OAuth 1 flow's temporary-token request", async () => {
    const token = await sessionToken({
      allowed_integrations: ['selfhosted-oauth1'],
      integrations_config_defaults: { 'selfhosted-oauth1': { connection_config: { oauth_client_id_override: '', oauth_client_secret_override: '' } } },
    });
    const told = await toldFor((host) =>
      gateway.request(vaultContracts.startOAuth, {
        token,
        integration: 'selfhosted-oauth1',
        redirect_uri: REDIRECT_URI,
        connection_config: { host },
        client_override: { client_id: 'my-own-key', client_secret: 'my-own-secret' },
      }),
    );
    expect(told).toEqual({ code: 'refresh_token_external_error', status: 424, message: expect.any(String), payload: { error: 'unreachable' } });
  });

  it('is one answer to the end user of an OAuth 2 client-credentials form, refused or unreachable', async () => {
    const token = await sessionToken({ allowed_integrations: ['selfhosted-cc'] });
    const told = await toldFor((host) =>
      gateway.request(vaultContracts.connectClientCredentials, { token, integration: 'selfhosted-cc', client_id: 'mine', client_secret: 'my-secret', connection_config: { host } }),
    );
    expect(told).toEqual({ code: 'connection_test_failed', status: 400, message: expect.any(String), payload: { error: 'unreachable' } });
  });
});

describe('connection config an end user types in', () => {
  it('is text: an array for a field with a pattern is refused before it reaches the vault', async () => {
    const token = await sessionToken({ allowed_integrations: ['keys'] });
    // String(['123']) is '123', which the pattern takes; the proxy's header template would then meet an array.
    const request = { token, integration: 'keys', credentials: { type: 'API_KEY' as const, apiKey: 'k' }, connection_config: { subdomain: 'acme', account_id: ['123'] } };
    const error = await refusal(gateway.request(vaultContracts.connectWithSession, request as unknown as RequestOf<typeof vaultContracts.connectWithSession>));
    expect(error.code).toBe('invalid_body');
    expect(error.errors?.map((item) => item.path)).toContain('connection_config.account_id');
  });
});

describe('a reconnect', () => {
  it("runs the OAuth flow with the connection's own config: another subdomain is refused, and the tokens stay with the tenant the connection names", async () => {
    const first = await sessionToken({ allowed_integrations: ['tenant'] });
    const started = await gateway.request(vaultContracts.startOAuth, { token: first, integration: 'tenant', redirect_uri: REDIRECT_URI, connection_config: { subdomain: 'acme' } });
    expect(new URL(started.url).hostname).toBe('acme.tenant.test');
    const created = await gateway.request(vaultContracts.finishOAuth, await consent(started.url));
    const before = await storedConnection('tenant', created.connectionId);
    expect(before.connection_config).toEqual({ subdomain: 'acme' });

    const again = await sessionToken({ reconnect: { connection_id: created.connectionId, integration_id: 'tenant' } });
    // The end user types another tenant, to authorize there with the customer's OAuth client.
    const refused = await refusal(gateway.request(vaultContracts.startOAuth, { token: again, integration: 'tenant', redirect_uri: REDIRECT_URI, connection_config: { subdomain: 'evilcorp' } }));
    expect(refused.code).toBe('invalid_body');
    expect(refused.errors).toEqual([expect.objectContaining({ code: 'not_allowed', path: 'connection_config.subdomain' })]);

    // Without config, or with the connection's own, the flow goes to the connection's tenant.
    const echoed = await gateway.request(vaultContracts.startOAuth, { token: again, integration: 'tenant', redirect_uri: REDIRECT_URI, connection_config: { subdomain: 'acme' } });
    expect(new URL(echoed.url).hostname).toBe('acme.tenant.test');
    const reconnect = await gateway.request(vaultContracts.startOAuth, { token: again, integration: 'tenant', redirect_uri: REDIRECT_URI });
    expect(new URL(reconnect.url).hostname).toBe('acme.tenant.test');
    const replaced = await gateway.request(vaultContracts.finishOAuth, await consent(reconnect.url));
    expect(replaced).toMatchObject({ connectionId: created.connectionId, operation: 'override' });
    const after = await storedConnection('tenant', created.connectionId);
    expect(after.connection_config).toEqual({ subdomain: 'acme' });
    expect(after.credentials?.['access_token']).not.toBe(before.credentials?.['access_token']);
  });

  it("sends the customer's client to no self-hosted host the end user named with their own client", async () => {
    const own = oauth.addClient({ client_id: 'end-user-client' });
    const host = new URL(oauth.url).host;
    const offered = { selfhosted: { connection_config: { oauth_client_id_override: '', oauth_client_secret_override: '' } } };
    const first = await sessionToken({ allowed_integrations: ['selfhosted'], integrations_config_defaults: offered });
    const ownClient = { client_id: own.client_id, client_secret: own.client_secret };
    const started = await gateway.request(vaultContracts.startOAuth, { token: first, integration: 'selfhosted', redirect_uri: REDIRECT_URI, connection_config: { host }, client_override: ownClient });
    const created = await gateway.request(vaultContracts.finishOAuth, await consent(started.url));

    // The connection keeps the end user's host; the integration's client is not the end user's to send there.
    const reconnect = { connection_id: created.connectionId, integration_id: 'selfhosted' };
    const customers = await sessionToken({ reconnect });
    const refused = await refusal(gateway.request(vaultContracts.startOAuth, { token: customers, integration: 'selfhosted', redirect_uri: REDIRECT_URI }));
    expect(refused.errors).toEqual([expect.objectContaining({ code: 'not_allowed', path: 'connection_config.host' })]);
    // With their own client again, the end user reconnects at their own host.
    const theirs = await sessionToken({ reconnect, integrations_config_defaults: offered });
    const again = await gateway.request(vaultContracts.startOAuth, { token: theirs, integration: 'selfhosted', redirect_uri: REDIRECT_URI, client_override: ownClient });
    expect(new URL(again.url).host).toBe(host);
    expect(new URL(again.url).searchParams.get('client_id')).toBe(own.client_id);
  });

  it("saves typed-in credentials only for the connection's own config", async () => {
    const first = await sessionToken({ allowed_integrations: ['keys'] });
    const created = await gateway.request(vaultContracts.connectWithSession, { token: first, integration: 'keys', credentials: { type: 'API_KEY', apiKey: 'acme-key' }, connection_config: { subdomain: 'acme' } });

    const again = await sessionToken({ reconnect: { connection_id: created.connectionId, integration_id: 'keys' } });
    const refused = await refusal(
      gateway.request(vaultContracts.connectWithSession, { token: again, integration: 'keys', credentials: { type: 'API_KEY', apiKey: 'evilcorp-key' }, connection_config: { subdomain: 'evilcorp' } }),
    );
    expect(refused.errors).toEqual([expect.objectContaining({ code: 'not_allowed', path: 'connection_config.subdomain' })]);
    // Nor may a reconnect add a field the connection was made without.
    const added = await refusal(
      gateway.request(vaultContracts.connectWithSession, { token: again, integration: 'keys', credentials: { type: 'API_KEY', apiKey: 'other-key' }, connection_config: { subdomain: 'acme', account_id: '123' } }),
    );
    expect(added.errors).toEqual([expect.objectContaining({ code: 'not_allowed', path: 'connection_config.account_id' })]);
    expect((await storedConnection('keys', created.connectionId)).credentials?.['apiKey']).toBe('acme-key');

    await gateway.request(vaultContracts.connectWithSession, { token: again, integration: 'keys', credentials: { type: 'API_KEY', apiKey: 'rotated-key' }, connection_config: { subdomain: 'acme' } });
    const after = await storedConnection('keys', created.connectionId);
    expect(after.credentials?.['apiKey']).toBe('rotated-key');
    expect(after.connection_config).toEqual({ subdomain: 'acme' });
  });
});
