import { baseServiceSchema, durationMs, loadConfig } from '@latchkey/config';
import { versionedKeys } from '@latchkey/crypto';
import { parseCidrList } from '@latchkey/net';
import { z } from 'zod';

/**
 * Key-encryption keys: `<version>:<base64 of 32 bytes>`, comma-separated. The sealing version
 * (`ENCRYPTION_SEALING_VERSION`, else the highest) wraps new data keys; the others stay to unwrap
 * what they wrapped until rotated away.
 */
const encryptionKeys = versionedKeys;

export const configSchema = baseServiceSchema('credential-vault', 3010).extend({
  ENCRYPTION_KEYS: encryptionKeys,
  /**
   * The version of ENCRYPTION_KEYS that wraps new data keys and that `POST /admin/encryption/rotate`
   * moves them to; the highest when unset. A rotation across replicas first gives every replica
   * the new key while the old one still seals, then moves this to the new key.
   */
  ENCRYPTION_SEALING_VERSION: z.string().regex(/^v\d+$/, 'must look like v1, v2, ...').optional(),
  /** A YAML file of providers that add to or replace the built-in catalog. */
  PROVIDERS_FILE: z.string().optional(),
  /** Deadline of one call to a provider's token endpoint. */
  REFRESH_TIMEOUT_MS: durationMs(10_000),
  /** The gateway's public address: providers' logos are served there (`/logos/<provider>.svg`). */
  PUBLIC_URL: z.url().default('http://localhost:3003'),
  /**
   * CIDRs providers' token endpoints may be reached at although private, loopback… The proxy's
   * setting, read by both: one operator decision for a provider's API and its token endpoint.
   */
  PROXY_ALLOW_CIDRS: z
    .string()
    .default('')
    .refine((text) => {
      try {
        parseCidrList(text);
        return true;
      } catch {
        return false;
      }
    }, 'must be comma-separated CIDRs such as 10.0.0.0/8,127.0.0.1/32'),
}).refine(
  (config) => config.ENCRYPTION_SEALING_VERSION === undefined || config.ENCRYPTION_KEYS.some((key) => key.version === config.ENCRYPTION_SEALING_VERSION),
  { path: ['ENCRYPTION_SEALING_VERSION'], message: 'must be one of the versions of ENCRYPTION_KEYS' },
);

export type Config = z.infer<typeof configSchema>;

/** The only reader of process.env in this service. */
export const loadServiceConfig = (): Config => loadConfig(configSchema);
