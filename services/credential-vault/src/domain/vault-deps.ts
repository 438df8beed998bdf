import type { Bus } from '@latchkey/bus';
import type { Logger } from '@latchkey/logger';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { ConnectionRepo } from '../db/connection-repo.js';
import type { IntegrationRepo } from '../db/integration-repo.js';
import type { Keyring } from '../crypto/keyring.js';
import type { ConnectionCache } from './connection-cache.js';
import type { StoredCredentials } from './connection-credentials.js';
import type { ReadAudit } from './read-audit.js';

/** Encryption at rest, as the handlers use it: the keyring (crypto/keyring.ts). */
export type CredentialCipher = Pick<Keyring, 'encrypt' | 'decrypt' | 'encryptJson' | 'decryptJson'>;

/** A provider entry, as far as the handlers need it. */
export interface ProviderEntry {
  display_name: string;
  auth_mode: string;
  logo_url?: string | undefined;
  authorization_url?: string | undefined;
  token_url?: string | undefined;
  request_url?: string | undefined;
  token_params?: Record<string, string> | undefined;
  refresh_params?: Record<string, string> | undefined;
  token_request_auth_method?: 'basic' | 'body' | undefined;
  connection_configuration?: string[] | undefined;
  /** The catalog's rules per connection config field (a `pattern` for host-bearing ones). */
  connection_config?: Readonly<Record<string, { pattern?: string | undefined }>> | undefined;
  /** RFC 9207: the issuer the authorization response's `iss` must equal. */
  issuer?: string | undefined;
  /** JWT: the `aud` claim and lifetime of the tokens the vault signs. */
  jwt?: { audience?: string | undefined; lifetime_seconds?: number | undefined } | undefined;
  /** The provider always sends `iss` in authorization responses: a response without it is refused. */
  authorization_response_iss_parameter_supported?: boolean | undefined;
  webhook?:
    | {
        signature_header: string;
        algorithm: 'sha256' | 'sha1' | 'sha512';
        encoding: 'hex' | 'base64';
        prefix?: string | undefined;
        signed_content?: string | undefined;
        timestamp_header?: string | undefined;
        id_header?: string | undefined;
        routing?: { body_path: string; match: 'connection_config' | 'metadata'; key: string } | undefined;
      }
    | undefined;
}

/** Keeps tokens fresh on fetch; see refresh/refresher.ts. */
export interface Refresher {
  ensureFresh(
    doc: ConnectionDoc,
    credentials: StoredCredentials,
    options: { force: boolean; vendorJwt: boolean },
  ): Promise<{ doc: ConnectionDoc; credentials: StoredCredentials }>;
  /** Drops what it keeps of a deleted connection (a provider's answer not yet stored holds credentials). */
  forget(doc: Pick<ConnectionDoc, '_id'>): Promise<void>;
}

export interface VaultDeps {
  bus: Bus;
  logger: Logger;
  integrations: IntegrationRepo;
  connections: ConnectionRepo;
  cipher: CredentialCipher;
  providers: { get(name: string): ProviderEntry | undefined };
  /** A provider's logo as an absolute URL (the catalog's own, or the gateway's `/logos/`). */
  logoUrl(provider: string): string;
  refresher: Refresher;
  audit: ReadAudit;
  cache: ConnectionCache;
}
