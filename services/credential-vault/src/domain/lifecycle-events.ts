import { randomUUID } from 'node:crypto';
import type { Bus } from '@latchkey/bus';
import { vaultContracts, webhookContracts, type PayloadOf } from '@latchkey/contracts';
import type { Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import type { ConnectionDoc } from '../db/connection-model.js';
import { credentialsVersionOf, type ConnectionRepo } from '../db/connection-repo.js';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { IntegrationRepo } from '../db/integration-repo.js';
import type { LifecycleOutboxDoc, LifecycleOutboxRepo } from '../db/lifecycle-outbox-model.js';

/** The facts the outbox carries: what follows from them elsewhere has no other trigger. */
const LIFECYCLE_CONTRACTS = [vaultContracts.connectionCreated, webhookContracts.postCreation, vaultContracts.connectionDeleted, vaultContracts.integrationRemoved] as const;
type OutboxContract = (typeof LIFECYCLE_CONTRACTS)[number];
const contractOf = new Map<string, OutboxContract>(LIFECYCLE_CONTRACTS.map((contract) => [contract.subject, contract]));
/** A connection's facts, announced around its writes. */
type LifecycleContract = Exclude<OutboxContract, typeof vaultContracts.integrationRemoved>;

export interface LifecycleEvent {
  contract: LifecycleContract;
  payload: PayloadOf<LifecycleContract>;
}

/**
 * How long a write waits for JetStream to store its facts (a leader election, a restart) before
 * it answers and leaves them to the sweep.
 */
const PUBLISH_RETRY_MS = 60_000;
/** A kept fact older than this has outlived its write's own tries: its replica died, or gave up. */
const SWEEP_AFTER_MS = PUBLISH_RETRY_MS + 30_000;
const SWEEP_BATCH = 100;

export interface LifecycleEventsDeps {
  bus: Pick<Bus, 'publish'>;
  logger: Logger;
  outbox: Pick<LifecycleOutboxRepo, 'keep' | 'drop' | 'olderThan'>;
  connections: Pick<ConnectionRepo, 'findById'>;
  integrations: Pick<IntegrationRepo, 'findById'>;
  /** How long a write's own publish keeps trying (tests shorten it). */
  publishRetryMs?: number;
}

/**
 * Lifecycle facts, never lost to a replica dying between a write and its announcement: each
 * fact is kept in the outbox before the write, published after it, and dropped once JetStream
 * stored it. What a replica left behind, any replica's `sweep` publishes, once the write is seen
 * to have happened (the connection exists, or is gone; the integration is gone, or renamed),
 * under the fact's first `msgId`. Consumers see a fact at least once, as with every JetStream
 * message.
 */
export function createLifecycleEvents(deps: LifecycleEventsDeps) {
  const publishRetryMs = deps.publishRetryMs ?? PUBLISH_RETRY_MS;

  async function publishKept(docs: LifecycleOutboxDoc[], retryForMs: number): Promise<void> {
    for (const doc of docs) {
      const contract = contractOf.get(doc.subject);
      if (contract) await deps.bus.publish(contract, doc.payload as PayloadOf<OutboxContract>, { msgId: doc._id, retryForMs });
      else deps.logger.error('the lifecycle outbox holds a fact of no lifecycle contract; dropped', { subject: doc.subject });
    }
    await deps.outbox.drop(docs.map((doc) => doc._id));
  }

  /**
   * Keeps `docs`, makes `change`, then publishes them. A change that fails, or answers `false`,
   * drops them. Once the change is made, a publish that fails is logged and left to the sweep.
   */
  async function keepChangePublish<T>(docs: LifecycleOutboxDoc[], change: () => Promise<T>, unpublished: (error: unknown) => void): Promise<T> {
    await deps.outbox.keep(docs);
    let result: T;
    try {
      result = await change();
    } catch (error) {
      await deps.outbox.drop(docs.map((doc) => doc._id)).catch(() => undefined);
      throw error;
    }
    if (result === false) {
      await deps.outbox.drop(docs.map((doc) => doc._id)).catch(() => undefined);
      return result;
    }
    await publishKept(docs, publishRetryMs).catch(unpublished);
    return result;
  }

  /** Whether the write a kept fact announces happened, read from what the database holds now. */
  async function happened(doc: LifecycleOutboxDoc): Promise<boolean> {
    const environment = environmentId(doc.environment_id);
    if (doc.integration) {
      const found = await deps.integrations.findById(environment, doc.integration);
      return found === null || found.unique_key !== doc.payload['unique_key'];
    }
    if (!doc.connection) return false;
    const found = await deps.connections.findById(environment, doc.connection);
    const above = doc.credentials_version_above ?? null;
    return doc.holds_when === 'absent' ? found === null : found !== null && (above === null || credentialsVersionOf(found) > above);
  }

  return {
    /**
     * Keeps `events`, makes `change`, then publishes them. A change that fails, or answers
     * `false` (nothing changed), drops them. Once the change is made, a publish that fails is
     * logged and left to the sweep: the write stands, and so will its facts.
     */
    async announce<T>(
      connection: Pick<ConnectionDoc, '_id' | 'environment_id'>,
      holds: { when: 'present' | 'absent'; credentialsVersionAbove?: number },
      events: LifecycleEvent[],
      change: () => Promise<T>,
    ): Promise<T> {
      const at = new Date();
      const docs: LifecycleOutboxDoc[] = events.map(({ contract, payload }) => ({
        _id: randomUUID(),
        environment_id: connection.environment_id,
        connection: connection._id,
        holds_when: holds.when,
        credentials_version_above: holds.credentialsVersionAbove ?? null,
        subject: contract.subject,
        payload,
        at,
      }));
      return keepChangePublish(docs, change, (error: unknown) =>
        deps.logger.warn('a connection lifecycle fact was not published; the outbox sweep will send it', { connection: connection._id, error }),
      );
    },

    /**
     * Announces the end of an integration's key (`integration.removed`) around `change`, its
     * deletion or its rename: the functions deployed under the key were the integration's and go
     * with it (the sync-scheduler drops them), so the key made again starts with none. Kept
     * like a connection's facts: a replica that dies after the write leaves it to the sweep.
     */
    async announceKeyEnd<T>(integration: Pick<IntegrationDoc, '_id' | 'environment_id' | 'unique_key'>, change: () => Promise<T>): Promise<T> {
      const at = new Date();
      const payload: PayloadOf<typeof vaultContracts.integrationRemoved> = {
        environment_id: integration.environment_id,
        unique_key: integration.unique_key,
        at: at.toISOString(),
      };
      const doc: LifecycleOutboxDoc = {
        _id: randomUUID(),
        environment_id: integration.environment_id,
        integration: integration._id,
        holds_when: 'absent',
        subject: vaultContracts.integrationRemoved.subject,
        payload,
        at,
      };
      return keepChangePublish([doc], change, (error: unknown) =>
        deps.logger.warn("the end of an integration's key was not published; the outbox sweep will send it", { unique_key: integration.unique_key, error }),
      );
    },

    /**
     * Publishes the facts kept longer than a write's own tries, whose write happened (the
     * connection is there, at a newer credentials version when one was named, or is gone; the
     * integration is gone or holds another key); drops the others (a write that never happened
     * announces nothing). Returns how many it published.
     */
    async sweep(now = new Date()): Promise<number> {
      const due = await deps.outbox.olderThan(new Date(now.getTime() - SWEEP_AFTER_MS), SWEEP_BATCH);
      let published = 0;
      for (const doc of due) {
        if (await happened(doc)) {
          await publishKept([doc], 0);
          published += 1;
        } else {
          await deps.outbox.drop([doc._id]);
        }
      }
      return published;
    },
  };
}

export type LifecycleEvents = ReturnType<typeof createLifecycleEvents>;
