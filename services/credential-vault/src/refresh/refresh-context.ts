import type { HttpClient } from '@latchkey/net';
import type { TokenRequest } from '../catalog/provider-schema.js';
import type { ProviderEntry } from '../domain/vault-deps.js';

/** What a token request reads: the provider entry, the integration's client, the connection. */
export interface RefreshContext {
  /** The catalog entry; `token_request` is read by TWO_STEP, BILL and SIGNATURE. */
  provider: ProviderEntry & { token_request?: TokenRequest | undefined };
  /** The integration's client credentials (client_id, client_secret, app_id, private_key…). */
  client: Record<string, string>;
  connectionConfig: Record<string, unknown>;
  credentials: Record<string, unknown>;
  now: Date;
  timeoutMs: number;
  /** The outbound client (libs/net) with the address policy: the only way to a token endpoint. */
  http: HttpClient;
}
