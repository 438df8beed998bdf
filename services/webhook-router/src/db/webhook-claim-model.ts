/**
 * One provider webhook taken for routing, by what a replay of it would repeat: the first inbound
 * webhook to insert a key holds it until `expires_at`; any other with that key is a replay.
 *
 * Claims live in one collection per window of time (`inbound_webhook_claims_<window number>`,
 * the window being the replay window, a day by default), so expired claims go by dropping whole
 * collections rather than by a query on `expires_at`, which FerretDB answers by reading every
 * claim. Each claim is written to the collection of the window it was made in and to the next
 * one's (see `webhook-claim-repo.ts`).
 */
export interface WebhookClaimDoc {
  /** A digest of environment, integration and replay key: the unique index that decides. */
  _id: string;
  environment_id: string;
  integration: string;
  /** The gateway's id of the webhook that holds the claim (its JetStream redeliveries hold it too). */
  inbound_id: string;
  claimed_at: Date;
  /** A claim found past this is stale: the webhook that meets it takes it over. */
  expires_at: Date;
}

const WINDOW_PREFIX = 'inbound_webhook_claims_';

/** The collection of the claims made in window `window` (a time divided by the window's length), and kept from the window before. */
export const claimCollectionName = (window: number) => `${WINDOW_PREFIX}${window}`;

/** The window whose claims a collection holds; undefined for any other collection. */
export function claimWindowOf(collectionName: string): number | undefined {
  const suffix = collectionName.startsWith(WINDOW_PREFIX) ? collectionName.slice(WINDOW_PREFIX.length) : '';
  return /^\d{1,15}$/.test(suffix) ? Number(suffix) : undefined;
}

/**
 * Where claims were kept before windows (one collection, swept by `expires_at`): still read, by
 * `_id`, until its last claim expires, and dropped then, so an upgrade forgets no claim.
 */
export const LEGACY_CLAIMS = 'inbound_webhook_claims';
