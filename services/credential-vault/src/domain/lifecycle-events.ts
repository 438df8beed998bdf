import { randomUUID } from 'node:crypto';
import type { Bus } from '@latchkey/bus';
import { vaultContracts, webhookContracts, type PayloadOf } from '@latchkey/contracts';
import type { Logger } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import type { ConnectionDoc } from '../db/connection-model.js';
import { credentialsVersionOf, type ConnectionRepo } from '../db/connection-repo.js';
import type { LifecycleOutboxDoc, LifecycleOutboxRepo } from '../db/lifecycle-outbox-model.js';

/** The facts the outbox carries: what follows from them elsewhere has no other trigger. */
const LIFECYCLE_CONTRACTS = [vaultContracts.connectionCreated, webhookContracts.postCreation, vaultContracts.connectionDeleted] as const;
type LifecycleContract = (typeof LIFECYCLE_CONTRACTS)[number];
const contractOf = new Map<string, LifecycleContract>(LIFECYCLE_CONTRACTS.map((contract) => [contract.subject, contract]));

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
  /** How long a write's own publish keeps trying (tests shorten it). */
  publishRetryMs?: number;
}

/**
 * A connection's lifecycle facts, never lost to a replica dying between a write and its
 * announcement: each fact is kept in the outbox before the write, published after it, and
 * dropped once JetStream stored it. What a replica left behind, any replica's `sweep` publishes,
 * once the write is seen to have happened (the connection exists, or is gone), under the fact's
 * first `msgId`. Consumers see a fact at least once, as with every JetStream message.
 */
export function createLifecycleEvents(deps: LifecycleEventsDeps) {
  const publishRetryMs = deps.publishRetryMs ?? PUBLISH_RETRY_MS;

  async function publishKept(docs: LifecycleOutboxDoc[], retryForMs: number): Promise<void> {
    for (const doc of docs) {
      const contract = contractOf.get(doc.subject);
      if (contract) await deps.bus.publish(contract, doc.payload as LifecycleEvent['payload'], { msgId: doc._id, retryForMs });
      else deps.logger.error('the lifecycle outbox holds a fact of no lifecycle contract; dropped', { subject: doc.subject });
    }
    await deps.outbox.drop(docs.map((doc) => doc._id));
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
      await publishKept(docs, publishRetryMs).catch((error: unknown) =>
        deps.logger.warn('a connection lifecycle fact was not published; the outbox sweep will send it', { connection: connection._id, error }),
      );
      return result;
    },

    /**
     * Publishes the facts kept longer than a write's own tries, whose write happened (the
     * connection is there, at a newer credentials version when one was named, or is gone); drops
     * the others (a write that never happened announces nothing). Returns how many it published.
     */
    async sweep(now = new Date()): Promise<number> {
      const due = await deps.outbox.olderThan(new Date(now.getTime() - SWEEP_AFTER_MS), SWEEP_BATCH);
      let published = 0;
      for (const doc of due) {
        const found = await deps.connections.findById(environmentId(doc.environment_id), doc.connection);
        const above = doc.credentials_version_above ?? null;
        const happened = doc.holds_when === 'absent' ? found === null : found !== null && (above === null || credentialsVersionOf(found) > above);
        if (happened) {
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
