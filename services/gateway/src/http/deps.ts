import type { Bus } from '@latchkey/bus';
import type { Logger } from '@latchkey/logger';
import type { Config } from '../config.js';
import type { AccountRepo } from '../db/account-repo.js';
import type { ApiKeyRepo } from '../db/api-key-repo.js';
import type { EnvironmentRepo } from '../db/environment-repo.js';
import type { GivenUpRepo } from '../db/given-up-repo.js';
import type { OperationRepo } from '../db/operation-repo.js';
import type { AuthFailureLimiter } from '../domain/auth-failures.js';
import type { KeyAuthenticator } from '../domain/authenticate-key.js';
import type { KeyCache } from '../domain/key-cache.js';
import type { KnownEnvironments } from '../domain/known-environments.js';
import type { ProviderLogos } from '../domain/provider-logos.js';
import type { LastUsedTracker } from '../domain/last-used.js';
import type { RateLimiter } from '../domain/rate-limiter.js';

/** Everything a route may use; built once in main.ts. */
export interface GatewayDeps {
  config: Pick<Config, 'ADMIN_TOKEN' | 'API_KEY_DIGEST_SECRET' | 'MAX_BODY_BYTES' | 'MAX_JSON_BODY_BYTES' | 'WEBHOOK_BODIES_HELD_BYTES' | 'WEBHOOK_BODY_TIMEOUT_MS' | 'PUBLIC_URL' | 'CONNECT_URL' | 'REQUEST_TIMEOUT_MS' | 'PROXY_TIMEOUT_MS' | 'FUNCTION_TIMEOUT_MS' | 'TRUSTED_PROXY_HOPS'>;
  logger: Logger;
  bus: Bus;
  keyCache: KeyCache;
  /** Bearer secret and client address to a key, in the order of checks of authenticate-key.ts. */
  authenticateKey: KeyAuthenticator;
  /** Failed authentications per client address (API keys and connect-session tokens). */
  authFailures: AuthFailureLimiter;
  rateLimiter: RateLimiter;
  /** Bytes of provider webhooks per environment and minute (WEBHOOK_INGEST_BYTES_PER_MINUTE). */
  webhookIngest: RateLimiter;
  /** Requests per connect session and minute (CONNECT_SESSION_REQUESTS_PER_MINUTE). */
  sessionLimiter: RateLimiter;
  lastUsed: LastUsedTracker;
  accounts: AccountRepo;
  environments: EnvironmentRepo;
  /** Environment public ids that exist (inbound webhooks). */
  knownEnvironments: KnownEnvironments;
  apiKeys: ApiKeyRepo;
  /** Every provider's logo (`GET /logos/{provider}.svg`). */
  logos: ProviderLogos;
  /** Messages the services' consumers gave up on (operator API). */
  givenUp: GivenUpRepo;
  /** The operations log (`GET /operations`, and the operator's view of it). */
  operations: OperationRepo;
  /** Whether this process is started and connected to NATS and MongoDB. */
  isReady(): boolean;
}
