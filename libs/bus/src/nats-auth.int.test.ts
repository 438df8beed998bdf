import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AuthorizationError, connect, PermissionViolationError, type NatsConnection } from '@nats-io/transport-node';
import { inboxPrefixOf, proxyContracts, vaultContracts, type ServiceName } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { callerOf, createBus, ensureStreams, type Bus } from './index.js';
import { connectionOf } from './bus-connection.js';

/** The connection behind a bus, for what these tests do beside it. */
const natsOf = (bus: Bus) => connectionOf(bus).nc;

/**
 * The NATS server runs the authorization generated from the contracts (as deployments do): who
 * may connect, publish and subscribe. Each attacker below holds one identity, or none.
 */
const logger = createLogger({ service: 'test', silent: true });
const CANARY = `canary-nats-int-${Math.random().toString(36).slice(2)}`;
let nats: TestNats;
let vault: Bus;
let proxy: Bus;
const asked: Array<{ caller: string; key_id: string }> = [];
const open: NatsConnection[] = [];

function login(identity: ServiceName, password?: string) {
  const credentials = nats.credentials(identity);
  return { servers: nats.url, user: credentials.user, pass: password ?? credentials.password, inboxPrefix: inboxPrefixOf(identity) };
}

async function connectAs(identity: ServiceName): Promise<NatsConnection> {
  const nc = await connect(login(identity));
  open.push(nc);
  return nc;
}

/** Subscribes and reports how the server answered: refused, or what arrived within the wait. */
async function trySubscribe(nc: NatsConnection, subject: string, waitMs = 300): Promise<{ refused: boolean; received: string[] }> {
  const received: string[] = [];
  let refused = false;
  const sub = nc.subscribe(subject, {
    callback: (error, msg) => {
      if (error) refused = error instanceof PermissionViolationError;
      else received.push(msg.string());
    },
  });
  await nc.flush();
  await new Promise((resolve) => setTimeout(resolve, waitMs));
  if (!sub.isClosed()) sub.unsubscribe();
  return { refused, received };
}

const credentialsRequest = (key_id: string) =>
  JSON.stringify({ environment_id: 'env-1', key_id, provider_config_key: 'p', connection_id: 'c', force_refresh: false });

beforeAll(async () => {
  nats = await startNats();
  // The services' 5 s deadline: what is checked is who may do what, not how fast (1 s is a bet
  // on a loaded machine, for creating the streams above all).
  vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
  proxy = await createBus({ servers: nats.url, service: 'proxy', identity: nats.credentials('proxy'), logger, requestTimeoutMs: 5_000 });
  // A vault that hands out a canary to whoever gets through, and records whom NATS says asked.
  vault.serve(proxyContracts.getCredentials, (request, msg) => {
    asked.push({ caller: callerOf(proxyContracts.getCredentials, msg), key_id: request.key_id });
    return { id: 'c', provider: 'p', auth_mode: 'API_KEY', expires_at: null, headers: { authorization: `Bearer ${CANARY}` }, query: {}, decompress: false };
  });
  await natsOf(vault).flush();
});

afterAll(async () => {
  await Promise.all(open.map((nc) => nc.close()));
  await proxy?.drain();
  await vault?.drain();
  await nats?.dispose();
});

describe('NATS authentication', () => {
  it('refuses a client without credentials, and one with a wrong password', async () => {
    await expect(connect({ servers: nats.url })).rejects.toBeInstanceOf(AuthorizationError);
    await expect(connect(login('proxy', 'not-the-password-0123456789abcdef'))).rejects.toBeInstanceOf(AuthorizationError);
    await expect(connect({ ...login('proxy'), user: 'observer' })).rejects.toBeInstanceOf(AuthorizationError);
  });
});

describe('NATS permissions', () => {
  it('let the proxy ask for credentials, and the vault learn from the subject that it was the proxy', async () => {
    const answer = await proxy.request(proxyContracts.getCredentials, {
      environment_id: 'env-1',
      key_id: 'key-1',
      provider_config_key: 'p',
      connection_id: 'c',
      force_refresh: false,
    });
    expect(answer.headers['authorization']).toBe(`Bearer ${CANARY}`);
    expect(asked.at(-1)).toEqual({ caller: 'proxy', key_id: 'key-1' });
  });

  it.each(['webhook-router', 'gateway', 'sync-scheduler', 'action-runner'] as const)(
    'refuse %s a request for credentials, under its own name or the proxy’s',
    async (identity) => {
      const nc = await connectAs(identity);
      const before = asked.length;
      for (const subject of [`${proxyContracts.getCredentials.subject}.${identity}`, `${proxyContracts.getCredentials.subject}.proxy`, proxyContracts.getCredentials.subject]) {
        await expect(nc.request(subject, credentialsRequest('forged'), { timeout: 1000 })).rejects.toHaveProperty('cause', expect.any(PermissionViolationError));
      }
      expect(asked.length).toBe(before);
    },
  );

  it('keep the proxy out of other identities’ inboxes, every inbox, and subjects it does not serve', async () => {
    const nc = await connectAs('proxy');
    const watched = await Promise.all(
      ['_INBOX.>', `${inboxPrefixOf('gateway')}.>`, `${inboxPrefixOf('credential-vault')}.>`, 'vault.>', vaultContracts.getConnection.subject, 'events.>', '>', '$JS.API.>'].map(
        async (subject) => [subject, await trySubscribe(nc, subject, 50)] as const,
      ),
    );
    for (const [subject, outcome] of watched) expect([subject, outcome]).toEqual([subject, { refused: true, received: [] }]);
  });

  it('keep the gateway out of the proxy’s inbox while the proxy gets credentials', async () => {
    const gateway = await connectAs('gateway');
    const spying = trySubscribe(gateway, `${inboxPrefixOf('proxy')}.>`, 500);
    await proxy.request(proxyContracts.getCredentials, { environment_id: 'env-1', key_id: 'key-2', provider_config_key: 'p', connection_id: 'c', force_refresh: false });
    const outcome = await spying;
    expect(outcome.refused).toBe(true);
    expect(outcome.received.join('\n')).not.toContain(CANARY);
  });

  it.each(['action-runner', 'proxy', 'webhook-router'] as const)('refuse %s a change to the streams’ configuration (a subject or republish added would copy other traffic)', async (identity) => {
    await ensureStreams(vault);
    const nc = await connectAs(identity);
    for (const stream of ['EVENTS', 'JOBS', 'OPERATIONS']) {
      const changed = JSON.stringify({ name: stream, subjects: ['jobs.>', `${inboxPrefixOf('proxy')}.>`], republish: { src: '>', dest: `${inboxPrefixOf(identity)}.leak.>` } });
      await expect(nc.request(`$JS.API.STREAM.UPDATE.${stream}`, changed, { timeout: 1000 })).rejects.toHaveProperty('cause', expect.any(PermissionViolationError));
    }
  });

  it('answer no request whose reply subject is not an inbox: an answer aimed at a stream or the JetStream API is dropped', async () => {
    await ensureStreams(vault);
    const jsm = await vault.jetstreamManager();
    const jobsBefore = (await jsm.streams.info('JOBS')).state.messages;
    const nc = await connectAs('proxy');
    const before = asked.length;
    // The vault answers a proxy's request; the proxy names, as where the answer goes, a subject
    // the JOBS stream stores (a job forged under the vault's name) or one that deletes a stream.
    for (const reply of ['jobs.webhook.deliver', '$JS.API.STREAM.DELETE.EVENTS']) {
      nc.publish(`${proxyContracts.getCredentials.subject}.proxy`, credentialsRequest('aimed'), { reply });
    }
    await nc.flush();
    const deadline = Date.now() + 5_000;
    while (asked.length < before + 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(asked.length).toBe(before + 2);
    // An answer sent would be stored by now: the vault answered the requests before they were counted.
    await vault.flush();
    expect((await jsm.streams.info('JOBS')).state.messages).toBe(jobsBefore);
    expect((await jsm.streams.info('EVENTS')).config.name).toBe('EVENTS');
  });

  it('refuse JetStream administration a service does not need', async () => {
    const nc = await connectAs('webhook-router');
    for (const subject of ['$JS.API.STREAM.DELETE.JOBS', '$JS.API.STREAM.PURGE.EVENTS', '$JS.API.CONSUMER.CREATE.EVENTS.spy.events.connection.created', '$JS.API.STREAM.NAMES']) {
      await expect(nc.request(subject, '{}', { timeout: 1000 })).rejects.toHaveProperty('cause', expect.any(PermissionViolationError));
    }
  });
});
