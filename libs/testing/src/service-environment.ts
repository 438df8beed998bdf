import type { ServiceName } from '@latchkey/contracts';
import { uniqueDbName } from './mongo-server.js';
import type { NatsCredentials } from './nats-server.js';

/** What a service under test needs of the NATS server (or cluster) it joins. */
export interface NatsForService {
  url: string;
  credentials(identity: ServiceName): NatsCredentials;
}

/**
 * The variables a service started in-process by a test reads, as `configSchema.parse` takes them:
 * its own NATS identity, a database of its own on `mongoUri`, errors-only logs and a probe server
 * on a free port. `extra` adds or overrides variables (a setting the test is about).
 */
export function serviceEnvironment(
  service: ServiceName,
  nats: NatsForService,
  mongoUri: string,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    NATS_URL: nats.url,
    NATS_PASSWORD: nats.credentials(service).password,
    MONGODB_URI: mongoUri,
    MONGODB_DB: uniqueDbName(service.replace(/-/g, '_')),
    LOG_LEVEL: 'error',
    HEALTH_PORT: '0',
    ...extra,
  };
}
