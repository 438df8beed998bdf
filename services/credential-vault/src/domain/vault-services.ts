import type { ConnectSessionService } from './connect-sessions.js';
import type { ConnectionService } from './connections.js';
import type { IntegrationService } from './integrations.js';
import type { LifecycleEvents } from './lifecycle-events.js';

/** The vault's shared rules, built once by the wiring (start-vault.ts) and handed to the handlers. */
export interface VaultServices {
  integrationService: IntegrationService;
  connectionService: ConnectionService;
  sessionService: ConnectSessionService;
  /** Facts announced around writes, kept in the outbox until JetStream has them. */
  lifecycle: LifecycleEvents;
}
