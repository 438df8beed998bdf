import { afterAll, beforeAll, expect, it, jest } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { Connection } from 'mongoose';
import { createBus, type Bus } from '@latchkey/bus';
import { vaultContracts } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { connectMongo } from '@latchkey/mongo';
import { freePort, repoRoot, startMongo, startNats, startTcpRelay, uniqueDbName, type TestMongo, type TestNats, type TestTcpRelay } from '@latchkey/testing';

jest.setTimeout(90_000);

/**
 * Case 11 of the security run: the credential-read audit was best-effort. A kill -9 lost most
 * of the records of reads already answered, and reads were served while the audit could not be
 * written. Here the real vault process (its built `dist/`) runs against real NATS and a real
 * MongoDB-wire server, which it reaches through a relay that can cut it off.
 */

const logger = createLogger({ service: 'test', silent: true });
const CANARY_API_KEY = `canary-api-key-${randomBytes(12).toString('hex')}`;
/**
 * How long the vault waits for an audit write before it refuses the read: the services' 5 s.
 * Only the outage case waits it out; 1.5 s was a bet on a loaded machine for thirty reads' audit.
 */
const VAULT_REQUEST_TIMEOUT_MS = 5_000;

let nats: TestNats;
let mongo: TestMongo;
let relay: TestTcpRelay;
let bus: Bus;
let db: Connection;
let dbName: string;
const environment_id = `env_${randomBytes(6).toString('hex')}`;
const encryptionKeys = `v1:${randomBytes(32).toString('base64')}`;

async function startVault(): Promise<ChildProcess> {
  const healthPort = await freePort();
  const child = spawn(process.execPath, [join(repoRoot(), 'services/credential-vault/dist/main.js')], {
    env: {
      PATH: process.env['PATH'] ?? '',
      NATS_URL: nats.url,
      NATS_PASSWORD: nats.credentials('credential-vault').password,
      MONGODB_URI: `mongodb://127.0.0.1:${relay.port}/?directConnection=true`,
      MONGODB_DB: dbName,
      ENCRYPTION_KEYS: encryptionKeys,
      HEALTH_PORT: String(healthPort),
      REQUEST_TIMEOUT_MS: String(VAULT_REQUEST_TIMEOUT_MS),
      LOG_LEVEL: 'error',
    },
    stdio: 'ignore',
  });
  for (let waited = 0; waited < 30_000; waited += 100) {
    if (child.exitCode !== null) throw new Error(`the vault exited with ${child.exitCode}`);
    const ready = await fetch(`http://127.0.0.1:${healthPort}/ready`).then((response) => response.ok, () => false);
    if (ready) return child;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the vault did not become ready');
}

function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

const read = (connection_id: string) =>
  bus.request(
    vaultContracts.getConnection,
    {
      environment_id,
      reader: { key_id: 'key_reader' },
      connection_id,
      provider_config_key: 'airtable',
      include_credentials: true,
      include_refresh_token: false,
      force_refresh: false,
      refresh_vendor_app_jwt_token: false,
    },
    // Well past the vault's own deadline, so that what answers a read is the vault.
    { timeoutMs: 4 * VAULT_REQUEST_TIMEOUT_MS },
  );

async function auditedReads(connectionDocId: string): Promise<number> {
  const docs = await db.collection<{ count: number }>('credential_reads').find({ environment_id, connection: connectionDocId }).toArray();
  return docs.reduce((sum, doc) => sum + doc.count, 0);
}

let vault: ChildProcess | undefined;
let connectionDocId: string;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  relay = await startTcpRelay({ port: Number(new URL(mongo.uri).port) });
  dbName = uniqueDbName('vault_audit');
  db = await connectMongo({ uri: mongo.uri, dbName, logger });
  // The test reads as the gateway does, with the gateway's NATS identity.
  bus = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('gateway'), logger, requestTimeoutMs: 10_000 });
  vault = await startVault();
  await bus.request(vaultContracts.createIntegration, { environment_id, provider: 'airtable-pat', unique_key: 'airtable' });
  await bus.request(vaultContracts.createConnection, {
    environment_id,
    reader: { key_id: 'key_importer' },
    include_credentials: false,
    provider_config_key: 'airtable',
    connection_id: 'conn-audited',
    credentials: { type: 'API_KEY', apiKey: CANARY_API_KEY },
  });
  const stored = await db.collection<{ _id: string }>('connections').findOne({ environment_id, connection_id: 'conn-audited' });
  connectionDocId = stored!._id;
});

afterAll(async () => {
  if (vault) await killHard(vault);
  await bus?.drain();
  await db?.close();
  await relay?.close();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

it('case 11: every read answered before a kill -9 has its audit record afterwards', async () => {
  const N = 30;
  const answers = await Promise.all(Array.from({ length: N }, () => read('conn-audited')));
  await killHard(vault!);
  vault = undefined;
  expect(answers.every((answer) => JSON.stringify(answer).includes(CANARY_API_KEY))).toBe(true);
  expect(await auditedReads(connectionDocId)).toBeGreaterThanOrEqual(N);
});

it('case 11: with the audit store unavailable, no plaintext is served (503 service_unavailable)', async () => {
  vault = await startVault();
  // Reads put the connection in the vault's cache (the first one's last_fetched_at stamp drops
  // it once), so later reads need no database read: only the audit still needs the store.
  const before = await auditedReads(connectionDocId);
  for (let i = 0; i < 2; i++) expect(JSON.stringify(await read('conn-audited'))).toContain(CANARY_API_KEY);
  await new Promise((resolve) => setTimeout(resolve, 100));
  expect(JSON.stringify(await read('conn-audited'))).toContain(CANARY_API_KEY);
  expect(await auditedReads(connectionDocId)).toBe(before + 3);

  relay.cut();
  const refused = await read('conn-audited').then(
    (answer) => ({ answer }),
    (error: unknown) => ({ error: error as { code?: string; message?: string } }),
  );
  relay.restore();
  expect('answer' in refused ? JSON.stringify(refused.answer) : '').not.toContain(CANARY_API_KEY);
  expect('error' in refused ? refused.error.code : undefined).toBe('service_unavailable');
  expect(JSON.stringify(refused)).not.toContain(CANARY_API_KEY);
});

it('case 11: every import answered with its credentials has its audit record, a kill -9 right after notwithstanding', async () => {
  vault ??= await startVault();
  const ids = Array.from({ length: 10 }, (_, i) => `conn-imported-${i}`);
  const answers = await Promise.all(
    ids.map((connection_id) =>
      bus.request(vaultContracts.createConnection, {
        environment_id,
        reader: { key_id: 'key_importer' },
        include_credentials: true,
        provider_config_key: 'airtable',
        connection_id,
        credentials: { type: 'API_KEY', apiKey: CANARY_API_KEY },
      }),
    ),
  );
  await killHard(vault);
  vault = undefined;
  expect(answers.every((answer) => JSON.stringify(answer).includes(CANARY_API_KEY))).toBe(true);
  const stored = await db.collection<{ _id: string; connection_id: string }>('connections').find({ environment_id, connection_id: { $in: ids } }).toArray();
  expect(stored).toHaveLength(ids.length);
  for (const doc of stored) expect(await auditedReads(doc._id)).toBe(1);
});
