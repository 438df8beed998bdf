import { z } from 'zod';
import { defineEvent } from './define.js';

const environment_id = z.string().min(1);

/**
 * The webhook router owns this file. Only `webhook.received`, which the functions runtime
 * consumes, is written here so far, exactly as the webhook router defines it; its other
 * contracts arrive with its branch.
 */
export const webhookContracts = {
  /** A provider webhook was verified and routed (connection_id null when unmatched); for the functions runtime. */
  received: defineEvent(
    'webhook.received',
    z.object({
      environment_id,
      inbound_id: z.string(),
      provider_config_key: z.string(),
      provider: z.string(),
      connection_id: z.string().nullable(),
      /** The provider's body when it is JSON and small enough to ride along; else fetch nothing, it is gone. */
      payload: z.unknown().optional(),
    }),
  ),
} as const;
