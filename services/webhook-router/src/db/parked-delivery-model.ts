import type { WebhookDelivery } from '@latchkey/contracts';

/**
 * Deliveries whose next attempt is too far off to wait for in JetStream (a long back-off, an
 * open circuit): each is acked there, kept here, and put back on JOBS once due, so a URL that
 * keeps failing holds no place among the messages the deliveries consumer may have pending.
 *
 * Every read is by `_id` or of a whole collection: FerretDB 1.24 pushes down no other filter,
 * nor a range, sort or limit, so a query on a due time would read every waiting delivery.
 * - `webhook_parked_<time>`: the deliveries due before that time (ms since the epoch, the end of
 *   a slot of `slotMs`), each with the message that brings it back; read whole once the time has
 *   come, then dropped. The name tells every replica when its deliveries are due, whatever slot
 *   length the replica that made it had.
 * - `webhook_parked_marks_<window>`: one mark per wait, by its id, in the collection of the
 *   window (`MARK_WINDOW_MS`) it was parked in: a message handed over again after it parked its
 *   delivery (its ack lost) finds it and does nothing more. Windows two behind are dropped whole.
 */
export interface ParkedDeliveryDoc {
  /** The wait's id (`parkedDeliveryId`); also the `Nats-Msg-Id` of the message that ends it. */
  _id: string;
  environment_id: string;
  due_at: Date;
  /** The message to enqueue when due: the delivery with its attempts and holds so far, and its next revision. */
  job: WebhookDelivery;
}

export interface ParkMarkDoc {
  /** The wait's id. */
  _id: string;
  environment_id: string;
  parked_at: Date;
}

/**
 * `webhook_parked_counts`: how many deliveries each collection of parked deliveries holds (by its
 * due time), as one tally per replica, added to as it parks and taken from as it returns, which
 * the metrics sum: a count of the collections would read every delivery (FerretDB counts by
 * reading), and replicas adding to one shared document lost each other's changes there (an
 * update reads and writes back the document). A replica that dies between the two steps leaves
 * its slot off by what it was doing, until the slot's collection is dropped.
 */
export interface ParkedCountDoc {
  /** `<by>:<replica>` (`tallyId`); an earlier version's count of all replicas is the due time alone. */
  _id: string | number;
  /** The due time of the collection (`webhook_parked_<by>`); absent from an earlier version's count. */
  by?: number;
  n: number;
}

/** The `_id` of one replica's tally of the collection due by `by`. */
export const tallyId = (by: number, replica: string) => `${by}:${replica}`;

export const PARKED_COUNTS = 'webhook_parked_counts';

/** How long a mark is looked for: a message is handed over again within its ack wait, far less than this. */
export const MARK_WINDOW_MS = 3600_000;

const DUE_PREFIX = 'webhook_parked_';
const MARKS_PREFIX = 'webhook_parked_marks_';

/** The collection of the deliveries due before `dueBy` (ms since the epoch). */
export const parkedCollectionName = (dueBy: number) => `${DUE_PREFIX}${dueBy}`;

/** When the deliveries of a collection are due (ms since the epoch); undefined for any other collection. */
export const parkedDueBy = (collectionName: string) => numberAfter(DUE_PREFIX, collectionName);

/** The collection of the marks made in window `window` (a time divided by `MARK_WINDOW_MS`). */
export const markCollectionName = (window: number) => `${MARKS_PREFIX}${window}`;

/** The window whose marks a collection holds; undefined for any other collection. */
export const markWindowOf = (collectionName: string) => numberAfter(MARKS_PREFIX, collectionName);

function numberAfter(prefix: string, name: string): number | undefined {
  const suffix = name.startsWith(prefix) ? name.slice(prefix.length) : '';
  return /^\d{1,15}$/.test(suffix) ? Number(suffix) : undefined;
}

/**
 * The id of one wait of a delivery (`<webhook-id>:<target>`): the revision it comes back as,
 * one more each time, so each wait has its own, and the message that ends it its own msgId.
 */
export const parkedDeliveryId = (delivery: string, revision: number) => `${delivery}:park:${revision}`;
