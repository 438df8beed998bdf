import { Readable } from 'node:stream';
import { setTimeout as delay } from 'node:timers/promises';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { isoTime, pullStream, servePullStream, traceIdOf, type OperationLog } from '@latchkey/bus';
import { HOP_BY_HOP_HEADERS, OWN_ERROR_HEADER, proxyContracts, type ProxyCredentials, type ProxyRequestMeta } from '@latchkey/contracts';
import { AppError, toAppError } from '@latchkey/errors';
import type { Bus } from '@latchkey/bus';
import type { Logger } from '@latchkey/logger';
import { settledWithin } from '@latchkey/runtime';
import { inSpan, setSpanAttributes, SpanKind, tracingEnabled } from '@latchkey/tracing';
import { credentialKey, type CredentialCache } from '../domain/credential-cache.js';
import { checkInjectedHeaders, connectionListed } from '../domain/header-policy.js';
import { buildCall } from '../domain/upstream-call.js';
import { RETRYABLE_NETWORK_CODES, isRetryableStatus, retryDelayMs } from '../domain/retry-policy.js';
import { UpstreamNetworkError, callUpstream, type UpstreamCall, type UpstreamOptions, type UpstreamResponse } from '../upstream/call-upstream.js';
import { countRetry, observeUpstream } from '../upstream/upstream-metrics.js';
import type { IncomingProxyCall } from './serve-proxy-calls.js';

/**
 * The modes whose token the vault can get anew: a 401 with one is answered by a forced refresh
 * and the call sent again. A bought token whose provider stated no lifetime is kept until this.
 */
const RENEWABLE_MODES = new Set(['OAUTH2', 'OAUTH2_CC', 'APP', 'JWT', 'OAUTH1', 'TWO_STEP', 'BILL', 'SIGNATURE']);

/**
 * A connection's credentials are refreshed by force after a 401 once in this long, per replica.
 * A path that answers 401 whatever the token (a scope the connection lacks, another allowed
 * host) would otherwise make every call a refresh at the provider's token endpoint, past the
 * vault's back-off, until the provider refused the connection's refreshes altogether.
 */
const FORCED_REFRESH_EVERY_MS = 30_000;
/** Connections whose last forced refresh is remembered, at most (forgotten all at once past it). */
const FORCED_REFRESH_KEPT = 10_000;

export interface ProxyDeps {
  /** Credentials from the vault; answer bodies up to its inline limit ride in the answer. */
  bus: Bus;
  logger: Logger;
  cache: CredentialCache;
  upstream: UpstreamOptions;
  retryCapMs: number;
  /** The operations log: one entry per call, never a header, query or body. */
  operations: Pick<OperationLog, 'recordFields'>;
  /** False: only failed calls are logged (`PROXY_LOG_SUCCESSES`). */
  logSuccesses: boolean;
  /**
   * Aborted as the replica begins to stop: no retry (nor a 401's replay) starts after it, and a
   * wait for one ends at once, so the calls held end within the replica's drain.
   */
  stopping?: AbortSignal;
}

/** The path the caller asked for, as the log keeps it: no query (the gateway passes it apart), bounded. */
const loggedPath = (meta: ProxyRequestMeta) => `/${meta.path}`.slice(0, 2048);
/** A JSON string literal of a value. */
const json = JSON.stringify;

/**
 * `json` for a member that most calls repeat (a busy environment, integration or connection):
 * the last value's literal is kept, so a repeat costs a comparison rather than a call into
 * `JSON.stringify`.
 */
function lastQuoted(): (value: string) => string {
  let last: string | undefined;
  let literal = '';
  return (value) => {
    if (value !== last) {
      literal = json(value);
      last = value;
    }
    return literal;
  };
}
const quoteEnvironment = lastQuoted();
const quoteIntegration = lastQuoted();
const quoteConnection = lastQuoted();
const quoteMethod = lastQuoted();

/** How a call ended: the provider's status when it answered, the error when the call failed. */
interface Outcome {
  upstreamStatus?: number;
  error?: AppError;
}

/** A failure, as the log says it: an error, or the provider answered 4xx or 5xx. */
const failed = (outcome: Outcome) => outcome.error !== undefined || (outcome.upstreamStatus ?? 0) >= 400;

/**
 * One entry per call, on the hot path: its JSON written member by member (the recorder adds the
 * id), with no object built to be serialized again. The proxy's operation schema is what the
 * gateway checks it against when it reads a page; `proxy-request.test.ts` checks it there.
 */
export function proxyOperationFields(meta: ProxyRequestMeta, startedAt: number, endedAt: number, outcome: Outcome): string {
  let fields =
    `"type":"proxy","environment_id":${quoteEnvironment(meta.environment_id)},"status":"${failed(outcome) ? 'failure' : 'success'}",` +
    `"started_at":"${isoTime(startedAt)}","duration_ms":${Math.max(0, Math.round(endedAt - startedAt))},` +
    `"integration_id":${quoteIntegration(meta.provider_config_key)},"connection_id":${quoteConnection(meta.connection_id)},` +
    `"proxy":{"method":${quoteMethod(meta.method)},"path":${json(loggedPath(meta))}` +
    `${outcome.upstreamStatus === undefined ? '' : `,"upstream_status":${outcome.upstreamStatus}`}}`;
  if (meta.request_id !== undefined) fields += `,"request_id":${json(meta.request_id)}`;
  const traceId = traceIdOf(meta.traceparent ?? forwardedTraceparent(meta.headers));
  if (traceId !== undefined) fields += `,"trace_id":"${traceId}"`;
  // The coded message only: it never holds a credential (see libs/errors).
  if (outcome.error !== undefined) fields += `,"error":{"code":${json(outcome.error.code)},"message":${json(outcome.error.message.slice(0, 1000))}}`;
  return fields;
}

function recordCall(deps: ProxyDeps, meta: ProxyRequestMeta, startedAt: number, outcome: Outcome): void {
  if (!deps.logSuccesses && !failed(outcome)) return;
  deps.operations.recordFields(meta.environment_id, startedAt, proxyOperationFields(meta, startedAt, Date.now(), outcome));
}

/**
 * The caller's `traceparent`, forwarded with its other headers: the trace an operation belongs to
 * when tracing is off here (when on, the hop's own trace context says it).
 */
function forwardedTraceparent(headers: ProxyRequestMeta['headers']): string | undefined {
  for (const [name, value] of headers) if (name.length === 11 && name.toLowerCase() === 'traceparent') return value;
  return undefined;
}

/** Credentials from the vault (which refreshes them as needed), kept in memory for the next calls. */
async function fetchCredentials(deps: ProxyDeps, meta: ProxyRequestMeta, force: boolean, deadlineAt: number): Promise<ProxyCredentials> {
  const readAt = deps.cache.generation();
  const credentials = await deps.bus.request(
    proxyContracts.getCredentials,
    {
      environment_id: meta.environment_id,
      key_id: meta.key_id,
      provider_config_key: meta.provider_config_key,
      connection_id: meta.connection_id,
      force_refresh: force,
    },
    // A refresh waiting for the provider's token endpoint may outlast the bus's timeout: the
    // vault says it is at work meanwhile, and the call waits for it as any caller of the vault
    // does, never past its own deadline.
    { upToMs: Math.max(1, Math.floor(Math.min(deps.bus.keepaliveUpToMs, deadlineAt - performance.now()))) },
  );
  checkInjectedHeaders(credentials.headers);
  deps.cache.set(credentialKey(meta), credentials, readAt);
  return credentials;
}

/** A network failure that ends the call, as the caller is answered. */
const finalNetworkError = (error: UpstreamNetworkError) =>
  error.code === 'ETIMEDOUT'
    ? new AppError('upstream_timeout', 'The provider did not answer in time')
    : new AppError('upstream_unreachable', `The provider could not be reached (${error.code})`);

/**
 * The upstream options of an attempt with `leftMs` to the caller's deadline: the wait for the
 * answer's head ends with it. Past it, no attempt starts.
 */
function withinDeadline(upstream: UpstreamOptions, leftMs: number): UpstreamOptions {
  if (leftMs >= upstream.timeoutMs) return upstream;
  if (leftMs < 1) throw new AppError('upstream_timeout', "The provider did not answer before the caller's deadline");
  return { ...upstream, headersTimeoutMs: Math.floor(leftMs) };
}

/**
 * Sends with retries: network errors, 5xx, 429 and Retry-On codes, when the body can be
 * replayed. No attempt waits for its head past `deadlineAt` (`performance.now()` time), and no
 * retry is taken whose wait would end past it, nor once the replica begins to stop: the last
 * answer, or failure, is the call's.
 */
async function sendWithRetries(deps: ProxyDeps, meta: ProxyRequestMeta, call: UpstreamCall, provider: string, deadlineAt: number): Promise<UpstreamResponse> {
  const replayable = !(call.body !== null && !(call.body instanceof Uint8Array));
  const attempts = replayable ? meta.retries + 1 : 1;
  for (let attempt = 1; ; attempt++) {
    const last = attempt >= attempts;
    if (attempt > 1) countRetry(provider);
    const start = performance.now();
    const upstream = withinDeadline(deps.upstream, deadlineAt - start);
    let response: UpstreamResponse;
    try {
      response = await (tracingEnabled() ? tracedCall(call, upstream, attempt) : callUpstream(call, upstream));
    } catch (error) {
      observeUpstream(provider, call.method, 0, (performance.now() - start) / 1000);
      if (!(error instanceof UpstreamNetworkError)) throw error;
      if (last || !RETRYABLE_NETWORK_CODES.has(error.code)) throw finalNetworkError(error);
      const wait = retryDelayMs(attempt, undefined, deps.retryCapMs);
      if (performance.now() + wait >= deadlineAt || deps.stopping?.aborted) throw finalNetworkError(error);
      if (!(await waitForRetry(wait, deps.stopping))) throw finalNetworkError(error);
      continue;
    }
    observeUpstream(provider, call.method, response.status, (performance.now() - start) / 1000);
    if (last || !isRetryableStatus(response.status, meta.retry_on)) return response;
    const wait = retryDelayMs(attempt, response.header('retry-after'), deps.retryCapMs);
    if (performance.now() + wait >= deadlineAt || deps.stopping?.aborted) return response;
    response.discard();
    // The answer is let go for the wait: a stop during it leaves only its status to tell.
    if (!(await waitForRetry(wait, deps.stopping))) throw stoppedBeforeRetry(response.status);
  }
}

/**
 * Waits `ms` before a retry, or less when the replica begins to stop: true when the whole wait
 * passed and the retry may go.
 */
async function waitForRetry(ms: number, stopping: AbortSignal | undefined): Promise<boolean> {
  try {
    await delay(ms, undefined, stopping === undefined ? {} : { signal: stopping });
    return true;
  } catch {
    // Only an abort rejects.
    return false;
  }
}

/**
 * A call whose retry a stopping replica did not take. The provider refused it with a status the
 * caller asked to have retried (5xx, 429, `Retry-On`), and that answer was let go for the wait:
 * the caller is told so, to retry the call itself.
 */
const stoppedBeforeRetry = (status: number) =>
  new AppError('service_unavailable', `The provider answered ${status}, and the proxy replica handling the call began to stop before it could retry; retry the call`);

/**
 * One attempt as a client span: method, host, port and scheme of the provider, the attempt and
 * the status; never the path, the query or a header (they may carry the credential).
 */
function tracedCall(call: UpstreamCall, upstream: UpstreamOptions, attempt: number): Promise<UpstreamResponse> {
  const { url } = call;
  const attributes = {
    'http.request.method': call.method,
    'server.address': url.hostname,
    'server.port': Number(url.port) || (url.protocol === 'https:' ? 443 : 80),
    'url.scheme': url.protocol.slice(0, -1),
    'latchkey.attempt': attempt,
  };
  return inSpan(`upstream ${call.method}`, { kind: SpanKind.CLIENT, attributes }, async () => {
    const response = await callUpstream(call, upstream);
    setSpanAttributes({ 'http.response.status_code': response.status });
    return response;
  });
}

function decoderFor(encoding: string | undefined) {
  switch (encoding?.toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return createGunzip();
    case 'deflate':
      return createInflate();
    case 'br':
      return createBrotliDecompress();
    default:
      return undefined;
  }
}

/**
 * Answers one proxied call: credentials, the upstream call (retries, one forced refresh and
 * replay after a 401 on a connection whose token the vault can renew), then status, headers
 * and body back unchanged (less hop-by-hop headers; decoded when asked). Small bodies ride in
 * the answer; larger ones are served as a pull stream, so memory stays bounded whatever the size.
 */
export function proxyRequestHandler(deps: ProxyDeps) {
  /** Each connection's last forced refresh (`performance.now()`) and what it gives. */
  const forced = new Map<string, { at: number; credentials: Promise<ProxyCredentials> }>();
  /**
   * The credentials to replay a 401 with: a forced refresh's, or those of the one made moments
   * ago (calls that met the expired token together all replay with its result); undefined when
   * they are the ones the provider just refused.
   */
  const renewed = async (meta: ProxyRequestMeta, refused: ProxyCredentials): Promise<ProxyCredentials | undefined> => {
    const key = credentialKey(meta);
    const now = performance.now();
    const last = forced.get(key);
    if (last !== undefined && now - last.at < FORCED_REFRESH_EVERY_MS) {
      const fresh = await last.credentials.catch(() => undefined);
      return fresh !== undefined && fresh !== refused ? fresh : undefined;
    }
    if (forced.size >= FORCED_REFRESH_KEPT) forced.clear();
    // Shared by every call that meets the 401 for a while: bound by none of their deadlines.
    const credentials = fetchCredentials(deps, meta, true, Infinity);
    forced.set(key, { at: now, credentials });
    return credentials;
  };
  return async (call: IncomingProxyCall): Promise<void> => {
    const { meta } = call;
    const startedAt = Date.now();
    // The caller's deadline, from when the call came (the caller counts from when it sent it).
    const deadlineAt = meta.deadline_ms === undefined ? Infinity : performance.now() + meta.deadline_ms;
    let upstreamStatus: number | undefined;
    const streamed = meta.body === 'inline' ? undefined : pullStream(deps.bus, meta.body.stream, deps.upstream.timeoutMs);
    const body: UpstreamCall['body'] = streamed ?? (call.body.length > 0 ? call.body : null);
    try {
      // From memory when cached, without a turn of the event loop.
      let credentials = deps.cache.get(credentialKey(meta)) ?? (await fetchCredentials(deps, meta, false, deadlineAt));
      let response = await sendWithRetries(deps, meta, buildCall(meta, credentials, body), credentials.provider, deadlineAt);
      // The replay, only while the caller still waits and the replica is not stopping: else the 401 is the answer.
      if (response.status === 401 && RENEWABLE_MODES.has(credentials.auth_mode) && (body === null || body instanceof Uint8Array) && performance.now() < deadlineAt && !deps.stopping?.aborted) {
        // Shared with other calls and bound by none of their deadlines: waited for until this
        // call's own, after which the 401 is its answer.
        const renewing = renewed(meta, credentials);
        const fresh = !Number.isFinite(deadlineAt) || (await settledWithin(renewing, deadlineAt - performance.now())) ? await renewing : undefined;
        if (fresh !== undefined) {
          response.discard();
          credentials = fresh;
          response = await sendWithRetries(deps, meta, buildCall(meta, credentials, body), credentials.provider, deadlineAt);
        }
      }
      upstreamStatus = response.status;
      const replying = reply(deps, call, credentials, response);
      if (replying !== undefined) await replying;
      recordCall(deps, meta, startedAt, { upstreamStatus });
    } catch (error) {
      // A streamed body not read to its end (the call failed before, or while, sending it): the caller's side lets it go.
      if (streamed !== undefined) void streamed.return(undefined).catch(() => undefined);
      const appError = toAppError(error);
      if (appError.code === 'internal_error') deps.logger.error('proxy request failed', { error: appError.cause ?? appError });
      call.respond({ ok: false, error: appError.toBody() }, new Uint8Array(0));
      recordCall(deps, meta, startedAt, { ...(upstreamStatus === undefined ? {} : { upstreamStatus }), error: appError });
    }
  };
}

/**
 * A provider's answer headers that never reach the caller: hop-by-hop ones, and the gateway's
 * error marker (a provider sending it would pass its answer off as the gateway's own error).
 */
const ANSWER_DROPPED: ReadonlySet<string> = new Set([...HOP_BY_HOP_HEADERS, OWN_ERROR_HEADER.toLowerCase()]);

/**
 * Sends the answer. A body that had ended within the inline limit by the time the headers were
 * read (most do) goes at once, and nothing is returned: no promise made or awaited for it.
 * Otherwise the promise of the rest, read ahead, inline or streamed.
 */
function reply(deps: ProxyDeps, call: IncomingProxyCall, credentials: ProxyCredentials, response: UpstreamResponse): Promise<void> | undefined {
  const { meta } = call;
  const decompress = meta.decompress ?? credentials.decompress;
  const decoder = decompress ? decoderFor(response.header('content-encoding')) : undefined;
  const listed = connectionListed(response.headers);
  const headers = response.headers.filter(([name]) => {
    const lower = name.toLowerCase();
    return !ANSWER_DROPPED.has(lower) && !listed.has(lower) && !(decoder && (lower === 'content-encoding' || lower === 'content-length'));
  });
  if (meta.method === 'HEAD') {
    call.respond({ ok: true, status: response.status, headers, body: 'inline' }, new Uint8Array(0));
    return undefined;
  }
  const whole = decoder ? undefined : response.takeComplete(deps.bus.inlineLimit);
  if (whole !== undefined) {
    call.respond({ ok: true, status: response.status, headers, body: 'inline' }, inlineBody(whole));
    return undefined;
  }
  return replyRead(deps, call, response, headers, decoder);
}

/**
 * How long an answer is read ahead to ride whole in the reply: most have ended long before; a
 * slow stream (server-sent events, a model's tokens) then goes to the caller as it comes rather
 * than when it ends, or when the caller's deadline ends first.
 */
const READ_AHEAD_WAIT_MS = 1_000;

const inlineBody = (chunks: Uint8Array[]) => (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));

async function replyRead(deps: ProxyDeps, call: IncomingProxyCall, response: UpstreamResponse, headers: Array<[string, string]>, decoder: NodeJS.ReadWriteStream | undefined): Promise<void> {
  const read = decoder ? decodedReader(response, decoder) : () => response.read();

  // Read ahead up to the inline limit: most answers end there and ride in the reply.
  const inlineLimit = deps.bus.inlineLimit;
  let head: ReadAhead;
  try {
    head = decoder ? await readAhead(read, inlineLimit, READ_AHEAD_WAIT_MS) : await response.readAhead(inlineLimit, READ_AHEAD_WAIT_MS);
  } catch (error) {
    throw bodyFailure(error);
  }
  if (head.complete) {
    call.respond({ ok: true, status: response.status, headers, body: 'inline' }, inlineBody(head.chunks));
    return;
  }
  const { pending } = head;
  const rest = (async function* () {
    yield* head.chunks;
    if (pending !== undefined) {
      const next = await nextChunk(() => pending);
      if (next === null) return;
      yield next;
    }
    for (;;) {
      const next = await nextChunk(read);
      if (next === null) return;
      yield next;
    }
  })();
  const stream = servePullStream(deps.bus, rest, { idleTimeoutMs: deps.upstream.timeoutMs, onAbandon: () => response.abort() });
  call.respond({ ok: true, status: response.status, headers, body: { stream: stream.inbox } }, new Uint8Array(0));
  await stream.done;
}

/** What was read ahead; `pending`, a read still out when the wait ended (the rest starts with it). */
interface ReadAhead {
  chunks: Uint8Array[];
  complete: boolean;
  pending?: Promise<Uint8Array | null>;
}

/**
 * Chunks until the body ends, passes `limit`, or `waitMs` has gone by, as
 * `UpstreamResponse.readAhead` gives an undecoded body's: a slow decoded stream goes on as a
 * stream too, rather than when it ends.
 */
async function readAhead(read: () => Promise<Uint8Array | null>, limit: number, waitMs: number): Promise<ReadAhead> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<'waited'>((resolve) => {
    timer = setTimeout(() => resolve('waited'), waitMs);
  });
  try {
    for (;;) {
      const reading = read();
      const next = await Promise.race([reading, waited]);
      if (next === 'waited') {
        // Its failure is the rest's to report; until then, no rejection goes unheard.
        reading.catch(() => undefined);
        return { chunks, complete: false, pending: reading };
      }
      if (next === null) return { chunks, complete: true };
      chunks.push(next);
      size += next.length;
      if (size > limit) return { chunks, complete: false };
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The body through a decoder (gzip, deflate, brotli), chunk by chunk. A body with no byte (a 304
 * or a 204 naming its encoding, an empty 200) has nothing to decode, and is not a valid
 * compressed stream either: it is read as empty, without the decoder.
 */
function decodedReader(response: UpstreamResponse, decoder: NodeJS.ReadWriteStream): () => Promise<Uint8Array | null> {
  let iterator: AsyncIterator<Uint8Array> | undefined;
  let empty = false;
  return async () => {
    if (empty) return null;
    if (iterator === undefined) {
      const first = await response.read();
      if (first === null) {
        empty = true;
        return null;
      }
      const source = Readable.from(
        (async function* () {
          yield first;
          for (let chunk = await response.read(); chunk !== null; chunk = await response.read()) yield chunk;
        })(),
      );
      iterator = (source.pipe(decoder) as unknown as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      source.once('error', (error) => (decoder as unknown as { destroy(error: Error): void }).destroy(error));
    }
    const { value, done } = await iterator.next();
    return done ? null : value;
  };
}

/** A body that stalled past the timeout is the provider's slowness (504); any other failure, a break (502). */
const bodyFailure = (error: unknown) =>
  error instanceof UpstreamNetworkError && error.code === 'ETIMEDOUT'
    ? new AppError('upstream_timeout', 'The provider stopped sending the response body')
    : new AppError('upstream_unreachable', 'The provider broke off the response');

async function nextChunk(read: () => Promise<Uint8Array | null>): Promise<Uint8Array | null> {
  try {
    return await read();
  } catch (error) {
    throw bodyFailure(error);
  }
}
