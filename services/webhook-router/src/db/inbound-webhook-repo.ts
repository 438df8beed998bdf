import type { Connection } from 'mongoose';
import type { EnvironmentId } from '@latchkey/mongo';
import { inboundWebhookModel, type InboundWebhookDoc } from './inbound-webhook-model.js';

export function createInboundWebhookRepo(connection: Connection) {
  const model = inboundWebhookModel(connection);
  return {
    init: () => model.init(),
    /** Idempotent: JetStream may hand the same webhook over twice. */
    async record(environment: EnvironmentId, doc: Omit<InboundWebhookDoc, 'environment_id'>): Promise<void> {
      const { _id, ...fields } = doc;
      await model.updateOne({ _id, environment_id: environment }, { $set: { ...fields, environment_id: environment } }, { upsert: true }).exec();
    },
    find: (environment: EnvironmentId, id: string) => model.findOne({ _id: id, environment_id: environment }).lean<InboundWebhookDoc>().exec(),
    /** Inbound webhooks whose environment is unknown are kept under the public id they named. */
    async recordUnscoped(doc: InboundWebhookDoc): Promise<void> {
      const { _id, ...fields } = doc;
      await model.updateOne({ _id }, { $set: fields }, { upsert: true }).exec();
    },
  };
}

export type InboundWebhookRepo = ReturnType<typeof createInboundWebhookRepo>;
