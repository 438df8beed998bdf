import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import type { RequestOf, vaultWebhookContracts } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { connectionFixture } from '../db/connection-fixture.js';
import { createConnectionRepo, type ConnectionRepo } from '../db/connection-repo.js';
import { matchConnectionHandler, matchConnectionsHandler } from './webhooks.js';

const logger = createLogger({ service: 'test', level: 'error' });
let mongo: TestMongo;
let connection: Connection;
let connections: ConnectionRepo;

const env = environmentId('env_a');

async function seed(id: number, connectionId: string, accountId: string): Promise<void> {
  // Matching never reads credentials: the fixture's opaque blob is enough.
  await connections.insert(
    env,
    connectionFixture(
      { _id: `conn-doc-${id}`, id, provider_config_key: 'acme', connection_id: connectionId },
      { integration_id: 'int-acme', credentials_type: 'API_KEY', connection_config: { accountId, account: { id: accountId } } },
    ),
  );
}

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('vault'), logger });
  connections = createConnectionRepo(connection);
  await connections.init();
  await seed(1, 'conn-1', 'acct-9');
});

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

describe('vault.webhooks.match_many and vault.webhooks.match', () => {
  // The router's questions, which no user asks through the API: the e2e suite sees only where
  // the forwarded webhooks say they came from.
  it('find connections in batches, and one at a time as routers of earlier versions ask, with the same answers', async () => {
    const matchMany = matchConnectionsHandler({ connections });
    const matchOne = matchConnectionHandler({ connections });
    const lookups: RequestOf<typeof vaultWebhookContracts.matchConnections>['lookups'] = [
      { connection_id: 'conn-1' },
      { connection_id: 'ghost' },
      { field: 'connection_config', key: 'accountId', value: 'acct-9' },
      { field: 'connection_config', key: 'accountId', value: 'acct-0' },
      // A key that would reach into another field path is never queried.
      { field: 'connection_config', key: 'account.id', value: 'acct-9' },
    ];
    const { connection_ids } = await matchMany({ environment_id: 'env_a', provider_config_key: 'acme', lookups });
    expect(connection_ids).toEqual(['conn-1', null, 'conn-1', null, null]);
    for (const [index, by] of lookups.entries()) {
      expect(await matchOne({ environment_id: 'env_a', provider_config_key: 'acme', by })).toEqual({ connection_id: connection_ids[index] });
    }
    // Another environment's or integration's connections are never found.
    expect((await matchMany({ environment_id: 'env_b', provider_config_key: 'acme', lookups })).connection_ids).toEqual([null, null, null, null, null]);
    expect((await matchMany({ environment_id: 'env_a', provider_config_key: 'other', lookups })).connection_ids).toEqual([null, null, null, null, null]);
  });
});
