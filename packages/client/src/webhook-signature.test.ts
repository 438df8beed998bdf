import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Latchkey } from './client.js';

const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
const body = '{"type":"auth","success":true}';

function sign(id: string, timestamp: number, text: string, key = Buffer.alloc(32, 7)) {
  const signature = createHmac('sha256', key).update(`${id}.${timestamp}.${text}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': `v1,${signature}` };
}

describe('verifyIncomingWebhookRequest', () => {
  const latchkey = new Latchkey({ apiKey: 'lk_sk_test', webhookSigningKey: secret });
  // The clock stands still, so a timestamp 301 s ahead stays out of tolerance however slowly the
  // tests run.
  const now = 1_800_000_000;
  beforeAll(() => {
    jest.useFakeTimers({ now: now * 1000 });
  });
  afterAll(() => {
    jest.useRealTimers();
  });

  it('accepts a genuine delivery, as text, bytes, parsed object or Headers', () => {
    const headers = sign('msg_1', now, body);
    expect(latchkey.verifyIncomingWebhookRequest(body, headers)).toBe(true);
    expect(latchkey.verifyIncomingWebhookRequest(Buffer.from(body), headers)).toBe(true);
    expect(latchkey.verifyIncomingWebhookRequest(JSON.parse(body), new Headers(headers))).toBe(true);
  });

  it('accepts when any of several signatures matches (rotation overlap)', () => {
    const headers = sign('msg_1', now, body);
    headers['webhook-signature'] = `v1,${Buffer.alloc(32).toString('base64')} ${headers['webhook-signature']}`;
    expect(latchkey.verifyIncomingWebhookRequest(body, headers)).toBe(true);
  });

  it('rejects tampered bodies, stale or future timestamps, and garbage, without throwing', () => {
    expect(latchkey.verifyIncomingWebhookRequest(body.replace('true', 'false'), sign('msg_1', now, body))).toBe(false);
    expect(latchkey.verifyIncomingWebhookRequest(body, sign('msg_1', now - 301, body))).toBe(false);
    expect(latchkey.verifyIncomingWebhookRequest(body, sign('msg_1', now + 301, body))).toBe(false);
    expect(latchkey.verifyIncomingWebhookRequest(body, { ...sign('msg_1', now, body), 'webhook-signature': 'v1,short' })).toBe(false);
    expect(latchkey.verifyIncomingWebhookRequest(body, { ...sign('msg_1', now, body), 'webhook-signature': 'v2,xx' })).toBe(false);
    expect(latchkey.verifyIncomingWebhookRequest(body, {})).toBe(false);
  });

  it('uses the API key when no signing key is given', () => {
    const byKey = new Latchkey({ apiKey: 'lk_sk_plain' });
    expect(byKey.verifyIncomingWebhookRequest(body, sign('m', now, body, Buffer.from('lk_sk_plain')))).toBe(true);
    expect(byKey.verifyIncomingWebhookRequest(body, sign('m', now, body))).toBe(false);
  });
});
