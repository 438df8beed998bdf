import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import type { ConnectSessionDoc } from '../db/connect-session-model.js';
import { connectionFixture } from '../db/connection-fixture.js';
import { createConnectionRepo, type ConnectionRepo } from '../db/connection-repo.js';
import type { IntegrationDoc } from '../db/integration-model.js';
import { createConnectSessionService } from './connect-sessions.js';

const environment = environmentId('env_reconnect');
let mongo: TestMongo;
let connection: Connection;
let repo: ConnectionRepo;

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('reconnect'), logger: createLogger({ service: 'test', level: 'error' }) });
  repo = createConnectionRepo(connection);
  await repo.init();
}, 60_000);

afterAll(async () => {
  await connection?.dropDatabase();
  await connection?.close();
  await mongo?.dispose();
});

it("keeps the tags a PATCH wrote between a reconnect's read and its write", async () => {
  const stored = await repo.insert(
    environment,
    connectionFixture({ _id: 'conn_re1', id: 1, provider_config_key: 'crm', connection_id: 'c1' }, { tags: { tenant: 'acme', team: 'sales' } }),
  );
  let patched = false;
  // The PATCH lands once the reconnect has read the connection, just before its compare-and-set.
  const connections: Pick<ConnectionRepo, 'find' | 'replaceCredentials' | 'insert'> = {
    find: repo.find,
    insert: repo.insert,
    replaceCredentials: async (...args) => {
      if (!patched) {
        patched = true;
        await repo.update(environment, stored._id, { tags: { team: 'support' }, updated_at: new Date(stored.updated_at.getTime() + 1_000) });
      }
      return repo.replaceCredentials(...args);
    },
  };
  const service = createConnectSessionService({
    providers: { get: () => undefined } as never,
    sessions: { findByDigest: async () => null, removeByDigest: async () => false, countConnection: async () => false },
    connections,
    integrationService: { find: async () => ({ _id: 'int_crm', unique_key: 'crm', provider: 'crm' }) as IntegrationDoc, storing: (_environment, _integration, store) => store() },
    credentials: { seal: async () => 'sealed-new' },
    lifecycle: { announce: (_connection, _holds, _events, change) => change() },
  });
  const session = {
    _id: 'cs_re1',
    environment_id: environment,
    digest: 'digest-re1',
    tags: { source: 'relink' },
    allowed_integrations: null,
    integrations_config_defaults: {},
    overrides: {},
    end_user: null,
    organization: null,
    reconnect: { connection_id: 'c1', integration_id: 'crm' },
    created_at: new Date(),
    expires_at: new Date(Date.now() + 60_000),
  } satisfies ConnectSessionDoc;

  expect(await service.saveConnection(session, 'crm', { type: 'API_KEY', apiKey: 'key' } as never)).toMatchObject({ operation: 'override' });
  const doc = await repo.findById(environment, stored._id);
  // The tenant tag the PATCH removed stays removed; the session's tag is added to the PATCH's.
  expect(doc).toMatchObject({ credentials: 'sealed-new', credentials_version: 1, tags: { team: 'support', source: 'relink' } });
  expect(doc!.tags).not.toHaveProperty('tenant');
}, 30_000);
