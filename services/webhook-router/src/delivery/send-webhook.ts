import { Webhook } from 'standardwebhooks';
import { createHttpClient, OutboundRequestError, type AddressPolicy } from '@latchkey/net';

export interface SendResult {
  /** The receiver's status, or null when no answer came. */
  status: number | null;
  /** Why no answer came: the libs/net reason (connection_refused, timeout, dns_not_found, upstream_not_allowed, invalid_url, connection_reset, network_error). */
  error: string | null;
  retryAfter: string | undefined;
  durationMs: number;
}

/**
 * The Standard Webhooks headers for one attempt: the same `webhook-id` every time, the time of
 * this attempt, and one `v1,` signature per signing key (two during a rotation's overlap).
 */
export function signatureHeaders(input: { webhookId: string; at: Date; body: string; keys: readonly string[] }): Record<string, string> {
  const signatures = input.keys.map((key) => new Webhook(key).sign(input.webhookId, input.at, input.body));
  return {
    'webhook-id': input.webhookId,
    'webhook-timestamp': String(Math.floor(input.at.getTime() / 1000)),
    'webhook-signature': signatures.join(' '),
  };
}

/** The answer's body means nothing to us: a little is read, the rest dropped. */
const RECEIVER_BODY_BYTES = 64 * 1024;

/**
 * Posts webhooks to customer URLs through the one outbound client of libs/net: the address
 * policy (`WEBHOOK_ALLOW_CIDRS`) on the URL's host and, by the lookup its sockets use, on every
 * address a name resolves to; no redirects are followed. Keep-alive sockets keep a busy URL cheap.
 */
export function createWebhookSender(options: { policy: AddressPolicy; timeoutMs: number }) {
  const http = createHttpClient({ policy: options.policy, userAgent: 'Latchkey-Webhooks/1' });

  async function send(url: string, headers: Record<string, string>, body: string): Promise<SendResult> {
    const started = Date.now();
    const done = (result: Omit<SendResult, 'durationMs'>): SendResult => ({ ...result, durationMs: Date.now() - started });
    try {
      const response = await http.request(url, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body,
        timeoutMs: options.timeoutMs,
        maxResponseBytes: RECEIVER_BODY_BYTES,
      });
      const retryAfter = response.headers['retry-after'];
      return done({ status: response.statusCode, error: null, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter });
    } catch (error) {
      return done({ status: null, error: error instanceof OutboundRequestError ? error.reason : 'network_error', retryAfter: undefined });
    }
  }

  return {
    send,
    close(): void {
      http.close();
    },
  };
}

export type WebhookSender = ReturnType<typeof createWebhookSender>;
