import { createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhookSignatureScheme } from '@latchkey/contracts';

export type SignatureVerdict = 'valid' | 'invalid' | 'missing' | 'unsigned';

/**
 * The spec's scheme, for providers whose catalog entry declares none: an
 * `x-<provider>-signature-256` header holding the hex HMAC-SHA256 of the raw body (a `sha256=`
 * prefix tolerated). Such a provider's webhook without that header is taken as unsigned.
 */
export function defaultScheme(provider: string): WebhookSignatureScheme {
  return { header: `x-${provider}-signature-256`, algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' };
}

/**
 * Checks a provider's signature over the exact bytes received, keyed with the integration's
 * webhook secret. `declared` schemes are required (a missing header is `missing`); the default
 * scheme only applies when its header is present. Comparison is constant-time and never throws.
 */
export function verifyProviderSignature(input: {
  declared: WebhookSignatureScheme | null;
  provider: string;
  secret: string;
  headers: Record<string, string>;
  body: Buffer;
}): SignatureVerdict {
  const scheme = input.declared ?? defaultScheme(input.provider);
  const received = input.headers[scheme.header.toLowerCase()];
  if (received === undefined || received === '') return input.declared ? 'missing' : 'unsigned';
  let text = received.trim();
  if (scheme.prefix && text.startsWith(scheme.prefix)) text = text.slice(scheme.prefix.length);
  else if (scheme.prefix && input.declared) return 'invalid';
  const expected = createHmac(scheme.algorithm, input.secret).update(input.body).digest();
  const given = Buffer.from(text, scheme.encoding);
  if (given.length !== expected.length) return 'invalid';
  return timingSafeEqual(given, expected) ? 'valid' : 'invalid';
}
