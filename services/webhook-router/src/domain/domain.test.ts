import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { WebhookSignatureScheme } from '@latchkey/contracts';
import { createCircuitBreakers } from './circuit-breaker.js';
import { createDestinationSlots } from './destination-slots.js';
import { logPageOf } from './log-page.js';
import { forwardBody, providerPayload } from './payloads.js';
import { refusalReason, verifyProviderSignature } from './provider-signature.js';
import { isRetryableStatus, nextRetryDelay, parseRetryAfter } from './retry-policy.js';
import { connectionLookup, valueAt } from './routing.js';

const body = Buffer.from('{"event":"ping","serviceConnectionId":"c-1"}');
const hex = (secret: string, algorithm = 'sha256') => createHmac(algorithm, secret).update(body).digest('hex');

describe('provider signatures', () => {
  const declared = { header: 'X-Acme-Signature-256', algorithm: 'sha256' as const, encoding: 'hex' as const, prefix: 'sha256=' };
  const now = Date.parse('2026-01-01T00:00:00Z');
  const check = (headers: Record<string, string>, scheme: WebhookSignatureScheme | null = declared, receivedAt = now) =>
    verifyProviderSignature({ declared: scheme, provider: 'acme', secret: 's3cret', headers, body, receivedAt }).verdict;

  it('accept the declared scheme, prefix included, and refuse anything else', () => {
    expect(check({ 'x-acme-signature-256': `sha256=${hex('s3cret')}` })).toBe('valid');
    expect(check({ 'x-acme-signature-256': `sha256=${hex('other')}` })).toBe('invalid');
    expect(check({ 'x-acme-signature-256': hex('s3cret') })).toBe('invalid');
    expect(check({ 'x-acme-signature-256': 'sha256=abc' })).toBe('invalid');
    expect(check({})).toBe('missing');
  });

  it('apply the spec scheme x-<provider>-signature-256 when the catalog declares none', () => {
    expect(check({ 'x-acme-signature-256': hex('s3cret') }, null)).toBe('valid');
    expect(check({ 'x-acme-signature-256': hex('nope') }, null)).toBe('invalid');
    expect(check({}, null)).toBe('unsigned');
  });

  it('read base64 and other algorithms', () => {
    const digest = createHmac('sha1', 's3cret').update(body).digest('base64');
    expect(check({ sig: digest }, { header: 'Sig', algorithm: 'sha1', encoding: 'base64' })).toBe('valid');
  });

  describe('with a signed timestamp and delivery id (Standard Webhooks)', () => {
    const standard: WebhookSignatureScheme = {
      header: 'webhook-signature',
      algorithm: 'sha256',
      encoding: 'base64',
      prefix: 'v1,',
      signed_content: '{id}.{timestamp}.{body}',
      timestamp_header: 'webhook-timestamp',
      id_header: 'webhook-id',
    };
    const sign = (id: string, seconds: number, secret = 's3cret') =>
      `v1,${createHmac('sha256', secret).update(`${id}.${seconds}.${body.toString()}`).digest('base64')}`;
    const headers = (id: string, seconds: number, signature = sign(id, seconds)) => ({ 'webhook-id': id, 'webhook-timestamp': String(seconds), 'webhook-signature': signature });
    const at = now / 1000;
    const full = (given: Record<string, string>, receivedAt = now) =>
      verifyProviderSignature({ declared: standard, provider: 'acme', secret: 's3cret', headers: given, body, receivedAt });

    it('take the signature over id, timestamp and body, one of several', () => {
      expect(check(headers('msg_1', at), standard)).toBe('valid');
      expect(check(headers('msg_1', at, `v1,AAAA ${sign('msg_1', at)}`), standard)).toBe('valid');
      expect(check(headers('msg_2', at, sign('msg_1', at)), standard)).toBe('invalid');
      expect(check({ 'webhook-id': 'msg_1', 'webhook-signature': sign('msg_1', at) }, standard)).toBe('missing');
    });

    it('refuse a timestamp more than five minutes from when the gateway took the webhook', () => {
      expect(check(headers('msg_1', at - 299), standard)).toBe('valid');
      expect(check(headers('msg_1', at - 301), standard)).toBe('stale');
      expect(check(headers('msg_1', at + 301), standard)).toBe('stale');
      // Handled late (a backlog in the router) but received in time: still valid.
      expect(check(headers('msg_1', at - 10), standard, now)).toBe('valid');
      expect(check(headers('msg_1', Number.NaN, sign('msg_1', Number.NaN)), standard)).toBe('invalid');
      expect(check(headers('msg_1', at), standard, Number.NaN)).toBe('stale');
    });

    it('key replays by the signed delivery id: a new timestamp does not make a new webhook', () => {
      expect(full(headers('msg_1', at)).replayKey).toBe('id:msg_1');
      expect(full(headers('msg_1', at - 60)).replayKey).toBe('id:msg_1');
      expect(full(headers('msg_2', at)).replayKey).toBe('id:msg_2');
    });
  });

  it('key replays by the digest of the signed bytes when no delivery id is signed, and give none when refused', () => {
    const signed = verifyProviderSignature({ declared, provider: 'acme', secret: 's3cret', headers: { 'x-acme-signature-256': `sha256=${hex('s3cret')}` }, body, receivedAt: now });
    expect(signed.replayKey).toBe(`sha256:${createHash('sha256').update(body).digest('hex')}`);
    // An unsigned delivery id is not trusted: the key stays the body's.
    const withId = verifyProviderSignature({ declared, provider: 'acme', secret: 's3cret', headers: { 'x-acme-signature-256': `sha256=${hex('s3cret')}`, 'x-acme-delivery': 'd-2' }, body, receivedAt: now });
    expect(withId.replayKey).toBe(signed.replayKey);
    expect(verifyProviderSignature({ declared: null, provider: 'acme', secret: 's3cret', headers: {}, body, receivedAt: now }).replayKey).toBe(signed.replayKey);
    expect(verifyProviderSignature({ declared, provider: 'acme', secret: 's3cret', headers: {}, body, receivedAt: now }).replayKey).toBeNull();
  });

  it('refuse all but valid ones, and unsigned ones unless the integration accepts them', () => {
    expect(refusalReason('valid', false)).toBeNull();
    expect(refusalReason('unsigned', false)).toBe('unsigned_not_accepted');
    expect(refusalReason('unsigned', true)).toBeNull();
    expect([refusalReason('invalid', true), refusalReason('missing', true), refusalReason('stale', true)]).toEqual(['bad_signature', 'missing_signature', 'stale_timestamp']);
  });
});

describe('routing', () => {
  const rule = { body_path: 'account.id', match: 'connection_config' as const, key: 'accountId' };
  it('prefer the query, then the body field, then the catalog rule', () => {
    expect(connectionLookup({ serviceConnectionId: 'q' }, { serviceConnectionId: 'b' }, rule)).toEqual({ connection_id: 'q' });
    expect(connectionLookup({}, { serviceConnectionId: 'b', account: { id: 7 } }, rule)).toEqual({ connection_id: 'b' });
    expect(connectionLookup({}, { account: { id: 7 } }, rule)).toEqual({ field: 'connection_config', key: 'accountId', value: 7 });
    expect(connectionLookup({}, { account: {} }, rule)).toBeNull();
    expect(connectionLookup({}, 'not json', null)).toBeNull();
    expect(valueAt({ a: [{ b: 'x' }] }, 'a.0.b')).toBe('x');
  });

  it('look for nothing when the webhook names what no connection can be: the vault refuses the whole batch\'s lookup otherwise', () => {
    const long = 'x'.repeat(300);
    expect(connectionLookup({ serviceConnectionId: long }, {}, rule)).toBeNull();
    expect(connectionLookup({}, { serviceConnectionId: long }, rule)).toBeNull();
    expect(connectionLookup({}, { account: { id: 'y'.repeat(2000) } }, rule)).toBeNull();
  });

  it('forward exactly the spec fields, without connectionId when unmatched', () => {
    const forwarded = (body: string, connectionId: string | null) => forwardBody({ provider: 'p', integration: 'i', connectionId, payload: providerPayload(Buffer.from(body)) });
    expect(JSON.parse(forwarded('{"a":1}', 'c'))).toEqual({ from: 'p', providerConfigKey: 'i', type: 'forward', connectionId: 'c', payload: { a: 1 } });
    expect(Object.keys(JSON.parse(forwarded('1', null)))).toEqual(['from', 'providerConfigKey', 'type', 'payload']);
    // A body that is no JSON goes as its text.
    expect(JSON.parse(forwarded('a=1&b=2', null)).payload).toBe('a=1&b=2');
  });

  it("forward the provider's JSON body unchanged: its numbers past 2^53, its decimals, its keys as written", () => {
    // Parsed and written again, 9007199254740993 became ...992 and 1.50 became 1.5: a numeric id
    // named another record, and the provider's own signature over its body no longer matched.
    const body = '{"id": 9007199254740993, "amount": 1.50, "tags": ["a"] , "id2":"x\\u00e9"}';
    const forward = forwardBody({ provider: 'p', integration: 'i', connectionId: 'c', payload: providerPayload(Buffer.from(body)) });
    expect(forward).toBe(`{"from":"p","providerConfigKey":"i","type":"forward","connectionId":"c","payload":${body}}`);
    expect(JSON.parse(forward)).toMatchObject({ type: 'forward', payload: { tags: ['a'] } });
  });
});

describe('operator log pages', () => {
  it('read `before` as a time and leave it out when the request has none', () => {
    expect(logPageOf({ limit: 50, before: '2026-01-01T00:00:00Z' })).toEqual({ limit: 50, before: new Date('2026-01-01T00:00:00Z') });
    expect(logPageOf({ limit: 50 })).toEqual({ limit: 50 });
    expect(Object.keys(logPageOf({ limit: 1, before: undefined }))).toEqual(['limit']);
  });
});

describe('retry policy', () => {
  const base = { createdAt: 0, now: 0, baseMs: 1000, capMs: 60_000, windowMs: 3600_000 };
  it('backs off exponentially with jitter in the upper half, capped', () => {
    expect(nextRetryDelay({ ...base, attempt: 1, retryAfterMs: null, random: () => 0 })).toBe(500);
    expect(nextRetryDelay({ ...base, attempt: 3, retryAfterMs: null, random: () => 1 })).toBe(4000);
    expect(nextRetryDelay({ ...base, attempt: 30, retryAfterMs: null, random: () => 1 })).toBe(60_000);
  });
  it('honours a longer Retry-After up to the cap, ends with the window, and gives up once it closed', () => {
    expect(nextRetryDelay({ ...base, attempt: 1, retryAfterMs: 20_000, random: () => 0 })).toBe(20_000);
    expect(nextRetryDelay({ ...base, attempt: 1, retryAfterMs: 999_999, random: () => 0 })).toBe(60_000);
    expect(nextRetryDelay({ ...base, now: 3599_900, attempt: 1, retryAfterMs: null, random: () => 0 })).toBe(100);
    expect(nextRetryDelay({ ...base, now: 3600_000, attempt: 1, retryAfterMs: null, random: () => 0 })).toBeNull();
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 0)).toBe(10_000);
    expect(parseRetryAfter('soon', 0)).toBeNull();
  });
  it('retries 5xx, 408 and 429 only', () => {
    expect([500, 503, 408, 429].every(isRetryableStatus)).toBe(true);
    expect([400, 401, 404, 410, 422, 301].some(isRetryableStatus)).toBe(false);
  });
});

describe('circuit breaker', () => {
  it('opens after the threshold, lets one probe through after the cool-down, closes on an answer', () => {
    let now = 0;
    const breakers = createCircuitBreakers({ threshold: 2, cooldownMs: 1000, now: () => now });
    breakers.failed('u');
    expect(breakers.waitFor('u')).toBe(0);
    breakers.failed('u');
    expect(breakers.waitFor('u')).toBe(1000);
    now = 1000;
    expect(breakers.waitFor('u')).toBe(0); // the probe
    expect(breakers.waitFor('u')).toBeGreaterThan(0); // others wait for it
    breakers.answered('u');
    expect(breakers.waitFor('u')).toBe(0);
  });

  it('lets the next delivery probe when a probe ended without reaching the URL', () => {
    let now = 0;
    const breakers = createCircuitBreakers({ threshold: 1, cooldownMs: 1000, now: () => now });
    breakers.failed('u');
    now = 1000;
    expect(breakers.waitFor('u')).toBe(0); // the probe
    expect(breakers.waitFor('u')).toBeGreaterThan(0);
    breakers.settled('u');
    expect(breakers.waitFor('u')).toBe(0); // the next probe
    expect(breakers.states()).toEqual({ failing: 0, open: 0, halfOpen: 1 });
  });
});

describe('slots per destination URL', () => {
  it('give a URL its share at once, and let a burst to a URL not heard from yet wait, each delivery served as a slot frees', async () => {
    const slots = createDestinationSlots({ perUrl: 2, waitMs: 1000, now: () => 0 });
    const first = await slots.take('u');
    expect(first).not.toBeNull();
    expect(await slots.take('u')).not.toBeNull();
    // Its share is in flight: the rest of the burst waits (taken for quick, never heard from).
    const waiting = Array.from({ length: 10 }, () => slots.take('u'));
    // Another URL has a share of its own.
    expect(await slots.take('v')).not.toBeNull();
    first!.release();
    for (const next of waiting) {
      const served = await next;
      expect(served).not.toBeNull();
      served!.release();
    }
  });

  it("let a quick URL's burst wait for its slots, and hand a slow URL's back at once", async () => {
    let now = 0;
    const slots = createDestinationSlots({ perUrl: 2, waitMs: 1000, now: () => now });
    const learn = async (url: string, tookMs: number) => {
      const slot = await slots.take(url);
      now += tookMs;
      slot!.release();
    };
    await learn('quick', 20);
    await learn('slow', 5_000);
    const quick = [await slots.take('quick'), await slots.take('quick')];
    const slow = [await slots.take('slow'), await slots.take('slow')];
    // Two slots freeing every 20 ms serve 100 waiting deliveries within the second.
    const burst = Array.from({ length: 100 }, () => slots.take('quick'));
    expect(await slots.take('quick')).toBeNull();
    expect(await slots.take('slow')).toBeNull();
    for (const slot of quick) slot!.release();
    for (let i = 0; i < burst.length; i++) (await burst[i]!)!.release();
    for (const slot of slow) slot!.release();
  });

  it('take a URL for slow once its delivery in flight has taken long, whatever its last one took', async () => {
    let now = 0;
    const slots = createDestinationSlots({ perUrl: 1, waitMs: 1000, now: () => now });
    const quick = await slots.take('u');
    now += 10;
    quick!.release();
    await slots.take('u');
    now += 2_000;
    expect(await slots.take('u')).toBeNull();
  });

  it('hand a waiting delivery back when no slot freed within the wait', async () => {
    const slots = createDestinationSlots({ perUrl: 1, waitMs: 50 });
    await slots.take('u');
    expect(await slots.take('u')).toBeNull();
  });
});
