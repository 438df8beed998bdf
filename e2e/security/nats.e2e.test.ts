import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import mongoose from 'mongoose';
import { AuthorizationError, connect, PermissionViolationError, type NatsConnection } from '@nats-io/transport-node';
import { gatewayContracts, inboxPrefixOf, proxyContracts, vaultContracts, type ServiceName } from '@latchkey/contracts';
import { startUpstreamApi, type TestUpstreamApi } from '@latchkey/testing';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from '../support/providers.js';
import { http, startStack, type NatsSnoop, type Stack } from '../support/stack.js';

/**
 * Attacks on the message bus by anything that reaches NATS: a process with no identity, with a
 * wrong password, or holding one service's identity and reaching for another's subjects. The
 * stack runs the NATS authorization deployments run (generated from the contracts). A canary
 * API key is planted in a connection's credentials; no attacker may ever see it.
 */
const CANARY = `canary-nats-${randomBytes(16).toString('hex')}`;
const CREDENTIALS_SUBJECT = proxyContracts.getCredentials.subject;

let stack: Stack;
let upstream: TestUpstreamApi;
let snoop: NatsSnoop;
let environmentId: string;
const attackers: NatsConnection[] = [];
/** Everything any attacker connection received, to search for the canary. */
const attackerSaw: string[] = [];

function login(identity: ServiceName, password?: string) {
  const credentials = stack.nats.credentials(identity);
  return { servers: stack.nats.url, user: credentials.user, pass: password ?? credentials.password, inboxPrefix: inboxPrefixOf(identity) };
}

async function attackerAs(identity: ServiceName): Promise<NatsConnection> {
  const nc = await connect(login(identity));
  attackers.push(nc);
  return nc;
}

/** A credentials request for the planted connection, with whatever key id the attacker claims. */
const credentialsRequest = (key_id: string) =>
  JSON.stringify({ environment_id: environmentId, key_id, provider_config_key: 'canary-api', connection_id: 'conn-1', force_refresh: false });

/** Subscribes, and tells whether NATS refused it; whatever arrives is kept in `attackerSaw`. */
function spy(nc: NatsConnection, subject: string): { refused: () => boolean } {
  let refused = false;
  nc.subscribe(subject, {
    callback: (error, msg) => {
      if (error) refused ||= error instanceof PermissionViolationError;
      else attackerSaw.push(`${msg.subject}\n${msg.string()}`);
    },
  });
  return { refused: () => refused };
}

function proxiedCall(): Promise<Response> {
  return fetch(`${stack.url}/proxy/status/200`, {
    headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'connection-id': 'conn-1', 'provider-config-key': 'canary-api' },
  });
}

async function auditedReads(): Promise<Array<{ key_id: string; caller?: string; purpose: string }>> {
  const db = await mongoose.createConnection(stack.mongo.uri, { dbName: stack.dbName('credential-vault') }).asPromise();
  try {
    return (await db.collection('credential_reads').find({}).toArray()) as unknown as Array<{ key_id: string; caller?: string; purpose: string }>;
  } finally {
    await db.close();
  }
}

beforeAll(async () => {
  upstream = await startUpstreamApi();
  stack = await startStack({ env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32' } });
  snoop = await stack.snoop();
  await seedApiKeyConnection(stack, 'canary-api', 'conn-1', CANARY);
  const environments = await http(`${stack.url}/admin/environments`, { token: stack.adminToken });
  const dev = (environments.json.data as Array<{ name: string; public_id: string }>).find((environment) => environment.name === 'dev')!;
  // The attacker is assumed to know the internal environment id: asked here as the webhook-router may.
  const router = await attackerAs('webhook-router');
  const reply = await router.request(`${gatewayContracts.getEnvironment.subject}.webhook-router`, JSON.stringify({ public_id: dev.public_id }), { timeout: 5000 });
  environmentId = (JSON.parse(reply.string()) as { data: { id: string } }).data.id;
}, 120_000);

afterAll(async () => {
  await Promise.all(attackers.map((nc) => nc.close()));
  await snoop?.stop();
  await stack?.dispose();
  await upstream?.close();
});

describe('NATS identities', () => {
  it('case 5: a client without credentials cannot connect, so cannot request vault.credentials.get', async () => {
    await expect(connect({ servers: stack.nats.url })).rejects.toBeInstanceOf(AuthorizationError);
    await expect(connect({ servers: stack.nats.url, user: 'proxy' })).rejects.toBeInstanceOf(AuthorizationError);
  });

  it('case 5: a client with a wrong password, or another identity’s, cannot connect', async () => {
    await expect(connect(login('proxy', `guess-${randomBytes(16).toString('hex')}`))).rejects.toBeInstanceOf(AuthorizationError);
    await expect(connect({ ...login('proxy'), pass: stack.nats.credentials('gateway').password })).rejects.toBeInstanceOf(AuthorizationError);
  });

  it.each(['webhook-router', 'gateway', 'sync-scheduler', 'action-runner'] as const)(
    'case 5: the %s identity cannot request vault.credentials.get, under its own name or the proxy’s',
    async (identity) => {
      const nc = await attackerAs(identity);
      for (const subject of [`${CREDENTIALS_SUBJECT}.${identity}`, `${CREDENTIALS_SUBJECT}.proxy`, CREDENTIALS_SUBJECT, `${CREDENTIALS_SUBJECT}.x`]) {
        const attempt = await nc.request(subject, credentialsRequest(`forged-by-${identity}`), { timeout: 2000 }).then(
          (msg) => ({ answer: msg.string() }),
          (error: Error) => ({ refused: error.cause instanceof PermissionViolationError }),
        );
        expect([subject, attempt]).toEqual([subject, { refused: true }]);
      }
    },
  );

  it('case 5: the proxy’s identity cannot subscribe to other services’ subjects, to _INBOX.> or to another identity’s inbox', async () => {
    const nc = await attackerAs('proxy');
    const spies = ['>', '_INBOX.>', `${inboxPrefixOf('gateway')}.>`, `${inboxPrefixOf('action-runner')}.>`, `${inboxPrefixOf('credential-vault')}.>`, 'vault.>', 'events.>', '$JS.API.>'].map(
      (subject) => [subject, spy(nc, subject)] as const,
    );
    await nc.flush();
    // A real proxied call while the spies wait: the credentials travel, to the real proxy only.
    const response = await proxiedCall();
    expect(response.status).toBe(200);
    await response.arrayBuffer();
    await nc.flush();
    expect(upstream.requests.at(-1)?.headers['x-api-key']).toBe(CANARY);
    expect(snoop.messages.some((message) => message.subject.startsWith(`${inboxPrefixOf('proxy')}.`) && message.data.includes(CANARY))).toBe(true);
    for (const [subject, watcher] of spies) expect([subject, watcher.refused()]).toEqual([subject, true]);
  });

  it('case 5: the read audit records the caller NATS authenticated, whatever key id the payload claims', async () => {
    // Hostile code holding the proxy's identity may claim any key; it cannot claim to be someone else.
    const proxy = await attackerAs('proxy');
    // (It gets the credentials: that identity is the proxy's; what it cannot do is pass for another.)
    await proxy.request(`${CREDENTIALS_SUBJECT}.proxy`, credentialsRequest('key-claimed-by-the-payload'), { timeout: 5000 });
    const router = await attackerAs('webhook-router');
    await expect(router.request(`${CREDENTIALS_SUBJECT}.proxy`, credentialsRequest('key-claimed-by-the-router'), { timeout: 2000 })).rejects.toHaveProperty('cause', expect.any(PermissionViolationError));

    // A customer's own read through the gateway (full-access key): attributed to the gateway.
    const fetched = await http(`${stack.url}/connections/conn-1?provider_config_key=canary-api`, { token: stack.bootstrapKey });
    expect(fetched.status).toBe(200);

    let reads: Awaited<ReturnType<typeof auditedReads>> = [];
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !(reads.some((read) => read.key_id === 'key-claimed-by-the-payload') && reads.some((read) => read.purpose === 'fetch'))) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      reads = await auditedReads();
    }
    expect(reads.filter((read) => read.key_id === 'key-claimed-by-the-payload')).toEqual([
      expect.objectContaining({ key_id: 'key-claimed-by-the-payload', caller: 'proxy', purpose: 'proxy' }),
    ]);
    // Every proxy read of the stack is attributed to the proxy; the router's forged read never happened.
    expect(reads.filter((read) => read.purpose === 'proxy').every((read) => read.caller === 'proxy')).toBe(true);
    expect(reads.filter((read) => read.purpose === 'fetch').map((read) => read.caller)).toEqual(['gateway']);
    expect(reads.some((read) => read.key_id.startsWith('key-claimed-by-the-router') || read.key_id.startsWith('forged-by-'))).toBe(false);
  });

  it('case 5: a service is refused the secrets it never uses: an integration\'s client credentials, a refresh token, the environment\'s variables', async () => {
    const variables = await http(`${stack.url}/admin/environments/dev`, { method: 'PATCH', token: stack.adminToken, body: { variables: [{ name: 'CANARY_VARIABLE', value: 'for-functions-only' }] } });
    expect(variables.status).toBe(200);
    const runner = await attackerAs('action-runner');
    const ask = async (nc: NatsConnection, subject: string, body: unknown) =>
      JSON.parse((await nc.request(subject, JSON.stringify(body), { timeout: 5000 })).string()) as { ok: boolean; data?: { variables?: unknown }; error?: { code: string } };
    const integration = await ask(runner, `${vaultContracts.getIntegration.subject}.action-runner`, {
      environment_id: environmentId,
      unique_key: 'canary-api',
      include_webhook: false,
      include_credentials: true,
    });
    expect(integration).toMatchObject({ ok: false, error: { code: 'forbidden' } });
    const connection = await ask(runner, `${vaultContracts.getConnection.subject}.action-runner`, {
      environment_id: environmentId,
      reader: { key_id: 'function:canary-api/f' },
      connection_id: 'conn-1',
      provider_config_key: 'canary-api',
      include_credentials: true,
      include_refresh_token: true,
      force_refresh: false,
      refresh_vendor_app_jwt_token: false,
    });
    expect(connection).toMatchObject({ ok: false, error: { code: 'forbidden' } });
    // The router reads an environment's settings, never its variables; functions (the runner) do.
    const router = await attackerAs('webhook-router');
    const seenByRouter = await ask(router, `${gatewayContracts.getEnvironment.subject}.webhook-router`, { environment_id: environmentId });
    expect(seenByRouter).toMatchObject({ ok: true, data: { variables: [] } });
    const seenByRunner = await ask(runner, `${gatewayContracts.getEnvironment.subject}.action-runner`, { environment_id: environmentId });
    expect(JSON.stringify(seenByRunner.data?.variables)).toContain('CANARY_VARIABLE');
  });

  it('case 5: no attacker identity ever received the canary credential, and NATS carried it only where the design allows', async () => {
    expect(attackerSaw.join('\n')).not.toContain(CANARY);
    // Allowed: the customer's own import and fetch through the gateway (requests and answers),
    // and the vault's replies to the proxy.
    const customerSubjects = new Set([`${vaultContracts.createConnection.subject}.gateway`, `${vaultContracts.getConnection.subject}.gateway`]);
    const customerReplies = new Set(snoop.messages.filter((message) => customerSubjects.has(message.subject)).map((message) => message.reply));
    const elsewhere = snoop.messages.filter(
      (message) =>
        (message.data.includes(CANARY) || message.headers.includes(CANARY)) &&
        !customerSubjects.has(message.subject) &&
        !customerReplies.has(message.subject) &&
        !message.subject.startsWith(`${inboxPrefixOf('proxy')}.`),
    );
    expect(elsewhere.map((message) => message.subject)).toEqual([]);
  });
});
