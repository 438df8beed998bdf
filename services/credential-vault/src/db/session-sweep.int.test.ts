import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { Connection } from 'mongoose';
import { createLogger } from '@latchkey/logger';
import { connectMongo, environmentId } from '@latchkey/mongo';
import { startMongo, uniqueDbName, type TestMongo } from '@latchkey/testing';
import { createConnectSessionRepo } from './connect-session-repo.js';
import { createOAuthSessionRepo } from './oauth-session-model.js';

let mongo: TestMongo;
let connection: Connection;

beforeAll(async () => {
  mongo = await startMongo();
  connection = await connectMongo({ uri: mongo.uri, dbName: uniqueDbName('sessions'), logger: createLogger({ service: 'test', level: 'error' }) });
}, 60_000);

afterAll(async () => {
  await connection?.close();
  await mongo?.dispose();
});

it('deletes connect sessions and OAuth flows past their expiry, and keeps the live ones', async () => {
  const sessions = createConnectSessionRepo(connection);
  const flows = createOAuthSessionRepo(connection);
  await Promise.all([sessions.init(), flows.init()]);
  const now = new Date();
  const at = (minutes: number) => new Date(now.getTime() + minutes * 60_000);
  const session = (id: string, expires_at: Date) => ({
    _id: id,
    digest: `digest-${id}`,
    tags: {},
    allowed_integrations: null,
    // A customer's OAuth client for the flow: what an expired session must not keep.
    integrations_config_defaults: { crm: { connection_config: { oauth_client_id_override: 'id', oauth_client_secret_override: 'secret' } } },
    overrides: {},
    end_user: null,
    organization: null,
    reconnect: null,
    created_at: now,
    expires_at,
  });
  await sessions.insert(environmentId('env_a'), session('cs_old', at(-1)));
  await sessions.insert(environmentId('env_a'), session('cs_live', at(29)));
  const flow = (id: string, expires_at: Date) => ({
    _id: id,
    environment_id: 'env_a',
    state: `state-${id}`,
    session_digest: 'digest-cs_live',
    integration: 'crm',
    redirect_uri: 'http://127.0.0.1/callback',
    code_verifier: null,
    connection_config: {},
    created_at: now,
    expires_at,
  });
  await flows.insert(flow('os_old', at(-1)));
  await flows.insert(flow('os_live', at(9)));

  expect(await sessions.removeExpired(now)).toBe(1);
  expect(await flows.removeExpired(now)).toBe(1);
  expect(await sessions.findByDigest('digest-cs_old')).toBeNull();
  expect(await sessions.findByDigest('digest-cs_live')).not.toBeNull();
  expect(await flows.consume('state-os_old')).toBeNull();
  expect(await flows.consume('state-os_live')).not.toBeNull();
});
