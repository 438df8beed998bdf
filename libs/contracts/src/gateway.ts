import { z } from 'zod';
import { defineBroadcast, defineEvent, defineRequest } from './define.js';

export const environmentVariable = z.object({
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be a letter or _ followed by letters, digits or _'),
  value: z.string().max(4096),
});

/** What other services may know of an environment. No API keys, no signing keys. */
export const environmentInfo = z.object({
  id: z.string(),
  public_id: z.string(),
  name: z.string(),
  account_id: z.string(),
  webhook_url: z.string().nullable(),
  webhook_url_secondary: z.string().nullable(),
  send_auth_webhooks: z.boolean(),
  callback_url: z.string().nullable(),
  variables: z.array(environmentVariable),
});
export type EnvironmentInfo = z.infer<typeof environmentInfo>;

export const gatewayContracts = {
  /**
   * Looks an environment up by id or public id, for services that need its settings. Its
   * variables go to the action-runner only (functions read them); any other caller, known by the
   * subject, gets none.
   */
  getEnvironment: defineRequest(
    'gateway.environment.get',
    z.union([z.object({ environment_id: z.string() }), z.object({ public_id: z.string() })]),
    environmentInfo,
    { perCaller: true },
  ),
  /**
   * The environment's Standard Webhooks signing secrets, newest first: the current one and any
   * retired less than 24 hours ago. For the webhook router only; secrets cross NATS, never logs.
   */
  getSigningKeys: defineRequest(
    'gateway.environment.signing_keys',
    z.object({ environment_id: z.string() }),
    z.object({ keys: z.array(z.string()).min(1) }),
  ),
  /** Every gateway replica drops its cached entry for this key digest (created, revoked). */
  apiKeyChanged: defineBroadcast('gateway.api_key.changed', z.object({ digest: z.string() })),
  /** Every gateway replica drops its cached copy of this environment (settings, keys, variables changed). */
  environmentChanged: defineBroadcast('gateway.environment.changed', z.object({ environment_id: z.string() })),
  environmentCreated: defineEvent('environment.created', z.object({ environment_id: z.string(), name: z.string() })),
  environmentUpdated: defineEvent('environment.updated', z.object({ environment_id: z.string(), name: z.string() })),
} as const;
