import { randomBytes } from 'node:crypto';

/** After a rotation the old key keeps signing (beside the new one) for this long. */
export const SIGNING_KEY_GRACE_MS = 24 * 3600 * 1000;

export interface SigningKey {
  secret: string;
  created_at: Date;
  retired_at: Date | null;
}

/** A Standard Webhooks secret: `whsec_` and base64 of 32 random bytes. */
export function generateSigningKey(at: Date): SigningKey {
  return { secret: `whsec_${randomBytes(32).toString('base64')}`, created_at: at, retired_at: null };
}

/** The new key first; the previous active one retired now; keys past their grace dropped. */
export function rotateSigningKeys(keys: readonly SigningKey[], at: Date): SigningKey[] {
  const fresh = generateSigningKey(at);
  const kept = keys
    .map((key) => (key.retired_at ? key : { ...key, retired_at: at }))
    .filter((key) => key.retired_at && at.getTime() - key.retired_at.getTime() < SIGNING_KEY_GRACE_MS);
  return [fresh, ...kept];
}
