import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { Webhook } from 'standardwebhooks';
import { checkUrlHost, createSafeLookup, UpstreamNotAllowedError, type AddressPolicy } from '@latchkey/net';

export interface SendResult {
  /** The receiver's status, or null when no answer came. */
  status: number | null;
  /** Why no answer came: connection_refused, timeout, dns_not_found, upstream_not_allowed, network_error. */
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

function errorCode(error: unknown): string {
  if (error instanceof UpstreamNotAllowedError) return 'upstream_not_allowed';
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_not_found';
  if (code === 'ETIMEDOUT' || code === 'timeout') return 'timeout';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'connection_reset';
  return 'network_error';
}

/**
 * Posts webhooks to customer URLs under the proxy's SSRF rules (checked after DNS, by the
 * lookup the sockets use); no redirects are followed. Keep-alive agents keep a busy URL cheap.
 */
export function createWebhookSender(options: { policy: AddressPolicy; timeoutMs: number }) {
  const lookup = createSafeLookup(options.policy);
  const agents = {
    'http:': new HttpAgent({ keepAlive: true, maxSockets: 64, lookup }),
    'https:': new HttpsAgent({ keepAlive: true, maxSockets: 64, lookup }),
  };

  function send(url: string, headers: Record<string, string>, body: string): Promise<SendResult> {
    const started = Date.now();
    const done = (result: Omit<SendResult, 'durationMs'>): SendResult => ({ ...result, durationMs: Date.now() - started });
    return new Promise((resolve) => {
      let target: URL;
      try {
        target = new URL(url);
        if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new Error('not http(s)');
        checkUrlHost(target, options.policy);
      } catch (error) {
        resolve(done({ status: null, error: error instanceof UpstreamNotAllowedError ? 'upstream_not_allowed' : 'invalid_url', retryAfter: undefined }));
        return;
      }
      const payload = Buffer.from(body, 'utf8');
      const call = target.protocol === 'https:' ? httpsRequest : httpRequest;
      const req = call(target, {
        method: 'POST',
        agent: agents[target.protocol],
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(payload.length), 'user-agent': 'Latchkey-Webhooks/1' },
        timeout: options.timeoutMs,
      });
      const timer = setTimeout(() => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })), options.timeoutMs);
      req.once('response', (res: IncomingMessage) => {
        // The answer's body means nothing to us; read it so the socket can be reused.
        res.resume();
        res.once('end', () => {
          clearTimeout(timer);
          const retryAfter = res.headers['retry-after'];
          resolve(done({ status: res.statusCode ?? 0, error: null, retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter }));
        });
        res.once('error', (error) => {
          clearTimeout(timer);
          resolve(done({ status: null, error: errorCode(error), retryAfter: undefined }));
        });
      });
      req.once('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })));
      req.once('error', (error) => {
        clearTimeout(timer);
        resolve(done({ status: null, error: errorCode(error), retryAfter: undefined }));
      });
      req.end(payload);
    });
  }

  return {
    send,
    close(): void {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}

export type WebhookSender = ReturnType<typeof createWebhookSender>;
