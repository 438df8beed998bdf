import { CREDENTIAL_TYPES, type Credentials } from '@latchkey/contracts';
import { environmentId } from '@latchkey/mongo';
import { z } from 'zod';
import type { Keyring } from '../crypto/keyring.js';
import type { ConnectionDoc } from '../db/connection-model.js';

/** An end user's own OAuth client, kept with the credentials it was authorized with. */
type ClientOverride = { client_id: string; client_secret: string };

/**
 * A connection's credentials as the vault holds them: one of the contract's shapes (the API
 * document's types, `NONE` for `{}`), and an OAUTH1 connection authorized with the end user's
 * own client keeps that client (`config_override`) as OAUTH2 does. Code that reads any type the
 * same way (templates, injection) may still read a field by name.
 */
export type StoredCredentials = (Exclude<Credentials, { type: 'OAUTH1' }> | (Extract<Credentials, { type: 'OAUTH1' }> & { config_override?: ClientOverride })) &
  Record<string, unknown>;

/**
 * What a decryption checks: the type. The rest of the shape was checked when it was sealed —
 * `seal` takes `StoredCredentials` only, from the contract's schema on import or from the typed
 * results of a flow or a refresh — so reading it back does not refuse credentials over a field
 * the schema has tightened since.
 */
const storedCredentials = z.looseObject({ type: z.enum([...CREDENTIAL_TYPES, 'NONE']) }).transform((value) => value as StoredCredentials);

/** Where a connection's credentials are bound (AAD): to the connection and this one field. */
export const CREDENTIALS_PLACE = (doc: Pick<ConnectionDoc, '_id'>) => ({ connectionId: doc._id, field: 'connection.credentials' });

/**
 * A connection's credentials sealed and opened under the environment's data key, bound to the
 * connection: the one way the vault turns them into ciphertext and back.
 */
export function createConnectionCredentials(deps: { cipher: Pick<Keyring, 'encryptJson' | 'decryptJson'> }) {
  return {
    seal(doc: Pick<ConnectionDoc, '_id' | 'environment_id'>, credentials: StoredCredentials): Promise<string> {
      return deps.cipher.encryptJson(environmentId(doc.environment_id), CREDENTIALS_PLACE(doc), credentials);
    },
    open(doc: Pick<ConnectionDoc, '_id' | 'environment_id' | 'credentials'>): Promise<StoredCredentials> {
      return deps.cipher.decryptJson(environmentId(doc.environment_id), CREDENTIALS_PLACE(doc), doc.credentials, storedCredentials);
    },
  };
}

export type ConnectionCredentials = ReturnType<typeof createConnectionCredentials>;
