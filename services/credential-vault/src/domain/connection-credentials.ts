import { environmentId } from '@latchkey/mongo';
import { z } from 'zod';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { CredentialCipher } from './vault-deps.js';

/** Where a connection's credentials are bound (AAD): to the connection and this one field. */
export const CREDENTIALS_PLACE = (doc: Pick<ConnectionDoc, '_id'>) => ({ connectionId: doc._id, field: 'connection.credentials' });

const storedCredentials = z.record(z.string(), z.unknown());

/**
 * A connection's credentials sealed and opened under the environment's data key, bound to the
 * connection: the one way the vault turns them into ciphertext and back.
 */
export function createConnectionCredentials(deps: { cipher: Pick<CredentialCipher, 'encryptJson' | 'decryptJson'> }) {
  return {
    seal(doc: Pick<ConnectionDoc, '_id' | 'environment_id'>, credentials: Record<string, unknown>): Promise<string> {
      return deps.cipher.encryptJson(environmentId(doc.environment_id), CREDENTIALS_PLACE(doc), credentials);
    },
    open(doc: Pick<ConnectionDoc, '_id' | 'environment_id' | 'credentials'>): Promise<Record<string, unknown>> {
      return deps.cipher.decryptJson(environmentId(doc.environment_id), CREDENTIALS_PLACE(doc), doc.credentials, storedCredentials);
    },
  };
}

export type ConnectionCredentials = ReturnType<typeof createConnectionCredentials>;
