import type { IncomingMessage, ServerResponse } from 'node:http';
import { batchedPublisher, outgoingHeaders, pullStream, servePullStream, unavailable } from '@latchkey/bus';
import { createInbox, type Msg, type MsgHdrs, type NatsConnection } from 'nats';
import {
  HOP_BY_HOP_HEADERS,
  PROXY_KEEPALIVE_HEADER,
  PROXY_KEEPALIVE_MS,
  PROXY_META_HEADER,
  PROXY_SUBJECT,
  decodeMeta,
  encodeMeta,
  proxyReplyMeta,
  type ProxyRequestMeta,
} from '@latchkey/contracts';
import { AppError, type ErrorItem } from '@latchkey/errors';
import { defineBareRoute } from '../../http/define-route.js';

/** Ours: never forwarded to the provider (nor are hop-by-hop headers). */
const NOT_FORWARDED = new Set([
  'authorization',
  'host',
  'content-length',
  'x-request-id',
  'connection-id',
  'provider-config-key',
  'retries',
  'retry-on',
  'base-url-override',
  'decompress',
]);
const FORWARD_PREFIX = 'service-proxy-';
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const HEADROOM_BYTES = 64 * 1024;

/** Reads the proxy's own headers; each problem is listed, as for any validation error. */
function configuration(req: IncomingMessage) {
  const errors: ErrorItem[] = [];
  const header = (name: string) => {
    const value = req.headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const required = (name: string) => {
    const value = header(name);
    if (!value) errors.push({ code: 'required', message: `${name} is required`, path: name });
    return value ?? '';
  };
  const connectionId = required('connection-id');
  const providerConfigKey = required('provider-config-key');
  const retriesText = header('retries') ?? '0';
  const retries = /^\d{1,2}$/.test(retriesText) && Number(retriesText) <= 10 ? Number(retriesText) : -1;
  if (retries < 0) errors.push({ code: 'invalid_value', message: 'a whole number from 0 to 10', path: 'retries' });
  const retryOn = (header('retry-on') ?? '')
    .split(',')
    .map((code) => code.trim())
    .filter(Boolean)
    .map(Number);
  if (retryOn.some((code) => !Number.isInteger(code) || code < 100 || code > 599)) {
    errors.push({ code: 'invalid_value', message: 'comma-separated HTTP status codes', path: 'retry-on' });
  }
  const decompress = header('decompress');
  if (decompress !== undefined && decompress !== 'true' && decompress !== 'false') {
    errors.push({ code: 'invalid_value', message: 'true or false', path: 'decompress' });
  }
  const override = header('base-url-override');
  if (override !== undefined && !/^https?:\/\/[^\s]+$/i.test(override)) {
    errors.push({ code: 'invalid_value', message: 'an http(s) URL', path: 'base-url-override' });
  }
  const method = req.method ?? '';
  if (!METHODS.has(method)) errors.push({ code: 'invalid_value', message: `method ${method} is not proxied`, path: 'method' });
  if (errors.length > 0) throw new AppError('invalid_headers', 'Invalid proxy headers', { errors });
  return {
    connection_id: connectionId,
    provider_config_key: providerConfigKey,
    retries,
    retry_on: retryOn,
    ...(override === undefined ? {} : { base_url_override: override }),
    ...(decompress === undefined ? {} : { decompress: decompress === 'true' }),
  };
}

/** The caller's headers as the provider should see them. */
function forwardedHeaders(req: IncomingMessage): Array<[string, string]> {
  const headers: Array<[string, string]> = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (lower.startsWith(FORWARD_PREFIX)) headers.push([name.slice(FORWARD_PREFIX.length), req.rawHeaders[i + 1]!]);
    else if (!NOT_FORWARDED.has(lower) && !HOP_BY_HOP_HEADERS.has(lower)) headers.push([name, req.rawHeaders[i + 1]!]);
  }
  return headers;
}

/** Reads the body up to `limit`; a larger one continues as an iterator over the rest. */
async function readAhead(req: IncomingMessage, limit: number): Promise<{ head: Buffer; rest: AsyncIterable<Uint8Array> | null }> {
  const iterator = (req as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await iterator.next();
    if (done) return { head: Buffer.concat(chunks), rest: null };
    chunks.push(value);
    size += value.length;
    if (size > limit) {
      return {
        head: Buffer.alloc(0),
        rest: (async function* () {
          yield* chunks;
          for (;;) {
            const next = await iterator.next();
            if (next.done) return;
            yield next.value;
          }
        })(),
      };
    }
  }
}

/**
 * Calls to proxy replicas, with their answers routed through one wildcard inbox per gateway (no
 * subscription per call). A replica's keepalives re-arm the call's silence timer: silence for a
 * few intervals means the replica died (or none runs), and the caller gets a 503 within
 * seconds rather than at the deadline.
 */
function createProxyExchange(nc: NatsConnection) {
  const prefix = createInbox();
  const publisher = batchedPublisher(nc);
  const pending = new Map<string, { resolve(msg: Msg): void; rearm(): void }>();
  nc.subscribe(`${prefix}.*`, {
    callback: (error, msg) => {
      if (error) return;
      const call = pending.get(msg.subject);
      if (!call) return;
      if (msg.headers?.get(PROXY_KEEPALIVE_HEADER) === '1') call.rearm();
      else call.resolve(msg);
    },
  });
  let sequence = 0;
  return (payload: Uint8Array, headers: MsgHdrs, deadlineMs: number): Promise<Msg> =>
    new Promise((resolve, reject) => {
      const inbox = `${prefix}.${(sequence++).toString(36)}`;
      const started = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const finish = () => {
        clearTimeout(timer);
        pending.delete(inbox);
      };
      const rearm = () => {
        clearTimeout(timer);
        const left = deadlineMs - (Date.now() - started);
        timer = setTimeout(() => {
          finish();
          reject(new AppError('service_unavailable', 'No proxy replica answered, or the one handling the call stopped'));
        }, Math.max(0, Math.min(PROXY_KEEPALIVE_MS * 3, left)));
      };
      pending.set(inbox, {
        resolve: (msg) => {
          finish();
          resolve(msg);
        },
        rearm,
      });
      rearm();
      publisher.publish(PROXY_SUBJECT, payload, { reply: inbox, headers }, (error) => {
        finish();
        reject(unavailable(PROXY_SUBJECT, error));
      });
    });
}

const exchanges = new WeakMap<NatsConnection, ReturnType<typeof createProxyExchange>>();

function exchange(nc: NatsConnection, payload: Uint8Array, headers: MsgHdrs, deadlineMs: number): Promise<Msg> {
  let send = exchanges.get(nc);
  if (!send) exchanges.set(nc, (send = createProxyExchange(nc)));
  return send(payload, headers, deadlineMs);
}

async function writeOut(res: ServerResponse, chunks: AsyncIterable<Uint8Array>): Promise<void> {
  for await (const chunk of chunks) {
    if (res.destroyed) break;
    if (!res.write(chunk)) await new Promise((resolve) => res.once('drain', resolve).once('close', resolve));
  }
  res.end();
}

/**
 * `/proxy/{anyPath}`: forwards the call to the provider through a proxy replica, which injects
 * the connection's credentials. The answer comes back as the provider gave it. Bodies either
 * way ride inside the NATS messages up to about 1 MiB and stream in chunks beyond.
 */
export const proxyRequest = defineBareRoute({
  prefix: '/proxy',
  scope: 'environment:proxy',
  handler: async ({ deps, key, req, res }) => {
    const settings = configuration(req);
    const nc = deps.bus.nc;
    const inlineLimit = Math.min(1024 * 1024, (nc.info?.max_payload ?? 1024 * 1024) - HEADROOM_BYTES);
    const body = req.method === 'GET' || req.method === 'HEAD' ? { head: Buffer.alloc(0), rest: null } : await readAhead(req, inlineLimit);
    const requestStream = body.rest
      ? servePullStream(nc, body.rest, { idleTimeoutMs: deps.config.PROXY_TIMEOUT_MS })
      : undefined;
    const url = req.url ?? '/proxy';
    const queryAt = url.indexOf('?');
    const meta: ProxyRequestMeta = {
      environment_id: key.environmentId,
      key_id: key.keyId,
      method: req.method as ProxyRequestMeta['method'],
      path: (queryAt < 0 ? url : url.slice(0, queryAt)).replace(/^\/proxy\/?/, ''),
      query: queryAt < 0 ? '' : url.slice(queryAt + 1),
      headers: forwardedHeaders(req),
      ...settings,
      body: requestStream ? { stream: requestStream.inbox } : 'inline',
    };
    const headers = outgoingHeaders();
    headers.set(PROXY_META_HEADER, encodeMeta(meta));
    // Every attempt may take the upstream timeout, and retries wait up to 10 s each.
    const deadline = (deps.config.PROXY_TIMEOUT_MS + 10_000) * (settings.retries + 1) + 5_000;
    const replyMsg = await exchange(nc, body.head, headers, deadline);
    const reply = decodeMeta(proxyReplyMeta, replyMsg.headers?.get(PROXY_META_HEADER));
    if (!reply.ok) throw AppError.fromBody(reply.error);

    const grouped = new Map<string, { name: string; values: string[] }>();
    for (const [name, value] of reply.headers) {
      const entry = grouped.get(name.toLowerCase());
      if (entry) entry.values.push(value);
      else grouped.set(name.toLowerCase(), { name, values: [value] });
    }
    for (const { name, values } of grouped.values()) res.setHeader(name, values.length === 1 ? values[0]! : values);
    res.statusCode = reply.status;
    if (reply.body === 'inline') {
      res.end(replyMsg.data);
    } else {
      const stream = pullStream(nc, reply.body.stream, deps.config.PROXY_TIMEOUT_MS);
      res.once('close', () => void stream.return(undefined));
      await writeOut(res, stream);
    }
  },
});
