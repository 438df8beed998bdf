import { z } from 'zod';
import { defineEvent, defineJob, defineRequest } from './define.js';
import { CONNECTION_CONFIG_VALUE_MAX, connectionEventSchema } from './vault.js';

const environment_id = z.string().min(1);

/**
 * A provider's webhook as the gateway received it, persisted on JOBS before the provider gets
 * its 2xx. The body travels as base64 so that its exact bytes, which the provider signed, survive.
 */
export const inboundWebhook = z.object({
  /** Ours, made by the gateway: the inbound log's id and the root of the forwarded webhook-id. */
  id: z.string().min(1).max(64),
  environment_public_id: z.string().min(1).max(64),
  integration: z.string().min(1).max(128),
  query: z.record(z.string(), z.string()),
  /** Lower-cased names; hop-by-hop headers and cookies left out. */
  headers: z.record(z.string(), z.string()),
  body_base64: z.string(),
  received_at: z.string(),
});
export type InboundWebhook = z.infer<typeof inboundWebhook>;

/** One customer webhook to send: the same `webhook_id` (the Standard Webhooks `webhook-id`) on every attempt. */
export const webhookDelivery = z.object({
  webhook_id: z.string().min(1).max(128),
  environment_id,
  /** Which of the environment's URLs: one message may go to both, under the same webhook-id. */
  target: z.enum(['primary', 'secondary']),
  /**
   * The target's URL when the delivery was made. Each attempt goes to the URL the environment
   * has for its target then (an operator may have moved it); replicas of earlier versions send
   * to this one.
   */
  url: z.string().url(),
  kind: z.enum(['forward', 'auth', 'async_action', 'sync']),
  /** The JSON text signed and sent, byte for byte the same on every attempt. */
  body: z.string(),
  created_at: z.string(),
  /**
   * Attempts made before this message (absent: none). A delivery whose next attempt is far off
   * waits in the webhook router's database and comes back as a new message carrying its count,
   * so attempts are numbered, and backed off, by the sends alone.
   */
  attempts: z.number().int().min(0).optional(),
  /** Times in a row an open circuit or a busy URL held it since its last attempt (absent: none): each hold waits longer. */
  holds: z.number().int().min(0).optional(),
  /** Times it came back from waiting in the database (absent: never): names each wait, and the message that ends it. */
  revision: z.number().int().min(0).optional(),
});
export type WebhookDelivery = z.infer<typeof webhookDelivery>;

/**
 * How a provider signs its webhooks (the catalog's `webhook` block). `signed_content` is what the
 * HMAC covers, `{body}` by default; `{timestamp}` and `{id}` stand for the values of
 * `timestamp_header` (unix seconds) and `id_header` (the provider's delivery id). Only a signed
 * timestamp or id is ever used: the catalog refuses a header that its template does not sign.
 */
export const webhookSignatureScheme = z.object({
  header: z.string(),
  algorithm: z.enum(['sha256', 'sha1', 'sha512']),
  encoding: z.enum(['hex', 'base64']),
  prefix: z.string().optional(),
  signed_content: z.string().optional(),
  timestamp_header: z.string().optional(),
  id_header: z.string().optional(),
});
export type WebhookSignatureScheme = z.infer<typeof webhookSignatureScheme>;

export const webhookRoutingRule = z.object({
  body_path: z.string(),
  match: z.enum(['connection_config', 'metadata']),
  key: z.string(),
});
export type WebhookRoutingRule = z.infer<typeof webhookRoutingRule>;

/** One provider webhook as the inbound log tells an operator: what became of it, and why. */
export const inboundLogEntry = z.object({
  id: z.string(),
  integration: z.string(),
  provider: z.string().nullable(),
  status: z.enum(['forwarded', 'not_forwarded', 'rejected']),
  reason: z.string().nullable(),
  signature: z.string().nullable(),
  connection_id: z.string().nullable(),
  webhook_id: z.string().nullable(),
  received_at: z.string(),
  processed_at: z.string(),
});

/** One attempt at a customer webhook: where it went, what came back, and where the delivery stood after it. */
export const deliveryAttemptEntry = z.object({
  webhook_id: z.string(),
  target: z.enum(['primary', 'secondary']),
  kind: z.enum(['forward', 'auth', 'async_action', 'sync']),
  url: z.string(),
  attempt: z.number().int(),
  status: z.number().int().nullable(),
  error: z.string().nullable(),
  duration_ms: z.number(),
  outcome: z.enum(['delivered', 'retrying', 'failed']),
  next_attempt_at: z.string().nullable(),
  at: z.string(),
});

/** Newest first, `limit` at most; `before` (a time from the previous page) pages back. */
const logPage = { environment_id, limit: z.number().int().min(1).max(1000), before: z.iso.datetime({ offset: true }).optional() };

export const webhookContracts = {
  inbound: defineJob('webhook.inbound', inboundWebhook),
  deliver: defineJob('webhook.deliver', webhookDelivery),
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
  /** For the functions runtime: a connection exists now (any way it was made). */
  postCreation: defineEvent('connection.post_creation', connectionEventSchema),
  /** For the functions runtime: a connection is about to go. Deletion never waits for its consumers. */
  preDeletion: defineEvent('connection.pre_deletion', connectionEventSchema),
  /** For operators: an environment's inbound log (`GET /admin/environments/{name}/webhooks/inbound`). */
  listInbound: defineRequest(
    'webhook.inbound_log.list',
    z.object({ ...logPage, status: inboundLogEntry.shape.status.optional() }),
    z.object({ data: z.array(inboundLogEntry) }),
  ),
  /** For operators: an environment's delivery attempts (`GET /admin/environments/{name}/webhooks/attempts`). */
  listAttempts: defineRequest(
    'webhook.attempts.list',
    z.object({ ...logPage, webhook_id: z.string().min(1).max(128).optional(), outcome: deliveryAttemptEntry.shape.outcome.optional() }),
    z.object({ data: z.array(deliveryAttemptEntry) }),
  ),
} as const;

/**
 * How a webhook names its connection: by id, or by a value in the connection's config or
 * metadata. The router leaves out a lookup that does not fit (`connectionLookupSchema`), so one
 * webhook cannot fail the lookups of the others sent with it.
 */
export const connectionLookupSchema = z.union([
  z.object({ connection_id: z.string().min(1).max(255) }),
  z.object({ field: z.enum(['connection_config', 'metadata']), key: z.string().min(1), value: z.union([z.string().max(CONNECTION_CONFIG_VALUE_MAX), z.number(), z.boolean()]) }),
]);

/** The most lookups one `vault.webhooks.match_many` request carries. */
export const MATCH_MANY_MAX = 1000;

export const vaultWebhookContracts = {
  /**
   * What the webhook router needs of an integration: its provider, whether to forward, its
   * webhook secret (crosses NATS only, never logs or events) and the catalog's signature scheme
   * and routing rule.
   */
  webhookIntegration: defineRequest(
    'vault.webhooks.integration',
    z.object({ environment_id, unique_key: z.string().min(1).max(128) }),
    z.object({
      provider: z.string(),
      forward_webhooks: z.boolean(),
      /** The customer's knowing choice to take webhooks that carry no signature (default false: refused). */
      accept_unsigned_webhooks: z.boolean().default(false),
      webhook_secret: z.string(),
      signature: webhookSignatureScheme.nullable(),
      routing: webhookRoutingRule.nullable(),
    }),
  ),
  /**
   * Finds the connection a webhook is for, by connection id or by a config / metadata value.
   * Routers now ask `matchConnections`; still answered for replicas of earlier versions.
   */
  matchConnection: defineRequest(
    'vault.webhooks.match',
    z.object({ environment_id, provider_config_key: z.string(), by: connectionLookupSchema }),
    z.object({ connection_id: z.string().nullable() }),
  ),
  /**
   * The connections of many webhooks of one integration at once (the router's batches): one
   * answer per lookup, in order, each a connection id or null.
   */
  matchConnections: defineRequest(
    'vault.webhooks.match_many',
    z.object({ environment_id, provider_config_key: z.string(), lookups: z.array(connectionLookupSchema).min(1).max(MATCH_MANY_MAX) }),
    z.object({ connection_ids: z.array(z.string().nullable()) }),
  ),
} as const;
