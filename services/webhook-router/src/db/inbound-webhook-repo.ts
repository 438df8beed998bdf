import type { Connection, QueryFilter } from 'mongoose';
import { pageByTime, type EnvironmentId } from '@latchkey/mongo';
import { createGroupCommit } from './group-commit.js';
import { inboundWebhookModel, type InboundWebhookDoc } from './inbound-webhook-model.js';
import { insertNew } from './insert-new.js';

/**
 * The inbound log is append-only: one document per webhook, written once its outcome is known
 * (a redelivery's second copy is skipped). Inserts stay cheap as the log grows on FerretDB too,
 * whose SQLite backend scans the collection for every update.
 */
export function createInboundWebhookRepo(connection: Connection) {
  const model = inboundWebhookModel(connection);
  // Every field of InboundWebhookDoc is required by its type, defaults included: stored as built.
  const writes = createGroupCommit<InboundWebhookDoc>((docs) => insertNew(model, docs, { lean: true }));
  return {
    init: () => model.init(),
    record: (environment: EnvironmentId, doc: Omit<InboundWebhookDoc, 'environment_id'>): Promise<void> =>
      writes.add({ ...doc, environment_id: environment }),
    /** An inbound webhook whose environment is unknown is kept under the public id it named. */
    recordUnscoped: (doc: InboundWebhookDoc): Promise<void> => writes.add(doc),
    /** Drops what was received before `before` (the retention sweep): the count dropped. */
    prune: async (before: Date): Promise<number> => (await model.deleteMany({ received_at: { $lt: before } }).exec()).deletedCount,
    find: (environment: EnvironmentId, id: string) => model.findOne({ _id: id, environment_id: environment }).lean<InboundWebhookDoc>().exec(),
    /** The environment's log, newest first, for operators (a page ends between two times: `pageByTime`). */
    list: (environment: EnvironmentId, page: { limit: number; before?: Date; status?: InboundWebhookDoc['status'] }) => {
      const filter: QueryFilter<InboundWebhookDoc> = { environment_id: environment };
      if (page.status !== undefined) filter.status = page.status;
      return pageByTime(
        page.limit,
        (count) => model.find(page.before ? { ...filter, received_at: { $lt: page.before } } : filter).sort({ received_at: -1 }).limit(count).lean<InboundWebhookDoc[]>().exec(),
        (doc) => doc.received_at,
        (at) => model.find({ ...filter, received_at: at }).lean<InboundWebhookDoc[]>().exec(),
      );
    },
  };
}

export type InboundWebhookRepo = ReturnType<typeof createInboundWebhookRepo>;
