import { createHash } from 'node:crypto';
import type { Connection, mongo } from 'mongoose';
import { findByIds, isDuplicateKey, type EnvironmentId } from '@latchkey/mongo';
import { webhookClaimModel, type WebhookClaimDoc } from './webhook-claim-model.js';

export interface ClaimRequest {
  environment: EnvironmentId;
  integration: string;
  /** What a replay would repeat (see `SignatureCheck.replayKey`). */
  key: string;
  inboundId: string;
}

/** How long a provider webhook's replays are refused: a day, as long as providers retry for. */
export const REPLAY_WINDOW_MS = 24 * 3600_000;

const claimId = (request: ClaimRequest) => createHash('sha256').update(JSON.stringify([request.environment, request.integration, request.key])).digest('hex');

/** Claims looked up at once on FerretDB (one `{_id}` query each); the driver's pool keeps room for others. */
const LOOKUPS_IN_FLIGHT = 16;

/**
 * The filter of the claim read the drain makes (shared with the explain test): an `_id`
 * equality, the one filter FerretDB 1.24 answers from an index; a list of ids (`$in`) makes it
 * read every claim.
 */
export const claimQueries = {
  byId: (request: ClaimRequest) => ({ _id: claimId(request) }),
};

/**
 * Replay detection for provider webhooks, durable across restarts and shared by every replica:
 * a claim is a unique-index insert (no read-modify-write, so it holds on FerretDB and MongoDB
 * alike), a batch's claims are one insert, and expiry is done here, not by a TTL index.
 */
export function createWebhookClaimRepo(connection: Connection, options: { windowMs?: number } = {}) {
  const model = webhookClaimModel(connection);
  const windowMs = options.windowMs ?? REPLAY_WINDOW_MS;

  /**
   * The stored claims of these ids: one `$in` on MongoDB; on FerretDB one `{_id}` lookup each,
   * so a batch meeting its own claims again (JetStream redelivered it) costs the same however
   * many claims are stored.
   */
  async function holders(ids: readonly string[]): Promise<Map<string, WebhookClaimDoc>> {
    const docs = await findByIds(connection, model.collection as unknown as mongo.Collection<WebhookClaimDoc>, ids, LOOKUPS_IN_FLIGHT);
    return new Map(docs.flatMap((doc) => (doc ? [[doc._id, doc] as const] : [])));
  }

  /** Inserts the docs; answers the indexes of those whose id was taken. Any other failure throws. */
  async function insertTaken(docs: WebhookClaimDoc[]): Promise<number[]> {
    try {
      // The driver's own insert: its error lists each refused document by index.
      await model.collection.insertMany(docs as unknown as Array<Record<string, unknown>>, { ordered: false });
      return [];
    } catch (error) {
      const writeErrors = (error as { writeErrors?: Array<{ index: number; code?: number; errmsg?: string }> }).writeErrors;
      if (!Array.isArray(writeErrors) || writeErrors.length === 0) throw error;
      if (!writeErrors.every((item) => isDuplicateKey({ code: item.code, message: item.errmsg }))) throw error;
      return writeErrors.map((item) => item.index);
    }
  }

  return {
    init: () => model.init(),
    /**
     * Claims each webhook's key, in order: true when this webhook holds it (first to come, or a
     * JetStream redelivery of the one that came first), false for a replay. A claim past its
     * expiry that the sweep has not removed yet is taken over.
     */
    async claim(requests: ClaimRequest[], now = new Date()): Promise<boolean[]> {
      if (requests.length === 0) return [];
      const docs: WebhookClaimDoc[] = requests.map((request) => ({
        _id: claimId(request),
        environment_id: request.environment,
        integration: request.integration,
        inbound_id: request.inboundId,
        claimed_at: now,
        expires_at: new Date(now.getTime() + windowMs),
      }));
      const held = requests.map(() => true);
      const taken = await insertTaken(docs);
      if (taken.length === 0) return held;
      const existing = await holders([...new Set(taken.map((index) => docs[index]!._id))]);
      const expired: number[] = [];
      for (const index of taken) {
        const holder = existing.get(docs[index]!._id);
        if (holder === undefined || holder.expires_at.getTime() <= now.getTime()) expired.push(index);
        else held[index] = holder.inbound_id === docs[index]!.inbound_id;
      }
      if (expired.length > 0) {
        // Remove only the stale holders seen, then insert again: whoever inserts first holds it.
        // The one read of the drain that is not by `_id` alone (a scan on FerretDB), and a rare
        // one: a key used again after its window, before the sweep removed its claim.
        await model.deleteMany({ _id: { $in: expired.map((index) => docs[index]!._id) }, expires_at: { $lte: now } }).exec();
        const retaken = new Set((await insertTaken(expired.map((index) => docs[index]!))).map((position) => expired[position]!));
        for (const index of expired) held[index] = !retaken.has(index);
      }
      return held;
    },
    /** Removes expired claims; every replica may run it. */
    sweep: async (now = new Date()): Promise<number> => (await model.deleteMany({ expires_at: { $lte: now } }).exec()).deletedCount,
  };
}

export type WebhookClaimRepo = ReturnType<typeof createWebhookClaimRepo>;
