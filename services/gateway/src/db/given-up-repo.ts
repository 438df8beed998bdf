import { Schema, type Connection } from 'mongoose';
import { isDuplicateKey, pageByTime } from '@latchkey/mongo';
import type { GivenUpMessage } from '@latchkey/contracts';

/** How long records of given-up messages are kept (expiry in code: no TTL indexes, see Portability). */
const KEPT_MS = 14 * 24 * 3600_000;
/** Inserts between two prunes: expiry costs a delete now and then, not one per record. */
const PRUNE_EVERY = 100;

interface GivenUpDoc extends Omit<GivenUpMessage, 'at'> {
  /** `<service>:<stream>:<durable>:<stream sequence>`: a record that arrives twice is stored once, and no service's record takes another's place. */
  _id: string;
  at: Date;
}

const givenUpSchema = new Schema<GivenUpDoc>(
  {
    _id: { type: String, required: true },
    service: { type: String, required: true },
    stream: { type: String, required: true },
    durable: { type: String, required: true },
    subject: { type: String, required: true },
    stream_seq: { type: Number, required: true },
    deliveries: { type: Number, required: true },
    reason: { type: String, required: true },
    error: { code: { type: String, required: true }, message: { type: String, required: true } },
    at: { type: Date, required: true },
  },
  { collection: 'given_up_messages', versionKey: false },
);
givenUpSchema.index({ at: -1 });

/**
 * Messages the services' JetStream consumers gave up on, across the installation (operator
 * data, like environments): newest first, kept for two weeks.
 */
export function createGivenUpRepo(connection: Connection) {
  const model = connection.model<GivenUpDoc>('GivenUpMessage', givenUpSchema);
  let sincePrune = 0;
  return {
    init: () => model.init(),
    async record(message: GivenUpMessage): Promise<void> {
      try {
        await model.create({ ...message, _id: `${message.service}:${message.stream}:${message.durable}:${message.stream_seq}`, at: new Date(message.at) });
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
      }
      if (++sincePrune >= PRUNE_EVERY) {
        sincePrune = 0;
        await model.deleteMany({ at: { $lt: new Date(Date.now() - KEPT_MS) } }).exec();
      }
    },
    /** Newest first; `before` pages back from a record's time (a page ends between two times: `pageByTime`). */
    async list(limit: number, before?: Date): Promise<GivenUpMessage[]> {
      const docs = await pageByTime(
        limit,
        (count) =>
          model
            .find(before ? { at: { $lt: before } } : {})
            .sort({ at: -1 })
            .limit(count)
            .lean<GivenUpDoc[]>()
            .exec(),
        (doc) => doc.at,
        (at) => model.find({ at }).lean<GivenUpDoc[]>().exec(),
      );
      return docs.map(({ _id: _key, at, ...rest }) => ({ ...rest, at: at.toISOString() }));
    },
  };
}

export type GivenUpRepo = ReturnType<typeof createGivenUpRepo>;
