import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { Connection } from 'mongoose';
import { createBus, createKvLocks, createOperationLog, ensureStreams, operationsOfPages, openKv, WRITE_KEYS, type Bus, type JsonKv } from '@latchkey/bus';
import { STREAMS, vaultContracts, type Operation } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger, type Logger } from '@latchkey/logger';
import { registry } from '@latchkey/metrics';
import { connectMongo, databaseUnavailable, environmentId } from '@latchkey/mongo';
import { createAddressPolicy, createHttpClient } from '@latchkey/net';
import {
  eventually,
  freePort,
  startMongo,
  startNats,
  startOAuthServer,
  startTcpRelay,
  uniqueDbName,
  type TestMongo,
  type TestNats,
  type TestOAuthServer,
  type TestTcpRelay,
} from '@latchkey/testing';
import { createKeyring } from '../crypto/keyring.js';
import { createConnectionRepo, type ConnectionRepo } from '../db/connection-repo.js';
import { createDataKeyRepo } from '../db/data-key-repo.js';
import { createIntegrationRepo } from '../db/integration-repo.js';
import { createRefreshAnswerRepo } from '../db/refresh-answer-model.js';
import { createRefreshLogRepo } from '../db/refresh-log-repo.js';
import { createConnectionCredentials } from '../domain/connection-credentials.js';
import { newConnection } from '../domain/connections.js';
import { serializedConnectionWrites } from '../domain/serialized-writes.js';
import { INTEGRATION_PLACES, createIntegrationService } from '../domain/integrations.js';
import type { Refresher } from '../domain/vault-deps.js';
import { createRefresher } from './refresher.js';

jest.setTimeout(60_000);

/**
 * Case 13 of the security run: a vault replica paused past its refresh lock's TTL resumed,
 * presented a refresh token that another replica had already used, and overwrote that
 * replica's newer tokens with its stale result. Two replicas here share NATS, the database and a
 * real OAuth 2 server on loopback; replica A loads its data keys through a relay that can hold
 * its requests, which pauses A where a stopped process would be: holding the connection it read
 * under the lock, with the lock running out.
 */

const logger = createLogger({ service: 'test', silent: true });
const LOCK_TTL_MS = 1_000;
const CANARY_CLIENT_SECRET = `canary-client-secret-${randomBytes(8).toString('hex')}`;

let nats: TestNats;
let mongo: TestMongo;
let oauth: TestOAuthServer;
let bus: Bus;
let kv: JsonKv<{ owner: string }>;
let direct: Connection;
let relayed: Connection;
let relay: TestTcpRelay;
const keks = [{ version: 'v1', key: randomBytes(32) }];

/**
 * A vault replica. `keys` is the database connection its keyring loads data keys through: a
 * fresh keyring loads the environment's data key when it first decrypts, right after the
 * connection was read under the lock, which is where replica A is paused.
 */
/** Operations the replicas' refreshers logged. */
const logged: Operation[] = [];

function replica(
  keys: Connection,
  log: Logger = logger,
  wrap: (repo: ConnectionRepo) => ConnectionRepo = (repo) => repo,
  tokenUrl: string = oauth.tokenUrl,
  locks: JsonKv<{ owner: string }> = kv,
): { refresher: Refresher; connections: ConnectionRepo } {
  const connection = direct;
  const connections = wrap(createConnectionRepo(connection));
  const integrations = createIntegrationRepo(connection);
  const cipher = createKeyring({ keks, dataKeys: createDataKeyRepo(keys) });
  const refresher = createRefresher({
    bus,
    logger: log,
    integrations,
    connections,
    credentials: createConnectionCredentials({ cipher }),
    integrationService: createIntegrationService({ integrations, cipher }),
    providers: { get: () => ({ display_name: 'Loopback OAuth', auth_mode: 'OAUTH2', token_url: tokenUrl }) },
    locks,
    logs: createRefreshLogRepo(connection),
    answers: createRefreshAnswerRepo(connection),
    // Under the lock's TTL (1 s), as start-vault keeps it, and well over the 300 ms the outage
    // cases' provider takes to answer: 500 ms left that answer 200 ms, a bet on a loaded machine.
    timeoutMs: 900,
    http: createHttpClient({ policy: createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] }) }),
    lockTtlMs: LOCK_TTL_MS,
    // Batches are the gateway's concern (its own tests); here they are kept to be read.
    operations: createOperationLog({ logger, flushMs: 1, send: async (pages) => void logged.push(...operationsOfPages(pages)) }),
  });
  return { refresher, connections };
}

/** A refresh token the OAuth server really issued, by its authorization-code grant. */
async function issuedRefreshToken(client: { client_id: string; client_secret: string }): Promise<string> {
  const redirectUri = 'http://127.0.0.1/callback';
  const authorize = new URL(oauth.authorizationUrl);
  authorize.search = new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: redirectUri, state: 's' }).toString();
  const consent = await fetch(authorize, { redirect: 'manual' });
  const code = new URL(consent.headers.get('location') ?? '').searchParams.get('code') ?? '';
  const token = await fetch(oauth.tokenUrl, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, ...client }),
  });
  const body = (await token.json()) as { refresh_token: string };
  return body.refresh_token;
}

beforeAll(async () => {
  [nats, mongo, oauth] = await Promise.all([startNats(), startMongo(), startOAuthServer()]);
  // Test buckets are no service's: the test server's observer may open them.
  // Database errors classified as the vault's runtime does (run-service).
  bus = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000, classifyError: (error) => databaseUnavailable(error) });
  await ensureStreams(bus);
  kv = await openKv<{ owner: string }>(bus, { name: `refresh_locks_${randomBytes(4).toString('hex')}`, ttlMs: LOCK_TTL_MS });
  const dbName = uniqueDbName('vault_refresh');
  const mongoPort = Number(new URL(mongo.uri).port);
  relay = await startTcpRelay({ port: mongoPort });
  direct = await connectMongo({ uri: mongo.uri, dbName, logger });
  relayed = await connectMongo({ uri: `mongodb://127.0.0.1:${relay.port}/?directConnection=true`, dbName, logger });
  await Promise.all([createConnectionRepo(direct).init(), createIntegrationRepo(direct).init(), createDataKeyRepo(direct).init(), createRefreshLogRepo(direct).init(), createRefreshAnswerRepo(direct).init()]);
});

afterAll(async () => {
  await relayed?.close().catch(() => undefined);
  await direct?.close();
  await relay?.close();
  await bus?.drain();
  await Promise.all([nats?.dispose(), mongo?.dispose(), oauth?.close()]);
});

/** An integration and an OAUTH2 connection whose access token expires at `expiresAt` (a minute ago by default), in a fresh environment. */
async function seedExpiredConnection(refreshToken: string, client: { client_id: string; client_secret: string }, expiresAt = new Date(Date.now() - 60_000), accessToken = 'expired') {
  const environment = environmentId(`env_${randomBytes(6).toString('hex')}`);
  const cipher = createKeyring({ keks, dataKeys: createDataKeyRepo(direct) });
  const integrationId = `int_${randomUUID()}`;
  const now = new Date();
  const integration = await createIntegrationRepo(direct).insert(environment, {
    _id: integrationId,
    unique_key: 'loopback',
    provider: 'loopback-oauth',
    display_name: null,
    credentials: await cipher.encryptJson(environment, { integrationId, ...INTEGRATION_PLACES.credentials }, client),
    integration_config: {},
    custom: {},
    forward_webhooks: false,
    accept_unsigned_webhooks: false,
    allowed_hosts: [],
    webhook_secret: null,
    created_at: now,
    updated_at: now,
  });
  const doc = await newConnection({ credentials: createConnectionCredentials({ cipher }) }, environment, integration, { type: 'OAUTH2', access_token: accessToken, refresh_token: refreshToken, expires_at: expiresAt.toISOString(), raw: {} }, {
    connection_id: 'conn-1',
    metadata: {},
    connection_config: {},
    tags: {},
    end_user: null,
    created_via_session: false,
  });
  return createConnectionRepo(direct).insert(environment, doc);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A series of this process's metrics registry (what the vault's /metrics serves): its summed value. */
async function metricValue(name: string, labels: Record<string, string> = {}, sample = name): Promise<number> {
  const values = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return values
    .filter((value) => ((value as { metricName?: string }).metricName ?? name) === sample && Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted))
    .reduce((sum, value) => sum + value.value, 0);
}

it('case 13: a refresher whose lock expired while it waited cannot present the used refresh token again nor overwrite the newer tokens', async () => {
  const client = oauth.addClient({ client_secret: CANARY_CLIENT_SECRET });
  const firstRefreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(firstRefreshToken, client);
  const a = replica(relayed);
  const b = replica(direct);
  oauth.stats.reset();
  const [successesBefore, waitsBefore] = [await metricValue('latchkey_vault_refreshes_total', { outcome: 'success' }), await metricValue('latchkey_vault_refresh_lock_wait_seconds', {}, 'latchkey_vault_refresh_lock_wait_seconds_count')];

  // Replica A takes the lock and reads the connection; its keyring's read of the data key is
  // held, so A stays paused with the old refresh token in hand while its lock runs out.
  relay.hold();
  const aResult = a.refresher.ensureFresh(doc, { type: 'OAUTH2', access_token: 'expired', refresh_token: firstRefreshToken, raw: {} }, { force: false, vendorJwt: false });
  const lockKey = `conn_${doc._id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  for (let waited = 0; (await kv.get(lockKey)) === null && waited < 5_000; waited += 10) await sleep(10);
  expect(await kv.get(lockKey)).not.toBeNull();

  // Replica B waits for A's lock to expire, takes it, refreshes and stores the newer tokens.
  const bResult = await b.refresher.ensureFresh(doc, { type: 'OAUTH2', access_token: 'expired', refresh_token: firstRefreshToken, raw: {} }, { force: false, vendorJwt: false });
  expect(bResult.credentials['refresh_token']).not.toBe(firstRefreshToken);

  // A resumes with what it read before B's refresh.
  relay.release();
  const aAnswer = await aResult;

  const presented = oauth.stats.tokenRequestLog.filter((record) => record.grantType === 'refresh_token').map((record) => record.body['refresh_token']);
  expect(presented).toEqual([firstRefreshToken]);
  const stored = await createConnectionRepo(direct).findById(environmentId(doc.environment_id), doc._id);
  const storedCredentials = await createConnectionCredentials({ cipher: createKeyring({ keks, dataKeys: createDataKeyRepo(direct) }) }).open(stored!);
  expect(storedCredentials['access_token']).toBe(bResult.credentials['access_token']);
  expect(storedCredentials['refresh_token']).toBe(bResult.credentials['refresh_token']);
  expect(stored!.refresh_failure).toBeNull();
  expect(stored!.credentials_version).toBe(1);
  expect(aAnswer.credentials['access_token']).toBe(bResult.credentials['access_token']);
  // The client secret went only to the token endpoint, in the one request B made.
  expect(oauth.stats.tokenRequestLog).toHaveLength(1);
  // One call to the provider, one `refresh` in the operations log, and no secret in it.
  await eventually(() => (logged.some((operation) => operation.connection_id === doc.connection_id) ? true : undefined), 5_000, 'the refresh logged');
  const refreshes = logged.filter((operation) => operation.connection_id === doc.connection_id);
  expect(refreshes).toEqual([expect.objectContaining({ type: 'refresh', status: 'success', environment_id: doc.environment_id, integration_id: doc.provider_config_key })]);
  expect(JSON.stringify(refreshes)).not.toContain(CANARY_CLIENT_SECRET);
  expect(JSON.stringify(refreshes)).not.toContain(firstRefreshToken);
  // Metrics: one refresh (B's), and B's wait for A's lock (A then waits for B's).
  expect(await metricValue('latchkey_vault_refreshes_total', { outcome: 'success' })).toBe(successesBefore + 1);
  expect(await metricValue('latchkey_vault_refresh_lock_wait_seconds', {}, 'latchkey_vault_refresh_lock_wait_seconds_count')).toBeGreaterThanOrEqual(waitsBefore + 1);
});

it('case 13: a stale write loses the compare-and-set on the credentials version', async () => {
  const client = oauth.addClient();
  const doc = await seedExpiredConnection(await issuedRefreshToken(client), client);
  const connections = createConnectionRepo(direct);
  const environment = environmentId(doc.environment_id);
  const newer = { credentials: 'newer-blob', updated_at: new Date() };
  expect(await connections.replaceCredentials(environment, doc._id, 0, newer)).toBe(true);
  expect(await connections.replaceCredentials(environment, doc._id, 0, { credentials: 'stale-blob', updated_at: new Date() })).toBe(false);
  const stored = await connections.findById(environment, doc._id);
  expect(stored?.credentials).toBe('newer-blob');
  expect(stored?.credentials_version).toBe(1);
});

it('case 13: a lock is released only by its holder, never after it expired and another took it', async () => {
  const locks = createKvLocks(kv);
  const key = `release_${randomBytes(4).toString('hex')}`;
  const first = await locks.acquire(key);
  expect(first).not.toBeNull();
  for (let waited = 0; (await locks.isHeld(key)) && waited < 5_000; waited += 50) await sleep(50);
  const second = await locks.acquire(key);
  expect(second).not.toBeNull();
  expect(await locks.renew(first!)).toBe(false);
  expect(await locks.release(first!)).toBe(false);
  expect(await locks.isHeld(key)).toBe(true);
  expect(await locks.release(second!)).toBe(true);
  expect(await locks.isHeld(key)).toBe(false);
});

// Issue 20: a NATS node loss left the lock bucket without a leader for seconds, and every call
// whose token was merely near its expiry answered 503 meanwhile, though the token still worked.
// Its own 2 minutes: each fetch while NATS is away waits out the bus's deadlines, some 45 s at
// rest, too close to the file's 60 s for a loaded machine.
it('hands out a token that is near its expiry but still valid when the lock bucket is unavailable, and refreshes it afterwards', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 5 * 60_000));
  const warnings: string[] = [];
  const { refresher } = replica(direct, createLogger({ service: 'test', stream: new Writable({ write: (line, _, done) => done(void warnings.push(String(line))) }) }));
  const held = { type: 'OAUTH2' as const, access_token: 'still-valid', refresh_token: refreshToken, raw: {} };
  oauth.stats.reset();
  await nats.stop();
  try {
    // Two fetches (each waits 2 s for the bucket, then falls back) show the warning is said once.
    for (let fetches = 0; fetches < 2; fetches += 1) {
      const answer = await refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });
      expect(answer.credentials['access_token']).toBe('still-valid');
    }
    // The fallback is said once for the connection, not on each fetch of the hot path.
    expect(warnings.filter((line) => line.includes('handing out the current token'))).toHaveLength(1);
    // A forced refresh (the provider refused the token) has nothing to fall back on.
    await expect(refresher.ensureFresh(doc, held, { force: true, vendorJwt: false })).rejects.toMatchObject({ code: 'service_unavailable' });
  } finally {
    await nats.start();
  }
  expect(oauth.stats.tokenRequestLog).toHaveLength(0);
  const refreshed = await eventually(async () => {
    const answer = await refresher.ensureFresh(doc, held, { force: false, vendorJwt: false }).catch(() => undefined);
    return answer && answer.credentials['access_token'] !== 'still-valid' ? answer : undefined;
  }, 20_000, 'a refresh once NATS is back');
  expect(refreshed.credentials['refresh_token']).not.toBe(refreshToken);
}, 120_000);

// A bucket that takes the request and never answers (its leader lost mid-request): the fetch
// waited for the lock as long as the bucket's own timeouts (10 s), past the gateway's
// 5 s deadline for the fetch, so the token in hand never reached the caller, who got a 503.
it('hands out a token that is near its expiry but still valid when the lock bucket never answers', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 5 * 60_000));
  let asked = 0;
  const stalled: JsonKv<{ owner: string }> = {
    kv: kv.kv,
    get: (key) => kv.get(key),
    update: (key, value, revision) => kv.update(key, value, revision),
    delete: (key, revision) => kv.delete(key, revision),
    create: () => {
      asked += 1;
      return new Promise<never>(() => undefined);
    },
  };
  const { refresher } = replica(direct, logger, undefined, undefined, stalled);
  const held = { type: 'OAUTH2' as const, access_token: 'still-valid', refresh_token: refreshToken, raw: {} };
  oauth.stats.reset();
  const answer = await refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });
  expect(answer.credentials['access_token']).toBe('still-valid');
  expect(asked).toBe(1);
  expect(oauth.stats.tokenRequestLog).toHaveLength(0);
}, 30_000);

// The same for the database: a connection's reads went through the lock and failed with the
// driver's own error, which the fallback did not know as an outage, so the fetch answered 503.
it('hands out a token that is near its expiry but still valid while the database is away', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 5 * 60_000));
  // This replica reads connections through the relay.
  const { refresher } = replica(direct, logger, () => createConnectionRepo(relayed));
  const held = { type: 'OAUTH2' as const, access_token: 'still-valid', refresh_token: refreshToken, raw: {} };
  oauth.stats.reset();
  relay.cut();
  try {
    const answer = await refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });
    expect(answer.credentials['access_token']).toBe('still-valid');
  } finally {
    relay.restore();
  }
  expect(oauth.stats.tokenRequestLog).toHaveLength(0);
}, 60_000);

it('hands out an OAuth 2 token that has no refresh token while it still works, and charges no failure for it', async () => {
  const client = oauth.addClient({});
  const doc = await seedExpiredConnection('unused', client, new Date(Date.now() + 10 * 60_000));
  const { refresher, connections } = replica(direct);
  const held = { type: 'OAUTH2' as const, access_token: 'no-refresh-token', raw: {} };
  oauth.stats.reset();
  const answer = await refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });
  expect(answer.credentials['access_token']).toBe('no-refresh-token');
  expect(oauth.stats.tokenRequestLog).toHaveLength(0);
  expect((await connections.findById(environmentId(doc.environment_id), doc._id))?.refresh_failure).toBeNull();
  // Once it no longer outlives a call, it is refused: nothing can renew it.
  await expect(refresher.ensureFresh({ ...doc, expires_at: new Date(Date.now() + 30_000) }, held, { force: false, vendorJwt: false })).rejects.toMatchObject({ code: 'refresh_token_external_error' });
});

/**
 * A refresh whose provider answers 300 ms after the request arrives, with `outage` in between;
 * then checks the rotated tokens were stored, after one token request, and handed out.
 */
async function refreshAcrossAnOutage({ refresher, connections }: ReturnType<typeof replica>, outage: () => Promise<void>) {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client);
  const held = { type: 'OAUTH2' as const, access_token: 'expired', refresh_token: refreshToken, raw: {} };
  oauth.stats.reset();
  oauth.setOptions({ tokenDelayMs: 300 });
  let answered: Awaited<ReturnType<Refresher['ensureFresh']>> | undefined;
  try {
    const fetching = refresher.ensureFresh(doc, held, { force: false, vendorJwt: false }).then((answer) => (answered = answer));
    await eventually(async () => oauth.stats.tokenRequestLog.length > 0 || undefined, 5_000, 'the token request');
    await outage();
    await fetching.catch(() => undefined);
  } finally {
    oauth.setOptions({ tokenDelayMs: 0 });
  }
  const stored = await connections.findById(environmentId(doc.environment_id), doc._id);
  const credentials = await createConnectionCredentials({ cipher: createKeyring({ keks, dataKeys: createDataKeyRepo(direct) }) }).open(stored!);
  expect(credentials['refresh_token']).not.toBe(refreshToken);
  expect(stored?.refresh_failure).toBeNull();
  expect(answered?.credentials['access_token']).toBe(credentials['access_token']);
  expect(oauth.stats.tokenRequestLog).toHaveLength(1);
}

// Issue 20 (chaos): a refresh whose provider call succeeded but whose store met an outage (the
// write keys' bucket away with a NATS node) lost the rotated refresh token, the only copy of it:
// every refresh after it presented the used one, and the provider refused the connection for good.
it('keeps the rotated tokens when storing them meets an outage: stored once NATS is back, after one token request', async () => {
  const writeLocks = createKvLocks(await openKv<{ owner: string }>(bus, { name: `write_locks_${randomBytes(4).toString('hex')}`, ttlMs: WRITE_KEYS.ttlMs }));
  await refreshAcrossAnOutage(
    replica(direct, logger, (repo) => serializedConnectionWrites(repo, writeLocks, { waitMs: 500 })),
    async () => {
      await nats.stop();
      await sleep(2_000);
      await nats.start();
    },
  );
}, 60_000);

// The rotated tokens are sealed before they are kept or stored, and sealing reads the
// environment's active data key (cached for a minute): a database away at that moment dropped
// the only copy of the new refresh token, and the next refresh presented the spent one.
it('keeps the rotated tokens when sealing them meets a database outage: stored once the database is back, after one token request', async () => {
  // The keyring reads its data keys through the relay; everything else goes direct.
  await refreshAcrossAnOutage(
    replica(relayed),
    async () => {
      relay.cut();
      try {
        await sleep(1_500);
      } finally {
        relay.restore();
      }
    },
  );
}, 60_000);

/**
 * A replica refreshes the connection and stops at its store, which never returns, as a replica
 * killed there would: its lock runs out behind it. Resolves once the provider has answered it.
 */
async function refreshAndDieAtTheStore(doc: Parameters<Refresher['ensureFresh']>[0], held: Parameters<Refresher['ensureFresh']>[1]): Promise<void> {
  let storeReached = false;
  const { refresher } = replica(direct, logger, (repo) => ({
    ...repo,
    replaceCredentials: () => {
      storeReached = true;
      return new Promise<boolean>(() => undefined);
    },
  }));
  void refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });
  await eventually(() => storeReached || undefined, 5_000, 'the dying replica at its store');
}

// Chaos (a vault replica SIGKILLed under load): the replica refreshed at the provider (200, a
// rotated refresh token) and died before the connection stored the answer. The next holder of
// the lock presented the spent refresh token (400), and the connection answered 424 until its
// end user reconnected it.
it('stores the answer of a replica that died before storing it, rather than presenting the spent refresh token again', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client);
  const held = { type: 'OAUTH2' as const, access_token: 'expired', refresh_token: refreshToken, raw: {} };
  const b = replica(direct);
  oauth.stats.reset();
  const asked = Date.now();
  await refreshAndDieAtTheStore(doc, held);
  expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual([200]);

  const recovered = Date.now();
  const answer = await b.refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });

  // One token request in all: A's. B stored what the provider gave A.
  expect(oauth.stats.tokenRequestLog).toHaveLength(1);
  expect(answer.credentials['refresh_token']).not.toBe(refreshToken);
  const stored = await b.connections.findById(environmentId(doc.environment_id), doc._id);
  const credentials = await createConnectionCredentials({ cipher: createKeyring({ keks, dataKeys: createDataKeyRepo(direct) }) }).open(stored!);
  expect(credentials['refresh_token']).toBe(answer.credentials['refresh_token']);
  expect(credentials['access_token']).toBe(answer.credentials['access_token']);
  expect(stored?.refresh_failure).toBeNull();
  expect(stored?.credentials_version).toBe(1);
  // The token's life counts from when A asked for it, not from when B stored it.
  expect(stored?.token_obtained_at?.getTime()).toBeGreaterThanOrEqual(asked);
  expect(stored?.token_obtained_at?.getTime()).toBeLessThan(recovered);
  // Stored, the kept answer is dropped: it holds credentials.
  expect(await createRefreshAnswerRepo(direct).find(doc._id)).toBeNull();

  // And the rotated token is the live one: the next refresh presents it, and the provider takes it.
  const again = await b.refresher.ensureFresh(stored!, credentials, { force: true, vendorJwt: false });
  expect(oauth.stats.tokenRequestLog.map((record) => [record.body['refresh_token'], record.status])).toEqual([
    [refreshToken, 200],
    [credentials['refresh_token'], 200],
  ]);
  expect(again.credentials['refresh_token']).not.toBe(credentials['refresh_token']);
}, 60_000);

// A store that landed and was then answered 503 (its connection's write key lost as it ended,
// kv-locks' `Holding`) is tried again, and the retry's compare-and-set finds the version it wrote
// itself: that is its own store, not a newer refresh's.
it('counts a store that landed before its write key was lost as stored, not as superseded', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client);
  const held = { type: 'OAUTH2' as const, access_token: 'expired', refresh_token: refreshToken, raw: {} };
  const warnings: string[] = [];
  const log = createLogger({ service: 'test', stream: new Writable({ write: (line, _, done) => done(void warnings.push(String(line))) }) });
  let tries = 0;
  const { refresher, connections } = replica(direct, log, (repo) => ({
    ...repo,
    replaceCredentials: async (...args: Parameters<ConnectionRepo['replaceCredentials']>) => {
      const stored = await repo.replaceCredentials(...args);
      if (++tries === 1) throw new AppError('service_unavailable', 'The write key was lost while the work ran');
      return stored;
    },
  }));
  const [successes, superseded] = [await metricValue('latchkey_vault_refreshes_total', { outcome: 'success' }), await metricValue('latchkey_vault_refreshes_total', { outcome: 'superseded' })];

  const answer = await refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });

  expect(tries).toBe(2);
  const stored = await connections.findById(environmentId(doc.environment_id), doc._id);
  expect(stored?.credentials_version).toBe(1);
  expect(answer.credentials['refresh_token']).not.toBe(refreshToken);
  expect(answer.doc.credentials).toBe(stored?.credentials);
  expect(warnings.filter((line) => line.includes('a newer refresh stored credentials first'))).toEqual([]);
  expect(await metricValue('latchkey_vault_refreshes_total', { outcome: 'success' })).toBe(successes + 1);
  expect(await metricValue('latchkey_vault_refreshes_total', { outcome: 'superseded' })).toBe(superseded);
}, 60_000);

// Chaos again: while a replica that died held a connection's refresh lock, every fetch of that
// connection on the other replicas waited for the lock's TTL (30 s), though its token still
// worked for minutes. A token that outlives the call by a minute is handed out as it is while
// another replica refreshes; one about to expire still waits for what that replica stores.
it('hands out a token still valid for minutes while another replica holds the refresh lock, and waits only for one about to expire', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 5 * 60_000));
  const held = { type: 'OAUTH2' as const, access_token: 'still-valid', refresh_token: refreshToken, raw: {} };
  const { refresher } = replica(direct);
  oauth.stats.reset();
  // Another replica holds the lock, and is gone: nobody renews or releases it.
  const lockKey = `conn_${doc._id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  expect(await createKvLocks(kv).acquire(lockKey)).not.toBeNull();

  const answer = await refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });
  expect(answer.credentials['access_token']).toBe('still-valid');
  expect(oauth.stats.tokenRequestLog).toHaveLength(0);

  // About to expire: it waits for the lock to go (its TTL here), then refreshes. (The lock is
  // taken again should it have run out meanwhile.)
  const expiring = { ...doc, expires_at: new Date(Date.now() + 30_000) };
  await createKvLocks(kv).acquire(lockKey);
  expect(await createKvLocks(kv).isHeld(lockKey)).toBe(true);
  const refreshed = await refresher.ensureFresh(expiring, held, { force: false, vendorJwt: false });
  expect(refreshed.credentials['access_token']).not.toBe('still-valid');
  expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual([200]);
});

it('drops a kept answer with its connection: a deleted connection leaves no credentials behind', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client);
  await refreshAndDieAtTheStore(doc, { type: 'OAUTH2', access_token: 'expired', refresh_token: refreshToken, raw: {} });
  const answers = createRefreshAnswerRepo(direct);
  expect(await answers.find(doc._id)).toMatchObject({ _id: doc._id, read_version: 0 });

  await replica(direct).refresher.forget(doc);
  expect(await answers.find(doc._id)).toBeNull();
});

it('refreshes for a forced fetch that comes while a plain one is under way, rather than handing it the plain one’s answer', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 5 * 60_000));
  const held = { type: 'OAUTH2' as const, access_token: 'revoked-at-the-provider', refresh_token: refreshToken, raw: {} };
  const { refresher } = replica(direct);
  oauth.stats.reset();
  // Another replica holds the lock: the plain fetch hands out the token it has, valid for minutes.
  const lockKey = `conn_${doc._id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  expect(await createKvLocks(kv).acquire(lockKey)).not.toBeNull();
  const plain = refresher.ensureFresh(doc, held, { force: false, vendorJwt: false });
  // The provider refused that token (a 401): the proxy forces a refresh.
  const forced = refresher.ensureFresh(doc, held, { force: true, vendorJwt: false });
  expect((await plain).credentials['access_token']).toBe('revoked-at-the-provider');
  expect((await forced).credentials['access_token']).not.toBe('revoked-at-the-provider');
  expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual([200]);
});

it('refreshes for a forced fetch whose connection had its metadata written while it waited for the lock', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 60 * 60_000));
  const held = { type: 'OAUTH2' as const, access_token: 'revoked-at-the-provider', refresh_token: refreshToken, raw: {} };
  const { refresher, connections } = replica(direct);
  oauth.stats.reset();
  // Another replica holds the lock and dies holding it (it lasts its TTL here, 1 s).
  const lockKey = `conn_${doc._id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  expect(await createKvLocks(kv).acquire(lockKey)).not.toBeNull();
  const forced = refresher.ensureFresh(doc, held, { force: true, vendorJwt: false });
  // Meanwhile a sync writes the connection's metadata: a write, but no new credentials.
  await new Promise((resolve) => setTimeout(resolve, 200));
  await connections.update(environmentId(doc.environment_id), doc._id, { metadata: { cursor: 'x' }, updated_at: new Date() });
  // What the vault stores is the seeded 'expired' token: a fresh one is neither.
  expect(['expired', 'revoked-at-the-provider']).not.toContain((await forced).credentials['access_token']);
  expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual([200]);
});

// A failed refresh is what tells the customer (its `auth` webhook) that the end user must
// reconnect, and nothing announces it again: the connection backs off. Its event met JetStream
// away (a leader election, a restart) and was dropped without a word.
it('announces a failed refresh once JetStream takes it again, without holding the caller meanwhile', async () => {
  const client = oauth.addClient({});
  const doc = await seedExpiredConnection('never-issued', client);
  const { refresher } = replica(direct);
  const held = { type: 'OAUTH2' as const, access_token: 'expired', refresh_token: 'never-issued', raw: {} };
  const jsm = await bus.jetstreamManager();
  await jsm.streams.delete(STREAMS.events.name);
  try {
    await expect(refresher.ensureFresh(doc, held, { force: false, vendorJwt: false })).rejects.toMatchObject({ code: 'refresh_token_external_error' });
  } finally {
    await ensureStreams(bus);
  }
  const stored = await eventually(
    async () => (await jsm.streams.getMessage(STREAMS.events.name, { last_by_subj: vaultContracts.connectionRefreshFailed.subject }).catch(() => null)) ?? undefined,
    20_000,
    'the failed refresh to be announced',
  );
  expect(stored.json()).toMatchObject({ connection_id: 'conn-1', error: { code: 'refresh_token_external_error' } });
}, 60_000);

/** The `connection.refresh_failed` events in the stream that name a connection of this environment. */
async function announcedRefreshFailures(environment: string): Promise<unknown[]> {
  const jsm = await bus.jetstreamManager();
  const { state } = await jsm.streams.info(STREAMS.events.name);
  const announced: unknown[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq && state.messages > 0; seq += 1) {
    const message = await jsm.streams.getMessage(STREAMS.events.name, { seq }).catch(() => null);
    if (message?.subject !== vaultContracts.connectionRefreshFailed.subject) continue;
    const event = message.json<{ environment_id: string }>();
    if (event.environment_id === environment) announced.push(event);
  }
  return announced;
}

// A review: a refresh ahead of expiry that met the provider's token endpoint down for a moment
// (503, 429, no answer) was taken for a refusal. The connection got an auth error, a back-off and
// a day towards connection_refresh_exhausted, the customer an auth webhook telling the end user
// to reconnect, and the fetch a 424, though the token in hand worked for up to 14 more minutes.
it.each([
  { failure: 'answers 503', status: 503 },
  { failure: 'answers 429', status: 429 },
  { failure: 'cannot be reached (a closed loopback port)', status: undefined },
])(
  'hands out a token near its expiry but still valid when the token endpoint $failure, recording no failure and announcing none; an expired token is refused as before',
  async ({ status }) => {
    const client = oauth.addClient({});
    const tokenUrl = status === undefined ? `http://127.0.0.1:${await freePort()}/oauth/token` : oauth.tokenUrl;
    const { refresher, connections } = replica(direct, logger, undefined, tokenUrl);
    const failNextToken = () => (status === undefined ? undefined : oauth.failNextToken(status, { error: 'temporarily_unavailable' }));
    const refreshToken = await issuedRefreshToken(client);
    const nearExpiry = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 5 * 60_000), 'still-valid');
    const held = { type: 'OAUTH2' as const, access_token: 'still-valid', refresh_token: refreshToken, raw: {} };
    oauth.stats.reset();

    failNextToken();
    const answer = await refresher.ensureFresh(nearExpiry, held, { force: false, vendorJwt: false });
    expect(answer.credentials['access_token']).toBe('still-valid');
    const kept = await connections.findById(environmentId(nearExpiry.environment_id), nearExpiry._id);
    expect(kept?.errors).toEqual([]);
    expect(kept?.refresh_failure).toBeNull();
    expect(kept?.credentials_version).toBe(0);
    // The next fetches on this replica wait out a short retry-after rather than ask again.
    const again = await refresher.ensureFresh(nearExpiry, held, { force: false, vendorJwt: false });
    expect(again.credentials['access_token']).toBe('still-valid');
    expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual(status === undefined ? [] : [status]);

    // A token that no longer outlives the call has nothing to fall back on: 424, as before.
    const expired = await seedExpiredConnection('unused-refresh-token', client);
    failNextToken();
    await expect(refresher.ensureFresh(expired, { ...held, access_token: 'expired', refresh_token: 'unused-refresh-token' }, { force: false, vendorJwt: false })).rejects.toMatchObject({
      code: 'refresh_token_external_error',
    });
    const refused = await connections.findById(environmentId(expired.environment_id), expired._id);
    expect(refused?.errors).toEqual([{ type: 'auth', log_id: expect.any(String) }]);
    expect(refused?.refresh_failure?.days).toHaveLength(1);
    await eventually(async () => ((await announcedRefreshFailures(expired.environment_id)).length === 1 ? true : undefined), 20_000, 'the expired token’s failed refresh announced');
    // Announced later than the near-expiry one would have been: that one never was.
    expect(await announcedRefreshFailures(nearExpiry.environment_id)).toEqual([]);

    // Nothing was charged to the connection: once the provider answers, it refreshes.
    if (status !== undefined) {
      const refreshed = await replica(direct).refresher.ensureFresh(kept!, held, { force: false, vendorJwt: false });
      expect(refreshed.credentials['access_token']).not.toBe('still-valid');
    }
  },
  60_000,
);

// "If refreshing fails for good, the fetch answers with HTTP 424": a provider's refusal of the
// refresh token is for good, however long the token in hand still works.
it('refuses a token near its expiry whose refresh token the provider refuses (400 invalid_grant), records the failure, announces it and backs off', async () => {
  const client = oauth.addClient({});
  const doc = await seedExpiredConnection('never-issued', client, new Date(Date.now() + 5 * 60_000));
  const { refresher, connections } = replica(direct);
  const held = { type: 'OAUTH2' as const, access_token: 'still-valid', refresh_token: 'never-issued', raw: {} };
  oauth.stats.reset();
  await expect(refresher.ensureFresh(doc, held, { force: false, vendorJwt: false })).rejects.toMatchObject({
    code: 'refresh_token_external_error',
    payload: { status: 400, error: 'invalid_grant' },
  });
  const stored = await connections.findById(environmentId(doc.environment_id), doc._id);
  expect(stored?.errors).toEqual([{ type: 'auth', log_id: expect.any(String) }]);
  expect(stored?.refresh_failure?.days).toHaveLength(1);
  await eventually(async () => ((await announcedRefreshFailures(doc.environment_id)).length === 1 ? true : undefined), 20_000, 'the refusal announced');
  await expect(refresher.ensureFresh(stored!, held, { force: false, vendorJwt: false })).rejects.toMatchObject({ code: 'connection_refresh_backoff' });
  expect(oauth.stats.tokenRequestLog.map((record) => record.status)).toEqual([400]);
});

// A forced refresh (force_refresh, or the proxy's after a 401) comes because the provider
// refused the token in hand: handing it out again would only fail again.
it('refuses a forced refresh that the token endpoint fails for now, though the token has an hour left', async () => {
  const client = oauth.addClient({});
  const refreshToken = await issuedRefreshToken(client);
  const doc = await seedExpiredConnection(refreshToken, client, new Date(Date.now() + 60 * 60_000));
  const { refresher, connections } = replica(direct);
  const held = { type: 'OAUTH2' as const, access_token: 'revoked-at-the-provider', refresh_token: refreshToken, raw: {} };
  oauth.failNextToken(503, { error: 'temporarily_unavailable' });
  await expect(refresher.ensureFresh(doc, held, { force: true, vendorJwt: false })).rejects.toMatchObject({
    code: 'refresh_token_external_error',
    payload: { status: 503 },
  });
  expect((await connections.findById(environmentId(doc.environment_id), doc._id))?.errors).toEqual([{ type: 'auth', log_id: expect.any(String) }]);
});
