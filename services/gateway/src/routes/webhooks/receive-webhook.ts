import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import { HOP_BY_HOP_HEADERS, webhookContracts } from '@latchkey/contracts';
import { AppError, toErrorItems } from '@latchkey/errors';
import { defineBareRoute } from '../../http/define-route.js';
import type { HeaderSink } from '../../http/own-headers.js';
import { countRateLimited } from '../../http/request-metrics.js';

const PREFIX = '/webhook';

const params = z.strictObject({
  environmentPublicId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  integration: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/),
});

/**
 * Not persisted: connection-level headers, and credentials a sender may attach (nothing checks
 * them, and secrets are kept out of JetStream where they are not needed).
 */
const DROPPED_HEADERS = new Set(['cookie', 'host', 'content-length', 'authorization', 'proxy-authorization']);
const ACCEPTED = Buffer.from(JSON.stringify({ success: true }));
/** What a webhook costs of its environment's budget besides its body: headers, query, the job's envelope. */
const WEBHOOK_OVERHEAD_BYTES = 1024;

/** Bytes of webhook bodies this replica holds, as they arrive (`WEBHOOK_BODIES_HELD_BYTES`). */
let heldBytes = 0;

const tooLarge = (limit: number) => new AppError('payload_too_large', `Webhook bodies are limited to ${limit} bytes`);

/**
 * The raw body, up to `limit` bytes (413 beyond, at once for a declared length), within the
 * replica's `heldLimit` of bodies on their way (503 beyond), sent whole within `timeoutMs` (400
 * beyond, and the connection closed). Bytes are held as they arrive, never on a declared
 * length's word, and for `timeoutMs` at most: senders that declare bodies and send nothing, or
 * trickle them, would otherwise hold the replica's share from every environment's webhooks for
 * as long as node keeps a request open (5 minutes).
 */
function readRawBody(req: IncomingMessage, declared: number | undefined, bounds: { limit: number; heldLimit: number; timeoutMs: number }, ownHeaders: HeaderSink): Promise<Buffer> {
  const { limit, heldLimit, timeoutMs } = bounds;
  if (declared !== undefined && declared > limit) return Promise.reject(tooLarge(limit));
  let held = 0;
  const hold = (bytes: number) => {
    if (heldBytes + bytes > heldLimit) return false;
    heldBytes += bytes;
    held += bytes;
    return true;
  };
  let deadline: NodeJS.Timeout | undefined;
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (error: AppError) => {
      req.removeAllListeners('data');
      req.resume();
      reject(error);
    };
    deadline = setTimeout(() => {
      // Not waited for again: the answer ends the connection, and the rest of the body with it.
      ownHeaders.setHeader('Connection', 'close');
      fail(new AppError('invalid_body', `The webhook body did not arrive within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return fail(tooLarge(limit));
      if (!hold(chunk.length)) return fail(new AppError('service_unavailable', 'Too many webhook bodies are arriving at once; retry'));
      chunks.push(chunk);
    });
    req.once('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)));
    req.once('error', reject);
    // A sender gone before its body ended: what it held is given back (a settled promise ignores this).
    req.once('close', () => reject(new AppError('invalid_body', 'The webhook body ended early')));
  }).finally(() => {
    clearTimeout(deadline);
    heldBytes -= held;
  });
}

/** The body's declared length: undefined when absent (a chunked body) or not a plain number. */
function declaredLength(req: IncomingMessage): number | undefined {
  const value = req.headers['content-length'];
  return value !== undefined && /^\d{1,15}$/.test(value) ? Number(value) : undefined;
}

function firstValues(record: Record<string, unknown>, skip: ReadonlySet<string> = new Set()): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(record)) {
    if (skip.has(name) || HOP_BY_HOP_HEADERS.has(name)) continue;
    const text = Array.isArray(value) ? value.join(', ') : value;
    if (typeof text === 'string') out[name] = text;
  }
  return out;
}

/**
 * The two path parameters of `/webhook/{environmentPublicId}/{integration}` (a trailing slash
 * allowed), decoded; undefined when the path has another shape.
 */
function pathParams(path: string): Record<string, string> | undefined {
  if (!path.startsWith(`${PREFIX}/`)) return undefined;
  const parts = path.slice(PREFIX.length + 1).split('/');
  if (parts.length === 3 && parts[2] === '') parts.pop();
  if (parts.length !== 2) return undefined;
  try {
    return { environmentPublicId: decodeURIComponent(parts[0]!), integration: decodeURIComponent(parts[1]!) };
  } catch {
    throw new AppError('invalid_uri_params', 'Invalid path parameters');
  }
}

/**
 * `POST /webhook/{environmentPublicId}/{integration}`: a provider's webhook. Public (the
 * provider's signature is the proof, checked by the webhook router). The raw request is stored
 * on the JOBS stream before the provider gets its 200, so an answered webhook is never lost;
 * everything else (signature, replays, routing, forwarding) happens in the webhook router. Every
 * stored webhook gets the same 200, including those the router refuses later: the answer is quick
 * and tells a forger nothing about secrets, schemes or connections. Served before express:
 * providers can send bursts, and this path is all parsing and one JetStream publish.
 */
export const receiveWebhook = defineBareRoute({
  prefix: PREFIX,
  auth: 'public',
  scope: null,
  doc: {
    path: '/webhook/{environmentPublicId}/{integration}',
    methods: ['post'],
    summary: "A provider's webhook for an integration: stored, then verified and routed",
    description: 'Any body and content type. Answered `200 {"success": true}` once stored, whatever its signature.',
    answer: z.object({ success: z.literal(true) }),
    errors: ['invalid_uri_params', 'invalid_body', 'unknown_environment', 'payload_too_large', 'too_many_requests'],
  },
  handler: async ({ deps, req, res, ownHeaders }) => {
    const url = req.url ?? '/';
    const queryAt = url.indexOf('?');
    const path = queryAt === -1 ? url : url.slice(0, queryAt);
    const raw = req.method === 'POST' ? pathParams(path) : undefined;
    if (!raw) throw new AppError('route_not_found', `No route for ${req.method ?? ''} ${path}`);
    const parsed = params.safeParse(raw);
    if (!parsed.success) throw new AppError('invalid_uri_params', 'Invalid path parameters', { errors: toErrorItems(parsed.error.issues) });
    const { environmentPublicId, integration } = parsed.data;
    // Before the body is read: a made-up environment costs nothing but its lookup.
    if (!(await deps.knownEnvironments.has(environmentPublicId))) throw new AppError('unknown_environment', 'No such environment');
    // The job is one JetStream message (it cannot stream), with the body in base64 (4 bytes per 3).
    const limit = Math.min(deps.config.MAX_BODY_BYTES, Math.floor(deps.bus.inlineLimit * 0.75));
    // A declared length is charged to the environment's budget before the body is read: past
    // the budget, the upload is refused before it costs the replica anything.
    const declared = declaredLength(req);
    const charge = async (bytes: number) => {
      const budget = await deps.webhookIngest.take(`webhook-ingest.${environmentPublicId}`, bytes + WEBHOOK_OVERHEAD_BYTES);
      if (budget.allowed) return;
      countRateLimited();
      ownHeaders.setHeader('Retry-After', budget.retryAfter);
      throw new AppError('too_many_requests', `This environment's webhooks passed ${budget.limit} bytes this minute; retry in ${budget.retryAfter} s`);
    };
    if (declared !== undefined && declared <= limit) await charge(declared);
    const bounds = { limit, heldLimit: deps.config.WEBHOOK_BODIES_HELD_BYTES, timeoutMs: deps.config.WEBHOOK_BODY_TIMEOUT_MS };
    const body = await readRawBody(req, declared, bounds, ownHeaders);
    if (declared === undefined) await charge(body.length);
    const id = `iwh_${randomUUID().replace(/-/g, '')}`;
    await deps.bus.enqueue(webhookContracts.inbound, {
      id,
      environment_public_id: environmentPublicId,
      integration,
      query: queryAt === -1 ? {} : firstValues(Object.fromEntries(new URLSearchParams(url.slice(queryAt + 1)))),
      headers: firstValues(req.headers, DROPPED_HEADERS),
      body_base64: body.toString('base64'),
      received_at: new Date().toISOString(),
    });
    res.writeHead(200, ownHeaders.with([['Content-Type', 'application/json; charset=utf-8']], ACCEPTED.length));
    res.end(ACCEPTED);
  },
});
