import { createHmac, timingSafeEqual } from 'node:crypto';

/** Deliveries older (or further in the future) than this are refused: a replay window of 5 minutes. */
export const WEBHOOK_TOLERANCE_SECONDS = 5 * 60;

type HeaderBag = Record<string, string | string[] | undefined> | Headers;

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(bag).find((candidate) => candidate.toLowerCase() === name);
  const value = key === undefined ? undefined : bag[key];
  return Array.isArray(value) ? value[0] : value;
}

/** A Standard Webhooks secret (`whsec_` + base64) is its decoded bytes; any other key (an API key) its UTF-8 bytes. */
function keyBytes(secret: string): Buffer {
  return secret.startsWith('whsec_') ? Buffer.from(secret.slice('whsec_'.length), 'base64') : Buffer.from(secret, 'utf8');
}

/**
 * Checks a Standard Webhooks signature (`webhook-id`, `webhook-timestamp`, `webhook-signature`
 * holding one or more space-separated `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`) against
 * `secret`. False for a missing header, a timestamp outside ±5 minutes of `now`, or no matching
 * signature. Comparisons are constant-time; nothing here throws on malformed input.
 */
export function verifyWebhookSignature(input: { body: string | Buffer; headers: HeaderBag; secret: string; now?: number }): boolean {
  const id = header(input.headers, 'webhook-id');
  const timestamp = header(input.headers, 'webhook-timestamp');
  const signatures = header(input.headers, 'webhook-signature');
  if (!id || !timestamp || !signatures || !/^\d{1,12}$/.test(timestamp)) return false;
  const nowSeconds = Math.floor((input.now ?? Date.now()) / 1000);
  if (Math.abs(nowSeconds - Number(timestamp)) > WEBHOOK_TOLERANCE_SECONDS) return false;
  const body = typeof input.body === 'string' ? input.body : input.body.toString('utf8');
  const expected = createHmac('sha256', keyBytes(input.secret)).update(`${id}.${timestamp}.${body}`).digest();
  let valid = false;
  for (const signature of signatures.split(' ')) {
    const [version, value] = signature.split(',', 2);
    if (version !== 'v1' || !value) continue;
    const given = Buffer.from(value, 'base64');
    // Lengths differ for garbage: timingSafeEqual would throw, so compare only equal lengths.
    if (given.length === expected.length && timingSafeEqual(given, expected)) valid = true;
  }
  return valid;
}
