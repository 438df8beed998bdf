import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { createBus, type Bus } from '@latchkey/bus';
import { vaultContracts, webhookContracts, type PayloadOf, type ServiceName } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { eventually, startMongo, startNats, type TestMongo, type TestNats, serviceEnvironment } from '@latchkey/testing';
import { configSchema } from './config.js';
import { startVault } from './start-vault.js';

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let mongo: TestMongo;
let vault: RunningService<void>;
let gateway: Bus;
let observer: Bus;
/** Every connection lifecycle event heard, by subject. */
const heard: Array<{ subject: string; event: PayloadOf<typeof webhookContracts.postCreation> }> = [];

const login = (service: ServiceName | 'observer') => createBus({ servers: nats.url, service, identity: nats.credentials(service), logger, requestTimeoutMs: 5_000 });

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  const config = configSchema.parse(serviceEnvironment('credential-vault', nats, mongo.uri, { ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}` }));
  // The vault itself, wired as main.ts wires it.
  vault = await runService({ service: 'credential-vault', config, start: startVault, handleSignals: false });
  gateway = await login('gateway');
  observer = await login('observer');
  for (const contract of [webhookContracts.postCreation, webhookContracts.preDeletion]) {
    observer.subscribeRaw(contract.subject, (message) => heard.push({ subject: contract.subject, event: JSON.parse(Buffer.from(message.data).toString()) }));
  }
  await observer.flush();
}, 60_000);

afterAll(async () => {
  await observer?.drain();
  await gateway?.drain();
  await vault?.runtime.mongo.dropDatabase().catch(() => undefined);
  await vault?.shutdown();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});


describe('connection lifecycle events', () => {
  // For the functions runtime, not for users: the e2e suite sees them only through the
  // post-creation and pre-deletion functions they start (functions.e2e.test.ts).
  it('announce connection.post_creation on create and connection.pre_deletion on delete, with the connection’s names and tags and no credentials', async () => {
    const environment_id = 'env_a';
    await gateway.request(vaultContracts.createIntegration, { environment_id, provider: 'anthropic', unique_key: 'llm' });
    const apiKey = `secret-${randomBytes(8).toString('hex')}`;
    await gateway.request(vaultContracts.createConnection, {
      environment_id,
      reader: { key_id: 'key-1' },
      include_credentials: false,
      provider_config_key: 'llm',
      connection_id: 'short-lived',
      credentials: { type: 'API_KEY', apiKey },
      tags: { team: 'blue' },
    });
    const created = await eventually(() => heard.find((item) => item.subject === webhookContracts.postCreation.subject), 10_000, 'connection.post_creation', 50);
    expect(created.event).toMatchObject({ environment_id, connection_id: 'short-lived', provider_config_key: 'llm', provider: 'anthropic', tags: { team: 'blue' } });

    expect(await gateway.request(vaultContracts.deleteConnection, { environment_id, connection_id: 'short-lived', provider_config_key: 'llm' })).toEqual({ success: true });
    const deleted = await eventually(() => heard.find((item) => item.subject === webhookContracts.preDeletion.subject), 10_000, 'connection.pre_deletion', 50);
    expect(deleted.event).toMatchObject({ environment_id, connection_id: 'short-lived', provider_config_key: 'llm', provider: 'anthropic', tags: { team: 'blue' } });

    expect(JSON.stringify(heard)).not.toContain(apiKey);
  }, 30_000);
});

describe('writes to one connection at once', () => {
  // FerretDB, the embedded default, applies an update by reading the document and writing it
  // back whole. Two writes to one connection at once each wrote back what the other had not set
  // yet, and one was lost: a metadata key, a tag, or (a refresh meeting any other write) the
  // provider's new tokens. Every replica's writes to a connection take its write lock.
  it('keep what each writer set', async () => {
    const environment_id = 'env_concurrent';
    const provider_config_key = 'llm';
    const connection_id = 'busy';
    await gateway.request(vaultContracts.createIntegration, { environment_id, provider: 'anthropic', unique_key: provider_config_key });
    await gateway.request(vaultContracts.createConnection, {
      environment_id,
      reader: { key_id: 'key-1' },
      include_credentials: false,
      provider_config_key,
      connection_id,
      credentials: { type: 'API_KEY', apiKey: `secret-${randomBytes(8).toString('hex')}` },
    });
    const keys = Array.from({ length: 16 }, (_, i) => `k${i}`);
    await Promise.all([
      ...keys.map((key, i) => gateway.request(vaultContracts.writeMetadata, { environment_id, provider_config_key, connection_ids: [connection_id], mode: 'merge', metadata: { [key]: i } })),
      gateway.request(vaultContracts.patchConnection, { environment_id, provider_config_key, connection_id, tags: { team: 'green' } }),
    ]);
    const stored = await gateway.request(vaultContracts.getConnection, {
      environment_id,
      reader: { key_id: 'key-1' },
      connection_id,
      provider_config_key,
      include_credentials: false,
      include_refresh_token: false,
      force_refresh: false,
      refresh_vendor_app_jwt_token: false,
    });
    expect(stored.metadata).toEqual(Object.fromEntries(keys.map((key, i) => [key, i])));
    expect(stored.tags).toEqual({ team: 'green' });
  }, 30_000);

  it('hold metadata to 64 KiB of JSON however many merges add to it, refusing before anything changes', async () => {
    const environment_id = 'env_metadata_size';
    const provider_config_key = 'llm';
    await gateway.request(vaultContracts.createIntegration, { environment_id, provider: 'anthropic', unique_key: provider_config_key });
    for (const connection_id of ['a', 'b']) {
      await gateway.request(vaultContracts.createConnection, { environment_id, reader: { key_id: 'key-1' }, include_credentials: false, provider_config_key, connection_id, credentials: { type: 'API_KEY', apiKey: 'k' } });
    }
    const write = (connection_ids: string[], metadata: Record<string, unknown>) =>
      gateway.request(vaultContracts.writeMetadata, { environment_id, provider_config_key, connection_ids, mode: 'merge', metadata });
    await write(['a'], { first: 'x'.repeat(40 * 1024) });
    // 40 KiB more fits b, not a: neither changes.
    const refused = await write(['a', 'b'], { second: 'y'.repeat(40 * 1024) }).then(() => undefined, (error: unknown) => error);
    expect(refused).toMatchObject({ code: 'invalid_body', errors: [{ path: 'metadata' }] });
    const read = (connection_id: string) =>
      gateway.request(vaultContracts.getConnection, { environment_id, reader: { key_id: 'key-1' }, connection_id, provider_config_key, include_credentials: false, include_refresh_token: false, force_refresh: false, refresh_vendor_app_jwt_token: false });
    expect(Object.keys((await read('a')).metadata)).toEqual(['first']);
    expect((await read('b')).metadata).toEqual({});
    await write(['b'], { second: 'y'.repeat(40 * 1024) });
    expect(Object.keys((await read('b')).metadata)).toEqual(['second']);
  }, 30_000);
});
