import type { ConnectionDoc } from './connection-model.js';

type Identity = Pick<ConnectionDoc, '_id' | 'id' | 'provider_config_key' | 'connection_id'>;

/**
 * A stored connection for the vault's integration tests: the identity given, the integration
 * named after its key, sealed-looking credentials of no type and every other field empty.
 */
export function connectionFixture(identity: Identity, fields: Partial<Omit<ConnectionDoc, 'environment_id'>> = {}): Omit<ConnectionDoc, 'environment_id'> {
  const now = new Date();
  return {
    integration_id: `int_${identity.provider_config_key}`,
    provider: identity.provider_config_key,
    credentials_type: 'NONE',
    credentials: 'sealed',
    credentials_version: 0,
    expires_at: null,
    metadata: {},
    connection_config: {},
    tags: {},
    end_user: null,
    errors: [],
    refresh_failure: null,
    created_via_session: false,
    created_at: now,
    updated_at: now,
    last_fetched_at: null,
    ...identity,
    ...fields,
  };
}
