import { AppError } from '@latchkey/errors';
import type { HttpClient } from '@latchkey/net';
import type { TokenRequest } from '../catalog/provider-schema.js';
import type { StoredCredentials } from '../domain/connection-credentials.js';
import type { ProviderEntry } from '../domain/vault-deps.js';

/** What a token request reads: the provider entry, the integration's client, the connection. */
export interface RefreshContext {
  /** The catalog entry; `token_request` is read by TWO_STEP, BILL and SIGNATURE. */
  provider: ProviderEntry & { token_request?: TokenRequest | undefined };
  /** The integration's client credentials (client_id, client_secret, app_id, private_key…). */
  client: Record<string, string>;
  connectionConfig: Record<string, unknown>;
  credentials: StoredCredentials;
  now: Date;
  timeoutMs: number;
  /** The outbound client (libs/net) with the address policy: the only way to a token endpoint. */
  http: HttpClient;
}

/** Credentials of one type. */
export type CredentialsOf<T extends StoredCredentials['type']> = Extract<StoredCredentials, { type: T }>;

/** The credentials, as the type the connection is refreshed as; another type is a bug, never refreshed as this one. */
export function credentialsOfType<T extends StoredCredentials['type']>(credentials: StoredCredentials, type: T): CredentialsOf<T> {
  if (credentials.type !== type) throw new AppError('internal_error', `credentials of type ${credentials.type} cannot be refreshed as ${type}`);
  return credentials as CredentialsOf<T>;
}
