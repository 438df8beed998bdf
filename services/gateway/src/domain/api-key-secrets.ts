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
