import { createHash } from 'node:crypto';
import type { Connection, mongo } from 'mongoose';
import { findByIds, type EnvironmentId } from '@latchkey/mongo';
import { insertTaken } from './insert-new.js';
import { claimCollectionName, claimWindowOf, LEGACY_CLAIMS, type WebhookClaimDoc } from './webhook-claim-model.js';

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

/** Claims looked up (or stale ones taken over) at once on FerretDB (one `{_id}` query each); the driver's pool keeps room for others. */
const LOOKUPS_IN_FLIGHT = 16;

/** MongoDB's code for a collection that is not there (a drop another replica made first). */
const NAMESPACE_NOT_FOUND = 26;

/**
 * The filter of the claim reads and removals the drain makes (shared with the explain test):
 * an `_id` equality, the one filter FerretDB 1.24 answers from an index; a list of ids (`$in`),
 * or `_id` with any other condition, makes it read every claim.
 */
export const claimQueries = {
  byId: (request: ClaimRequest) => ({ _id: claimId(request) }),
};

const sameClaim = (a: WebhookClaimDoc, b: WebhookClaimDoc) => a.inbound_id === b.inbound_id && a.claimed_at.getTime() === b.claimed_at.getTime();

/**
 * Replay detection for provider webhooks, durable across restarts and shared by every replica.
 *
 * A claim is a unique-index insert (no read-modify-write, so it holds on FerretDB and MongoDB
 * alike), a batch's claims are one insert, and every read is by `_id`. Claims live in one
 * collection per replay window (see `webhook-claim-model.ts`): a webhook claims its key in its
 * window's collection, which decides, and, once it holds it, in the next window's too. Any claim
 * made less than a window before lives in the current window's collection, so that collection
 * alone decides; a collection two windows old holds nothing anyone reads, and is dropped whole.
 */
export function createWebhookClaimRepo(connection: Connection, options: { windowMs?: number } = {}) {
  const windowMs = options.windowMs ?? REPLAY_WINDOW_MS;
  const windowOf = (at: Date) => Math.floor(at.getTime() / windowMs);
  const database = () => {
    if (!connection.db) throw new Error('the database connection is not open');
    return connection.db;
  };
  const collection = (name: string) => database().collection<WebhookClaimDoc>(name);
  /** Until when (ms since the epoch) claims stored before windows may still hold a key; 0 when none can. */
  let legacyUntil = 0;

  /** The stored claims of these ids: one `$in` on MongoDB; on FerretDB one `{_id}` lookup each. */
  async function holders(claims: mongo.Collection<WebhookClaimDoc>, ids: readonly string[]): Promise<Map<string, WebhookClaimDoc>> {
    const docs = await findByIds(connection, claims, ids, LOOKUPS_IN_FLIGHT);
    return new Map(docs.flatMap((doc) => (doc ? [[doc._id, doc] as const] : [])));
  }

  /**
   * Claims each doc's key in one collection, in order: true when the doc holds it there (first
   * to come, or a JetStream redelivery of the webhook that came first), false for a replay. A
   * claim found past its expiry (kept from the window before) is taken over.
   */
  async function claimIn(claims: mongo.Collection<WebhookClaimDoc>, docs: WebhookClaimDoc[], now: Date): Promise<boolean[]> {
    const held = docs.map(() => true);
    if (docs.length === 0) return held;
    const taken = await insertTaken(claims, docs);
    if (taken.length === 0) return held;
    const existing = await holders(claims, [...new Set(taken.map((index) => docs[index]!._id))]);
    // One webhook per stale key contends for it; any other of the batch with that key is a replay of it.
    const contenders = new Map<string, number>();
    for (const index of taken) {
      const doc = docs[index]!;
      const holder = existing.get(doc._id);
      if (holder !== undefined && holder.expires_at.getTime() > now.getTime()) held[index] = holder.inbound_id === doc.inbound_id;
      else if (contenders.has(doc._id)) held[index] = false;
      else contenders.set(doc._id, index);
    }
    const contending = [...contenders.values()];
    for (let at = 0; at < contending.length; at += LOOKUPS_IN_FLIGHT) {
      const part = contending.slice(at, at + LOOKUPS_IN_FLIGHT);
      const won = await Promise.all(part.map((index) => takeOver(claims, docs[index]!, existing.get(docs[index]!._id))));
      part.forEach((index, position) => (held[index] = won[position]!));
    }
    return held;
  }

  /**
   * Takes over a key whose claim is stale (or was removed between insert and read), by `_id`
   * only: FerretDB reads every claim for a removal that also tests `expires_at`. Of those that
   * meet the same stale claim, the one that first inserts a marker naming it (`<key>#<its
   * holder>#<its time>`, in the same collection) removes it and claims the key; the others are
   * replays of that one. A redelivery of the marker's webhook (its first try died midway) goes on.
   */
  async function takeOver(claims: mongo.Collection<WebhookClaimDoc>, doc: WebhookClaimDoc, stale: WebhookClaimDoc | undefined): Promise<boolean> {
    if (stale !== undefined) {
      const marker = { ...doc, _id: `${doc._id}#${stale.inbound_id}#${stale.claimed_at.getTime()}` };
      let staleThere = true;
      if ((await insertTaken(claims, [marker])).length > 0) {
        const [markedBy] = await findByIds(connection, claims, [marker._id]);
        if (markedBy?.inbound_id !== doc.inbound_id) return false;
        // Our webhook's earlier try marked it: the stale claim may be gone already (then removing
        // by `_id` could remove a newer webhook's claim), or replaced by ours.
        const [current] = await findByIds(connection, claims, [doc._id]);
        if (current && !sameClaim(current, stale)) return current.inbound_id === doc.inbound_id;
        staleThere = Boolean(current);
      }
      if (staleThere) await claims.deleteOne({ _id: doc._id });
    }
    if ((await insertTaken(claims, [doc])).length === 0) return true;
    const [holder] = await findByIds(connection, claims, [doc._id]);
    return holder?.inbound_id === doc.inbound_id;
  }

  /** Whether the claims stored before windows let each doc hold its key (an unexpired claim of another webhook does not). */
  async function heldBeforeWindows(docs: WebhookClaimDoc[], now: Date): Promise<boolean[]> {
    if (docs.length === 0 || now.getTime() >= legacyUntil) return docs.map(() => true);
    const existing = await holders(collection(LEGACY_CLAIMS), [...new Set(docs.map((doc) => doc._id))]);
    return docs.map((doc) => {
      const holder = existing.get(doc._id);
      return holder === undefined || holder.expires_at.getTime() <= now.getTime() || holder.inbound_id === doc.inbound_id;
    });
  }

  /** Claims in `claims` the keys of the docs `held` still marks, and unmarks those refused there. */
  async function claimStillHeld(claims: mongo.Collection<WebhookClaimDoc>, docs: WebhookClaimDoc[], held: boolean[], now: Date): Promise<void> {
    const kept = held.flatMap((isHeld, index) => (isHeld ? [index] : []));
    const there = await claimIn(claims, kept.map((index) => docs[index]!), now);
    kept.forEach((index, position) => {
      if (!there[position]) held[index] = false;
    });
  }

  return {
    /** Sweeps once at start-up (the router may have been down for windows), which also notes until when claims stored before windows can hold a key. */
    init: async (): Promise<void> => {
      await sweep(new Date());
    },
    /**
     * Claims each webhook's key, in order: true when this webhook holds it (first to come, or a
     * JetStream redelivery of the one that came first), false for a replay.
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
      // Claims kept before windows first (after an upgrade, for a window at most): a webhook
      // they refuse claims nothing here, so it cannot stand in the way of their holder's redelivery.
      const held = await heldBeforeWindows(docs, now);
      const window = windowOf(now);
      // This window's collection decides; the next window's is written only by those that hold
      // a key, after they do. Should a webhook of the next window (a replica's clock ahead)
      // claim the key there first, the one here gives it up: one of the two is routed.
      await claimStillHeld(collection(claimCollectionName(window)), docs, held, now);
      await claimStillHeld(collection(claimCollectionName(window + 1)), docs, held, now);
      return held;
    },
    /** Drops the collections of claims no one reads any more; every replica may run it. Answers how many it dropped. */
    sweep: (now = new Date()): Promise<number> => sweep(now),
  };

  async function sweep(now: Date): Promise<number> {
    const current = windowOf(now);
    let dropped = (await reviewLegacy(now)) ? 1 : 0;
    for (const { name } of await database().listCollections({}, { nameOnly: true }).toArray()) {
      const window = claimWindowOf(name);
      // The window before the current one is kept, for a replica whose clock is behind.
      if (window !== undefined && window < current - 1 && (await dropIfThere(name))) dropped++;
    }
    return dropped;
  }

  /**
   * Reads when the last claim stored before windows expires (again at each sweep: during a
   * rolling upgrade, replicas of the earlier version still add some), and drops that collection
   * once it has. On FerretDB this reads every claim there, for at most a window after an upgrade.
   * Answers whether it dropped it.
   */
  async function reviewLegacy(now: Date): Promise<boolean> {
    const [latest] = await collection(LEGACY_CLAIMS).find({}, { sort: { expires_at: -1 }, limit: 1, projection: { expires_at: 1 } }).toArray();
    legacyUntil = latest ? latest.expires_at.getTime() : 0;
    return latest !== undefined && legacyUntil <= now.getTime() && (await dropIfThere(LEGACY_CLAIMS));
  }

  async function dropIfThere(name: string): Promise<boolean> {
    try {
      return await collection(name).drop();
    } catch (error) {
      if ((error as { code?: unknown }).code === NAMESPACE_NOT_FOUND) return false;
      throw error;
    }
  }
}

export type WebhookClaimRepo = ReturnType<typeof createWebhookClaimRepo>;
