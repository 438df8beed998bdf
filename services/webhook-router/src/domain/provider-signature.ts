import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { WebhookSignatureScheme } from '@latchkey/contracts';

/**
 * `valid`: signed with the integration's secret (and, when the scheme signs a time, signed within
 * the tolerance); `invalid`: a signature that does not match; `missing`: the scheme's signature,
 * timestamp or id header absent; `stale`: validly signed too long before it reached the gateway;
 * `unsigned`: a provider without a catalog scheme sent no `x-<provider>-signature-256`.
 */
export type SignatureVerdict = 'valid' | 'invalid' | 'missing' | 'unsigned' | 'stale';

export interface SignatureCheck {
  verdict: SignatureVerdict;
  /**
   * What a replay of this webhook would repeat, for `valid` and `unsigned` ones (else null): the
   * provider's delivery id when the signature covers one, else a digest of the signed bytes.
   * Never built from anything the signature does not cover, or a rewritten header would let a
   * replay through.
   */
  replayKey: string | null;
}

/** How far a signed timestamp may be from the gateway's receipt (Standard Webhooks, Slack and Stripe use 5 minutes). */
export const SIGNATURE_TOLERANCE_MS = 5 * 60_000;

/**
 * The spec's scheme, for providers whose catalog entry declares none: an
 * `x-<provider>-signature-256` header holding the hex HMAC-SHA256 of the raw body (a `sha256=`
 * prefix tolerated). Such a provider's webhook without that header is taken as unsigned.
 */
export function defaultScheme(provider: string): WebhookSignatureScheme {
  return { header: `x-${provider}-signature-256`, algorithm: 'sha256', encoding: 'hex', prefix: 'sha256=' };
}

const digestOf = (content: Buffer) => `sha256:${createHash('sha256').update(content).digest('hex')}`;

/** The bytes the provider's HMAC covers: the scheme's template around the exact body. */
function signedContent(template: string | undefined, body: Buffer, values: { timestamp?: string; id?: string }): Buffer {
  if (template === undefined) return body;
  const fill = (part: string) => Buffer.from(part.replaceAll('{timestamp}', values.timestamp ?? '').replaceAll('{id}', values.id ?? ''), 'utf8');
  const parts = template.split('{body}');
  const pieces: Buffer[] = [];
  parts.forEach((part, index) => {
    if (index > 0) pieces.push(body);
    pieces.push(fill(part));
  });
  return Buffer.concat(pieces);
}

/**
 * Checks a provider's signature over the exact bytes received, keyed with the integration's
 * webhook secret. `declared` schemes are required (a missing header is `missing`); the default
 * scheme only applies when its header is present. A header may carry several signatures
 * separated by spaces (Standard Webhooks during a secret rotation): one match suffices.
 * `receivedAt` is when the gateway took the webhook, so a backlog in the router does not make
 * fresh webhooks stale. Comparison is constant-time and never throws.
 */
export function verifyProviderSignature(input: {
  declared: WebhookSignatureScheme | null;
  provider: string;
  secret: string;
  headers: Record<string, string>;
  body: Buffer;
  receivedAt: number;
}): SignatureCheck {
  const scheme = input.declared ?? defaultScheme(input.provider);
  const header = (name: string | undefined) => (name === undefined ? undefined : input.headers[name.toLowerCase()]?.trim() || undefined);
  const received = header(scheme.header);
  if (received === undefined) return input.declared ? { verdict: 'missing', replayKey: null } : { verdict: 'unsigned', replayKey: digestOf(input.body) };
  const timestamp = header(scheme.timestamp_header);
  const id = header(scheme.id_header);
  if ((scheme.timestamp_header && timestamp === undefined) || (scheme.id_header && id === undefined)) return { verdict: 'missing', replayKey: null };

  const content = signedContent(scheme.signed_content, input.body, { ...(timestamp !== undefined && { timestamp }), ...(id !== undefined && { id }) });
  const expected = createHmac(scheme.algorithm, input.secret).update(content).digest();
  const matches = received.split(/\s+/).some((candidate) => {
    let text = candidate;
    if (scheme.prefix && text.startsWith(scheme.prefix)) text = text.slice(scheme.prefix.length);
    else if (scheme.prefix && input.declared) return false;
    const given = Buffer.from(text, scheme.encoding);
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) return { verdict: 'invalid', replayKey: null };

  if (timestamp !== undefined) {
    if (!/^\d{1,12}$/.test(timestamp)) return { verdict: 'invalid', replayKey: null };
    const skew = Math.abs(input.receivedAt - Number(timestamp) * 1000);
    if (!(skew <= SIGNATURE_TOLERANCE_MS)) return { verdict: 'stale', replayKey: null }; // NaN included
  }
  return { verdict: 'valid', replayKey: id !== undefined ? `id:${id}` : digestOf(content) };
}

/**
 * Whether a webhook may go on to routing (null) or why it is refused. A signature that is wrong,
 * missing where the provider signs, or stale is always refused; a webhook without any signature
 * only when the customer turned `accept_unsigned_webhooks` on for the integration.
 */
export function refusalReason(verdict: SignatureVerdict, acceptUnsigned: boolean): string | null {
  switch (verdict) {
    case 'valid':
      return null;
    case 'unsigned':
      return acceptUnsigned ? null : 'unsigned_not_accepted';
    case 'invalid':
      return 'bad_signature';
    case 'missing':
      return 'missing_signature';
    case 'stale':
      return 'stale_timestamp';
  }
}
