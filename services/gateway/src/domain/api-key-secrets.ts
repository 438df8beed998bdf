import { createHmac, randomBytes, timingSafeEqual, createHash } from 'node:crypto';

/** Secret keys start with this, so scanners and people recognise a leaked one. */
export const API_KEY_PREFIX = 'lk_sk_';

/** 32 random bytes: 256 bits of entropy behind the prefix. */
export function generateApiKeySecret(): string {
  return `${API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
}

/** Keyed SHA-256: a stolen database alone does not let anyone test guesses offline. */
export function digestApiKey(secret: string, digestSecret: string): string {
  return createHmac('sha256', digestSecret).update(secret).digest('base64url');
}

/** Enough of a secret to tell keys apart in a list, too little to matter. */
export function hintOf(secret: string): string {
  return `${secret.slice(0, Math.min(10, Math.floor(secret.length / 4)))}…`;
}

/** Constant-time comparison of two strings of any length. */
export function safeEqual(a: string, b: string): boolean {
  const left = createHash('sha256').update(a).digest();
  const right = createHash('sha256').update(b).digest();
  return timingSafeEqual(left, right);
}

/** What `generateApiKeySecret` makes: the prefix and 43 base64url characters (32 bytes). */
const GENERATED_KEY = /^lk_sk_[A-Za-z0-9_-]{43}$/;

/**
 * Whether a bearer string can be a key, decided without a digest or a read: every key the
 * gateway generates has one shape, and the one other secret that may be a key is the operator's
 * BOOTSTRAP_SECRET_KEY (any string of 32 characters or more, taken as given), recognised by
 * comparison with the configured value. A bootstrap key made under an earlier value that is
 * neither still configured nor of the generated shape is no longer recognised: rotate it.
 */
export function keyFormat(bootstrapSecret: string | undefined): (secret: string) => boolean {
  return (secret) => GENERATED_KEY.test(secret) || (bootstrapSecret !== undefined && safeEqual(secret, bootstrapSecret));
}
