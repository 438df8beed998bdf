import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { get } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { bytesDigest, gzipPayload, pseudoRandomBytes, pseudoRandomChunks, startUpstreamApi, type TestUpstreamApi, type UpstreamEcho } from './upstream-api.js';

let api: TestUpstreamApi;

beforeAll(async () => {
  api = await startUpstreamApi();
});

afterEach(() => {
  api.reset();
});

afterAll(async () => {
  await api?.close();
});

describe('/echo', () => {
  it('echoes method, path, query, headers and a text body', async () => {
    const response = await fetch(`${api.url}/echo/a/b?x=1&x=2&y=z%20z`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'X-Custom': 'yes' },
      body: JSON.stringify({ hello: 'wörld' }),
    });
    expect(response.status).toBe(200);
    const echo = (await response.json()) as UpstreamEcho;
    expect(echo).toMatchObject({
      method: 'POST',
      url: '/echo/a/b?x=1&x=2&y=z%20z',
      path: '/echo/a/b',
      query: { x: ['1', '2'], y: 'z z' },
      headers: { 'content-type': 'application/json', 'x-custom': 'yes' },
    });
    expect(echo.rawHeaders).toEqual(expect.arrayContaining(['X-Custom', 'yes']));
    const bodyText = JSON.stringify({ hello: 'wörld' });
    expect(echo.body).toEqual({
      length: Buffer.byteLength(bodyText),
      base64: Buffer.from(bodyText).toString('base64'),
      text: bodyText,
    });
  });

  it('gives binary bodies as base64 only', async () => {
    const binary = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3]);
    const response = await fetch(`${api.url}/echo`, { method: 'PUT', body: binary });
    const echo = (await response.json()) as UpstreamEcho;
    expect(echo.method).toBe('PUT');
    expect(echo.body).toEqual({ length: 5, base64: binary.toString('base64'), text: null });
  });
});

describe('/status and /flaky', () => {
  it('answers the status asked for, with Retry-After when given', async () => {
    const teapot = await fetch(`${api.url}/status/418`);
    expect(teapot.status).toBe(418);
    expect(await teapot.json()).toEqual({ status: 418 });

    const limited = await fetch(`${api.url}/status/429?retry_after=7`);
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('7');

    const empty = await fetch(`${api.url}/status/204`);
    expect(empty.status).toBe(204);
    expect(await empty.text()).toBe('');

    expect((await fetch(`${api.url}/status/99`)).status).toBe(400);
  });

  it('fails the first n calls per x-test-id with 503, then answers 200', async () => {
    const call = async (testId: string): Promise<number> =>
      (await fetch(`${api.url}/flaky/2?retry_after=1`, { headers: { 'x-test-id': testId } })).status;
    expect(await call('a')).toBe(503);
    expect(await call('b')).toBe(503);
    expect(await call('a')).toBe(503);
    const third = await fetch(`${api.url}/flaky/2`, { headers: { 'x-test-id': 'a' } });
    expect(third.status).toBe(200);
    expect(await third.json()).toEqual({ ok: true, attempt: 3 });
    expect(await call('b')).toBe(503);
    expect(await call('b')).toBe(200);

    api.reset();
    const afterReset = await fetch(`${api.url}/flaky/1?retry_after=3`, { headers: { 'x-test-id': 'a' } });
    expect(afterReset.status).toBe(503);
    expect(afterReset.headers.get('retry-after')).toBe('3');
  });
});

describe('/bytes', () => {
  it('streams 5 MB of deterministic bytes with content-length and a digest', async () => {
    const size = 5 * 1024 * 1024;
    const response = await fetch(`${api.url}/bytes/${size}`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-length')).toBe(String(size));
    expect(response.headers.get('content-type')).toBe('application/octet-stream');

    const hash = createHash('sha256');
    let received = 0;
    let chunks = 0;
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
      hash.update(chunk);
      received += chunk.length;
      chunks += 1;
    }
    const expected = createHash('sha256');
    for (const chunk of pseudoRandomChunks(size)) expected.update(chunk);
    const digest = hash.digest('hex');

    expect(received).toBe(size);
    expect(chunks).toBeGreaterThan(1);
    expect(digest).toBe(expected.digest('hex'));
    expect(bytesDigest(size)).toBe(digest);
  });

  it('depends on the seed only, not on chunking', async () => {
    const odd = Buffer.from(await (await fetch(`${api.url}/bytes/70001?seed=7`)).arrayBuffer());
    expect(odd.equals(pseudoRandomBytes(70_001, 7))).toBe(true);
    expect(odd.subarray(0, 1000).equals(pseudoRandomBytes(1000, 7))).toBe(true);
    expect(odd.equals(pseudoRandomBytes(70_001, 8))).toBe(false);
    expect((await fetch(`${api.url}/bytes/-1`)).status).toBe(400);
  });
});

describe('/gzip, /slow and /redirect', () => {
  it('sends gzip-encoded JSON', async () => {
    const response = await fetch(`${api.url}/gzip`);
    expect(response.headers.get('content-encoding')).toBe('gzip');
    expect(await response.json()).toEqual(gzipPayload());

    // fetch decodes transparently; on the wire the body really is gzip.
    const raw = await new Promise<Buffer>((resolve, reject) => {
      get(`${api.url}/gzip`, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(Buffer.concat(chunks)));
        res.on('error', reject);
      }).on('error', reject);
    });
    expect(raw.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    expect(JSON.parse(gunzipSync(raw).toString('utf8'))).toEqual(gzipPayload());
  });

  it('answers /slow/:ms after the delay, and lets callers give up', async () => {
    const started = Date.now();
    const response = await fetch(`${api.url}/slow/120`);
    expect(await response.json()).toEqual({ waitedMs: 120 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(110);

    await expect(fetch(`${api.url}/slow/5000`, { signal: AbortSignal.timeout(50) })).rejects.toThrow();
  });

  it('redirects to the target, with 302 unless told otherwise', async () => {
    const manual = await fetch(`${api.url}/redirect?to=${encodeURIComponent('/echo/landed?q=1')}`, { redirect: 'manual' });
    expect(manual.status).toBe(302);
    expect(manual.headers.get('location')).toBe('/echo/landed?q=1');

    const followed = await fetch(`${api.url}/redirect?status=307&to=/echo/after`, { method: 'POST', body: 'kept' });
    const echo = (await followed.json()) as UpstreamEcho;
    expect(followed.redirected).toBe(true);
    expect(echo).toMatchObject({ method: 'POST', path: '/echo/after', body: { text: 'kept' } });

    expect((await fetch(`${api.url}/redirect?status=200`, { redirect: 'manual' })).status).toBe(400);
  });
});

describe('/paginate', () => {
  const allIds = ['item-1', 'item-2', 'item-3', 'item-4', 'item-5', 'item-6'];
  type Page = { items: { id: string }[]; next_cursor?: string | null; total?: number };

  it('pages by cursor in the body', async () => {
    const ids: string[] = [];
    let pages = 0;
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? '' : `?cursor=${encodeURIComponent(cursor)}`;
      const page = (await (await fetch(`${api.url}/paginate/cursor${query}`)).json()) as Page;
      ids.push(...page.items.map((item) => item.id));
      cursor = page.next_cursor ?? null;
      pages += 1;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(ids).toEqual(allIds);

    const bigger = (await (await fetch(`${api.url}/paginate/cursor?limit=4`)).json()) as Page;
    expect(bigger.items).toHaveLength(4);
    expect((await fetch(`${api.url}/paginate/cursor?cursor=bogus`)).status).toBe(400);
  });

  it('pages by RFC 5988 Link header', async () => {
    const ids: string[] = [];
    const visited: string[] = [];
    let next: string | undefined = `${api.url}/paginate/link`;
    while (next !== undefined) {
      visited.push(next);
      const response: Response = await fetch(next);
      ids.push(...((await response.json()) as Page).items.map((item) => item.id));
      next = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1];
    }
    expect(visited).toEqual([
      `${api.url}/paginate/link`,
      `${api.url}/paginate/link?page=2&limit=2`,
      `${api.url}/paginate/link?page=3&limit=2`,
    ]);
    expect(ids).toEqual(allIds);
  });

  it('pages by offset and limit', async () => {
    const ids: string[] = [];
    let pages = 0;
    for (let offset = 0; ; offset += 2) {
      const page = (await (await fetch(`${api.url}/paginate/offset?offset=${offset}&limit=2`)).json()) as Page;
      expect(page.total).toBe(6);
      if (page.items.length === 0) break;
      ids.push(...page.items.map((item) => item.id));
      pages += 1;
    }
    expect(pages).toBe(3);
    expect(ids).toEqual(allIds);
  });

  it('takes the item count and page size from options', async () => {
    const small = await startUpstreamApi({ paginationItems: 3, pageSize: 1 });
    try {
      const page = (await (await fetch(`${small.url}/paginate/offset`)).json()) as Page;
      expect(page).toEqual({ items: [{ id: 'item-1', n: 1 }], offset: 0, limit: 1, total: 3 });
    } finally {
      await small.close();
    }
  });
});

describe('request log', () => {
  it('records every request, unknown routes included, and forgets them on reset', async () => {
    await fetch(`${api.url}/echo/x?y=1`, { method: 'PATCH', body: 'abcd', headers: { 'x-test-id': 't1' } });
    const missing = await fetch(`${api.url}/nowhere`);
    expect(missing.status).toBe(404);
    expect(api.requests).toEqual([
      { method: 'PATCH', url: '/echo/x?y=1', path: '/echo/x', headers: expect.objectContaining({ 'x-test-id': 't1' }), bodyLength: 4 },
      { method: 'GET', url: '/nowhere', path: '/nowhere', headers: expect.any(Object), bodyLength: 0 },
    ]);
    const requests = api.requests;
    api.reset();
    expect(requests).toEqual([]);
  });
});
