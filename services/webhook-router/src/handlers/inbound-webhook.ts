import { inMessageContext, type BatchOutcome, type Bus, type JobMessage } from '@latchkey/bus';
import {
  MATCH_MANY_MAX,
  gatewayContracts,
  pathTooDeep,
  vaultWebhookContracts,
  webhookContracts,
  type EnvironmentInfo,
  type InboundWebhook,
  type ResponseOf,
} from '@latchkey/contracts';
import { toAppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import type { InboundWebhookDoc } from '../db/inbound-webhook-model.js';
import type { InboundWebhookRepo } from '../db/inbound-webhook-repo.js';
import type { WebhookClaimRepo } from '../db/webhook-claim-repo.js';
import { forwardBody, providerPayload, type ProviderPayload } from '../domain/payloads.js';
import { refusalReason, verifyProviderSignature } from '../domain/provider-signature.js';
import { connectionLookup, type ConnectionLookup } from '../domain/routing.js';
import { enqueueDeliveries, fitsDelivery } from '../domain/enqueue-deliveries.js';

type WebhookIntegration = ResponseOf<typeof vaultWebhookContracts.webhookIntegration>;

export interface InboundDeps {
  bus: Pick<Bus, 'request' | 'enqueue' | 'publish' | 'maxPayload'>;
  logger: Logger;
  inbound: InboundWebhookRepo;
  claims: Pick<WebhookClaimRepo, 'claim'>;
  environmentByPublicId(publicId: string): Promise<EnvironmentInfo>;
  integration(environmentId: string, uniqueKey: string): Promise<WebhookIntegration>;
}

/**
 * Provider bodies up to this size, nested at most `JSON_MAX_DEPTH` (64) levels, ride along in
 * `webhook.received` (the syncs' `onWebhook` functions get them); others are forwarded to the
 * customer as they came, alone.
 */
const EVENT_PAYLOAD_BYTES = 256 * 1024;

/** The webhook-id of a provider webhook's forwarded copy: derived, so a redelivery reuses it. */
export const forwardWebhookId = (inboundId: string) => `msg_${inboundId.replace(/^iwh_/, '')}`;

/** A verified webhook on its way: what routing and forwarding need. */
interface Verified {
  job: InboundWebhook;
  environment: EnvironmentInfo;
  integration: WebhookIntegration;
  signature: InboundWebhookDoc['signature'];
  /** What a replay of it would repeat: claimed once per window before it is routed. */
  replayKey: string;
  body: Buffer;
  provided: ProviderPayload;
  lookup: ConnectionLookup;
}

/** Where one webhook of a batch stands: to route, finished (its record known), or failed. */
type Step = { verified: Verified } | { record: () => Promise<void> } | { error: unknown };

/**
 * Handles a batch of persisted provider webhooks. Each one's signature is verified with the
 * integration's secret (no signature at all: refused unless the integration accepts unsigned
 * webhooks), a replay of one taken before is refused, its connection found, it is forwarded
 * when the integration says so, `webhook.received` announces it and its outcome is recorded; the connections of a batch are
 * looked up with one request per integration and the records written together, so a burst costs
 * a few round trips instead of a few per webhook. Idempotent: a redelivery repeats the same steps
 * with the same ids. A rejected webhook is recorded and acked (no retry can make it valid); a
 * service that does not answer makes that webhook's job come back later, the others go on.
 */
export function inboundWebhooksHandler(deps: InboundDeps) {
  /** Environment, integration and signature: a rejection is final and recorded as such. */
  async function verify(job: InboundWebhook): Promise<Step> {
    const base = { _id: job.id, integration: job.integration, received_at: new Date(job.received_at), webhook_id: null, connection_id: null, signature: null, provider: null };
    let environment: EnvironmentInfo;
    try {
      environment = await deps.environmentByPublicId(job.environment_public_id);
    } catch (error) {
      if (toAppError(error).code !== 'unknown_environment') throw error;
      const doc = { ...base, environment_id: job.environment_public_id, status: 'rejected', reason: 'unknown_environment', processed_at: new Date() } as const;
      return { record: () => deps.inbound.recordUnscoped(doc) };
    }
    const reject = (doc: Pick<InboundWebhookDoc, 'reason' | 'signature' | 'provider'>): Step => ({
      record: () => deps.inbound.record(environmentId(environment.id), { ...base, ...doc, status: 'rejected', processed_at: new Date() }),
    });

    let integration: WebhookIntegration;
    try {
      integration = await deps.integration(environment.id, job.integration);
    } catch (error) {
      if (toAppError(error).code !== 'unknown_provider_config') throw error;
      return reject({ reason: 'unknown_integration', signature: null, provider: null });
    }

    const body = Buffer.from(job.body_base64, 'base64');
    const { verdict: signature, replayKey } = verifyProviderSignature({
      declared: integration.signature,
      provider: integration.provider,
      secret: integration.webhook_secret,
      headers: job.headers,
      body,
      receivedAt: Date.parse(job.received_at),
    });
    // The one gate to routing, forwarding and onWebhook: nothing below runs for a refused webhook.
    const refused = refusalReason(signature, integration.accept_unsigned_webhooks);
    if (refused !== null || replayKey === null) {
      deps.logger.warn('rejected a provider webhook', { inbound: job.id, integration: job.integration, signature });
      return reject({ reason: refused ?? 'bad_signature', signature, provider: integration.provider });
    }
    const provided = providerPayload(body);
    const lookup = connectionLookup(job.query, provided.json ? provided.payload : null, integration.routing);
    return { verified: { job, environment, integration, signature, replayKey, body, provided, lookup } };
  }

  /**
   * Claims every verified webhook of the batch in one insert; a replay (its key held by another
   * inbound webhook within the window) becomes a `replayed` rejection. A failed insert leaves the
   * whole batch to come back later.
   */
  async function refuseReplays(steps: Step[]): Promise<Step[]> {
    const verified = steps.flatMap((step) => ('verified' in step ? [step.verified] : []));
    if (verified.length === 0) return steps;
    let held: boolean[];
    try {
      held = await deps.claims.claim(
        verified.map((item) => ({ environment: environmentId(item.environment.id), integration: item.job.integration, key: item.replayKey, inboundId: item.job.id })),
      );
    } catch (error) {
      return steps.map((step) => ('verified' in step ? { error } : step));
    }
    const replays = new Set(verified.filter((_, index) => held[index] === false));
    return steps.map((step): Step => {
      if (!('verified' in step) || !replays.has(step.verified)) return step;
      const { job, environment, integration, signature } = step.verified;
      deps.logger.warn('rejected a replayed provider webhook', { inbound: job.id, integration: job.integration });
      const doc = {
        _id: job.id,
        integration: job.integration,
        received_at: new Date(job.received_at),
        status: 'rejected',
        reason: 'replayed',
        signature,
        provider: integration.provider,
        connection_id: null,
        webhook_id: null,
        processed_at: new Date(),
      } as const;
      return { record: () => deps.inbound.record(environmentId(environment.id), doc) };
    });
  }

  /** The connection of each verified webhook (null: none named or none found), one request per integration. */
  async function matchConnections(batch: Verified[]): Promise<Map<Verified, string | null | { error: unknown }>> {
    const found = new Map<Verified, string | null | { error: unknown }>();
    const groups = new Map<string, Array<Verified & { lookup: NonNullable<ConnectionLookup> }>>();
    for (const item of batch) {
      if (item.lookup === null) {
        found.set(item, null);
        continue;
      }
      const key = JSON.stringify([item.environment.id, item.job.integration]);
      const group = groups.get(key) ?? [];
      group.push(item as Verified & { lookup: NonNullable<ConnectionLookup> });
      groups.set(key, group);
    }
    const requests: Array<Promise<void>> = [];
    for (const group of groups.values()) {
      for (let start = 0; start < group.length; start += MATCH_MANY_MAX) {
        const chunk = group.slice(start, start + MATCH_MANY_MAX);
        const first = chunk[0]!;
        requests.push(
          deps.bus
            .request(vaultWebhookContracts.matchConnections, {
              environment_id: first.environment.id,
              provider_config_key: first.job.integration,
              lookups: chunk.map((item) => item.lookup),
            })
            .then(
              ({ connection_ids }) => chunk.forEach((item, index) => found.set(item, connection_ids[index] ?? null)),
              (error: unknown) => chunk.forEach((item) => found.set(item, { error })),
            ),
        );
      }
    }
    await Promise.all(requests);
    return found;
  }

  /** Forwards (when the integration says so) and announces one routed webhook; answers how to record it. */
  async function route(item: Verified, connectionId: string | null): Promise<Step> {
    const { job, environment, integration, body, provided, signature } = item;
    let status: InboundWebhookDoc['status'] = 'not_forwarded';
    let reason: string | null = integration.forward_webhooks ? 'no_webhook_url' : 'forward_webhooks_off';
    let webhookId: string | null = null;
    if (integration.forward_webhooks) {
      const forward = forwardBody({ provider: integration.provider, integration: job.integration, connectionId, payload: provided });
      if (fitsDelivery(deps.bus, forward)) {
        webhookId = forwardWebhookId(job.id);
        const made = await enqueueDeliveries(deps.bus, environment, { webhookId, kind: 'forward', body: forward });
        if (made > 0) [status, reason] = ['forwarded', null];
        else webhookId = null;
      } else {
        reason = 'payload_too_large';
      }
    }
    // Once per inbound webhook within JetStream's 2-minute duplicate window: a batch that comes
    // again in it (its record's insert failed, or the publish's acknowledgement was lost) does
    // not run the syncs' `onWebhook` twice. Past the window (the database away for longer, the
    // batch nak'ed meanwhile) it is published again, and `onWebhook` runs again: at least once.
    await deps.bus.publish(
      webhookContracts.received,
      {
        environment_id: environment.id,
        inbound_id: job.id,
        provider_config_key: job.integration,
        provider: integration.provider,
        connection_id: connectionId,
        ...(provided.json && body.length <= EVENT_PAYLOAD_BYTES && pathTooDeep(provided.payload) === undefined && { payload: provided.payload }),
      },
      { msgId: `received-${job.id}` },
    );
    const doc = {
      _id: job.id,
      integration: job.integration,
      received_at: new Date(job.received_at),
      status,
      reason,
      signature,
      provider: integration.provider,
      connection_id: connectionId,
      webhook_id: webhookId,
      processed_at: new Date(),
    };
    return { record: () => deps.inbound.record(environmentId(environment.id), doc) };
  }

  /** Runs `work` under the request id and trace the webhook came with, so its hops, log lines and spans carry them. */
  const asOwn = <T>(msg: JobMessage, work: () => Promise<T>): Promise<T> => inMessageContext(msg.headers, msg.subject, 'consumer', work);
  const settled = (work: () => Promise<Step>) => work().catch((error: unknown): Step => ({ error }));

  return async (items: Array<{ payload: InboundWebhook; msg: JobMessage }>): Promise<BatchOutcome[]> => {
    const steps = await refuseReplays(await Promise.all(items.map(({ payload, msg }) => asOwn(msg, () => settled(() => verify(payload))))));
    const verified = steps.flatMap((step) => ('verified' in step ? [step.verified] : []));
    const connections = verified.length === 0 ? new Map() : await matchConnections(verified);
    const routed = await Promise.all(
      steps.map((step, index) => {
        if (!('verified' in step)) return step;
        const connection = connections.get(step.verified);
        if (connection !== null && typeof connection === 'object') return { error: connection.error } as Step;
        return asOwn(items[index]!.msg, () => settled(() => route(step.verified, connection ?? null)));
      }),
    );
    // Every record of the batch is written together (one insert); a webhook is acked only once its record is stored.
    return Promise.all(
      routed.map((step): Promise<BatchOutcome> => {
        if ('error' in step) return Promise.resolve({ ok: false, error: step.error });
        if ('record' in step) return step.record().then(() => ({ ok: true }) as const, (error: unknown) => ({ ok: false, error }) as const);
        return Promise.resolve({ ok: false, error: new Error('a webhook was left unrouted') });
      }),
    );
  };
}

/** The gateway's view of an environment, by public id (the inbound URL names it so). */
export const environmentByPublicIdLoader = (bus: Pick<Bus, 'request'>) => (publicId: string) =>
  bus.request(gatewayContracts.getEnvironment, { public_id: publicId });
