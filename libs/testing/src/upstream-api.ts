import { createHash } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { gzipSync } from 'node:zlib';
import { BodyTooLarge, readBody } from './read-body.js';

/**
 * A small real HTTP API on loopback standing in for a customer's upstream behind the proxy:
 * it echoes what arrived, misbehaves on request (statuses, flakiness, slowness, redirects),
 * streams large bodies and paginates in the three common styles.
 */

export interface UpstreamApiOptions {
  /** Items behind each /paginate route. Default 6. */
  paginationItems?: number;
  /** Page size when the request names no `limit`. Default 2, so the default is 3 pages. */
  pageSize?: number;
}

export interface UpstreamRequestRecord {
  method: string;
  /** Path and query exactly as received. */
  url: string;
  path: string;
  headers: IncomingHttpHeaders;
  bodyLength: number;
}

/** What every route under /echo answers. */
export interface UpstreamEcho {
  method: string;
  /** Path and query exactly as received. */
  url: string;
  path: string;
  /** Repeated parameters become arrays, in order. */
  query: Record<string, string | string[]>;
  headers: IncomingHttpHeaders;
  /** Name, value, name, value… with the sender's casing and repetitions. */
  rawHeaders: string[];
  body: {
    length: number;
    base64: string;
    /** The body as text when it is valid UTF-8, else null. */
    text: string | null;
  };
}

export interface PaginationItem {
  id: string;
  n: number;
}

export interface TestUpstreamApi {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Every request in arrival order (live; cleared in place by reset). */
  requests: UpstreamRequestRecord[];
  /** Forgets recorded requests and /flaky attempt counts. */
  reset(): void;
  close(): Promise<void>;
}

const BYTES_CHUNK = 64 * 1024;
const MAX_BYTES = 1024 ** 3;
const MAX_BODY_BYTES = 64 * 1024 * 1024;
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
// Bound once: under jest's vm contexts every `Math.` lookup in the hot loop goes through the
// sandbox global and makes 5 MB take half a second instead of a few milliseconds.
const imul = Math.imul;

/**
 * The body /bytes/:n?seed= streams, chunk by chunk: mulberry32 output as little-endian words,
 * so any chunking yields the same bytes and a test can recompute what it should have received.
 */
export function* pseudoRandomChunks(length: number, seed = 1): Generator<Buffer> {
  let state = seed >>> 0;
  let remaining = length;
  while (remaining > 0) {
    const size = remaining < BYTES_CHUNK ? remaining : BYTES_CHUNK;
    const words = (size + 3) >>> 2;
    const chunk = Buffer.allocUnsafe(words * 4);
    for (let word = 0; word < words; word += 1) {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = imul(t ^ (t >>> 15), t | 1);
      t ^= t + imul(t ^ (t >>> 7), t | 61);
      chunk.writeUInt32LE((t ^ (t >>> 14)) >>> 0, word * 4);
    }
    remaining -= size;
    yield size === chunk.length ? chunk : chunk.subarray(0, size);
  }
}

/** The SHA-256 (hex) of pseudoRandomChunks(length, seed), computed without holding the bytes. */
export function bytesDigest(length: number, seed = 1): string {
  const hash = createHash('sha256');
  for (const chunk of pseudoRandomChunks(length, seed)) hash.update(chunk);
  return hash.digest('hex');
}

/** The whole of pseudoRandomChunks(length, seed) in one buffer. */
export function pseudoRandomBytes(length: number, seed = 1): Buffer {
  return Buffer.concat([...pseudoRandomChunks(length, seed)]);
}

export async function startUpstreamApi(options: UpstreamApiOptions = {}): Promise<TestUpstreamApi> {
  const totalItems = options.paginationItems ?? 6;
  const defaultLimit = options.pageSize ?? 2;
  const items: PaginationItem[] = Array.from({ length: totalItems }, (_, index) => ({ id: `item-${index + 1}`, n: index + 1 }));
  const requests: UpstreamRequestRecord[] = [];
  const flakyAttempts = new Map<string, number>();
  const pendingTimers = new Set<NodeJS.Timeout>();

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const rawUrl = req.url ?? '/';
    const url = new URL(rawUrl, base);
    const body = await readBody(req, MAX_BODY_BYTES);
    requests.push({ method: req.method ?? 'GET', url: rawUrl, path: url.pathname, headers: req.headers, bodyLength: body.length });

    const [first, second, ...rest] = url.pathname.split('/').slice(1);
    if (first === 'echo') return sendJson(res, 200, echo(req, url, rawUrl, body));
    if (first === 'status' && second !== undefined && rest.length === 0) return status(res, url, second);
    if (first === 'flaky' && second !== undefined && rest.length === 0) return flaky(req, res, url, second);
    if (first === 'bytes' && second !== undefined && rest.length === 0) return bytes(res, url, second);
    if (first === 'gzip' && second === undefined) return gzip(res);
    if (first === 'slow' && second !== undefined && rest.length === 0) return slow(res, second);
    if (first === 'redirect' && second === undefined) return redirect(res, url);
    if (first === 'paginate' && rest.length === 0) {
      if (second === 'cursor') return paginateByCursor(res, url);
      if (second === 'link') return paginateByLink(res, url);
      if (second === 'offset') return paginateByOffset(res, url);
    }
    sendJson(res, 404, { error: 'not_found', path: url.pathname });
  }

  function echo(req: IncomingMessage, url: URL, rawUrl: string, body: Buffer): UpstreamEcho {
    const query: Record<string, string | string[]> = {};
    for (const [name, value] of url.searchParams) {
      const seen = query[name];
      query[name] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
    }
    return {
      method: req.method ?? 'GET',
      url: rawUrl,
      path: url.pathname,
      query,
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      body: { length: body.length, base64: body.toString('base64'), text: utf8OrNull(body) },
    };
  }

  function status(res: ServerResponse, url: URL, code: string): void {
    const value = Number(code);
    if (!Number.isInteger(value) || value < 200 || value > 599) return sendJson(res, 400, { error: 'status must be 200-599' });
    const retryAfter = url.searchParams.get('retry_after');
    const headers: OutgoingHttpHeaders = retryAfter === null ? {} : { 'retry-after': retryAfter };
    if (value === 204 || value === 205 || value === 304) {
      res.writeHead(value, headers).end();
      return;
    }
    sendJson(res, value, { status: value }, headers);
  }

  function flaky(req: IncomingMessage, res: ServerResponse, url: URL, count: string): void {
    const failures = Number(count);
    if (!Number.isInteger(failures) || failures < 0) return sendJson(res, 400, { error: 'n must be a non-negative integer' });
    const testId = headerValue(req.headers['x-test-id']) ?? '';
    const key = `${testId}\n${failures}`;
    const attempt = (flakyAttempts.get(key) ?? 0) + 1;
    flakyAttempts.set(key, attempt);
    if (attempt <= failures) {
      const retryAfter = url.searchParams.get('retry_after');
      sendJson(res, 503, { error: 'unavailable', attempt }, retryAfter === null ? {} : { 'retry-after': retryAfter });
      return;
    }
    sendJson(res, 200, { ok: true, attempt });
  }

  async function bytes(res: ServerResponse, url: URL, count: string): Promise<void> {
    const length = Number(count);
    const seed = Number(url.searchParams.get('seed') ?? '1');
    if (!Number.isInteger(length) || length < 0 || length > MAX_BYTES || !Number.isInteger(seed)) {
      return sendJson(res, 400, { error: `n must be an integer 0-${MAX_BYTES} and seed an integer` });
    }
    // Headers go at once: a caller checks the body against bytesDigest(length, seed) itself, so
    // the answer never waits for a pass over the body (seconds for 100 MiB on a busy machine).
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': length });
    try {
      await pipeline(Readable.from(pseudoRandomChunks(length, seed)), res);
    } catch {
      // The client went away mid-stream; nothing to answer.
    }
  }

  function gzip(res: ServerResponse): void {
    const compressed = gzipSync(JSON.stringify(gzipPayload()));
    res
      .writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': compressed.length })
      .end(compressed);
  }

  function slow(res: ServerResponse, delay: string): void {
    const ms = Number(delay);
    if (!Number.isInteger(ms) || ms < 0) return sendJson(res, 400, { error: 'ms must be a non-negative integer' });
    const timer = setTimeout(() => {
      pendingTimers.delete(timer);
      sendJson(res, 200, { waitedMs: ms });
    }, ms);
    pendingTimers.add(timer);
    res.once('close', () => {
      clearTimeout(timer);
      pendingTimers.delete(timer);
    });
  }

  function redirect(res: ServerResponse, url: URL): void {
    const code = Number(url.searchParams.get('status') ?? '302');
    if (!REDIRECT_STATUSES.has(code)) return sendJson(res, 400, { error: 'status must be 301, 302, 303, 307 or 308' });
    const target = url.searchParams.get('to') ?? '/echo';
    res.writeHead(code, { location: target, 'content-length': 0 }).end();
  }

  function pageLimit(url: URL): number | undefined {
    const limit = Number(url.searchParams.get('limit') ?? defaultLimit);
    return Number.isInteger(limit) && limit >= 1 && limit <= 100 ? limit : undefined;
  }

  function paginateByCursor(res: ServerResponse, url: URL): void {
    const limit = pageLimit(url);
    const cursor = url.searchParams.get('cursor');
    const offset = cursor === null ? 0 : decodeCursor(cursor);
    if (limit === undefined || offset === undefined) return sendJson(res, 400, { error: 'invalid cursor or limit' });
    const end = offset + limit;
    sendJson(res, 200, { items: items.slice(offset, end), next_cursor: end < items.length ? encodeCursor(end) : null });
  }

  function paginateByLink(res: ServerResponse, url: URL): void {
    const limit = pageLimit(url);
    const page = Number(url.searchParams.get('page') ?? '1');
    if (limit === undefined || !Number.isInteger(page) || page < 1) return sendJson(res, 400, { error: 'invalid page or limit' });
    const offset = (page - 1) * limit;
    const headers: OutgoingHttpHeaders = {};
    if (offset + limit < items.length) {
      const next = new URL(url.pathname, base);
      next.searchParams.set('page', String(page + 1));
      next.searchParams.set('limit', String(limit));
      headers['link'] = `<${next.toString()}>; rel="next"`;
    }
    sendJson(res, 200, { items: items.slice(offset, offset + limit) }, headers);
  }

  function paginateByOffset(res: ServerResponse, url: URL): void {
    const limit = pageLimit(url);
    const offset = Number(url.searchParams.get('offset') ?? '0');
    if (limit === undefined || !Number.isInteger(offset) || offset < 0) return sendJson(res, 400, { error: 'invalid offset or limit' });
    sendJson(res, 200, { items: items.slice(offset, offset + limit), offset, limit, total: items.length });
  }

  const server = createServer((req, res) => {
    route(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      sendJson(res, error instanceof BodyTooLarge ? 413 : 500, { error: String(error) });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url: base,
    requests,
    reset() {
      requests.length = 0;
      flakyAttempts.clear();
    },
    async close() {
      for (const timer of pendingTimers) clearTimeout(timer);
      pendingTimers.clear();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

/** The JSON that /gzip sends compressed. */
export function gzipPayload(): { compressed: true; items: PaginationItem[] } {
  return { compressed: true, items: Array.from({ length: 50 }, (_, index) => ({ id: `gzip-${index + 1}`, n: index + 1 })) };
}

function encodeCursor(offset: number): string {
  return Buffer.from(`offset:${offset}`).toString('base64url');
}

function decodeCursor(cursor: string): number | undefined {
  const match = /^offset:(\d+)$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  return match ? Number(match[1]) : undefined;
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function utf8OrNull(body: Buffer): string | null {
  try {
    return strictUtf8.decode(body);
  } catch {
    return null;
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res
    .writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers })
    .end(text);
}
