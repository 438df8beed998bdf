import { randomUUID } from 'node:crypto';
import { createKvLocks, type HeldLock, type JsonKv, type OperationLog } from '@latchkey/bus';
import { createCache } from '@latchkey/cache';
import type { HttpClient } from '@latchkey/net';
import { vaultContracts } from '@latchkey/contracts';
import { AppError, toAppError, withRetries } from '@latchkey/errors';
import { currentRequestId } from '@latchkey/logger';
import { environmentId } from '@latchkey/mongo';
import { settledWithin } from '@latchkey/runtime';
import { inSpan, SpanKind } from '@latchkey/tracing';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { RefreshAnswerRepo } from '../db/refresh-answer-model.js';
import type { RefreshLogDoc } from '../db/refresh-log-model.js';
import { credentialsVersionOf } from '../db/connection-repo.js';
import type { ConnectionCredentials, StoredCredentials } from '../domain/connection-credentials.js';
import type { IntegrationService } from '../domain/integrations.js';
import type { Refresher, VaultDeps } from '../domain/vault-deps.js';
import { connectionEvent, expiryOf } from '../domain/views.js';
import { countRefresh, observeLockWait } from '../vault-metrics.js';
import { inBackoff, isExhausted, needsRefresh, recordFailure, shouldForce, stillValid } from './refresh-policy.js';
import { requestFreshCredentials } from './fresh-credentials.js';
import { failedForNow } from './token-endpoint.js';

export interface RefresherDeps extends Pick<VaultDeps, 'bus' | 'logger' | 'connections' | 'integrations' | 'providers'> {
  /** Opens and seals the connection's credentials. */
  credentials: ConnectionCredentials;
  /** Reads the integration's client credentials. */
  integrationService: Pick<IntegrationService, 'clientCredentials'>;
  /** NATS KV bucket whose entries expire on their own: a crashed holder frees its lock. */
  locks: JsonKv<{ owner: string }>;
  logs: { insert(doc: RefreshLogDoc): Promise<unknown> };
  /** Where a provider's answer waits until the connection has stored it (a replica may die in between). */
  answers: Pick<RefreshAnswerRepo, 'keep' | 'find' | 'forget'>;
  timeoutMs: number;
  /** The outbound client with the address policy (libs/net). */
  http: HttpClient;
  /** Longer than `timeoutMs` (start-vault sees to it): a renewed lock outlives the provider call. */
  lockTtlMs: number;
  /** The operations log: one `refresh` per call to the provider, with its outcome. */
  operations: Pick<OperationLog, 'record'>;
}

const POLL_MS = 25;
/** How long refreshed credentials are tried to be stored through an outage, and the longest pause between tries. */
const STORE_RETRY_MS = 30_000;
const STORE_BACKOFF_CAP_MS = 2_000;
/**
 * How long the store waits for the answer to be kept: a database away would hold the write (up
 * to the driver's 10 s), and the store's own retries must start while the lock is still held.
 */
const KEEP_WAIT_MS = 2_000;
/**
 * How long a fetch whose token still outlives the call waits for the refresh before it hands that
 * token out: well inside one of the gateway's deadlines for the fetch (`REQUEST_TIMEOUT_MS`, 5 s),
 * where the refresh's own waits (a lock bucket or database that does not answer, a slow provider,
 * the store's retries) take 10 s and more, and the caller could use the token it has at once.
 */
const FALLBACK_WAIT_MS = 2_000;
/** The fallbacks below are logged once per connection in this long, not on every fetch they serve. */
const FALLBACK_WARN_EVERY_MS = 60_000;
/**
 * After a refresh ahead of expiry failed only for now (the token endpoint down, overloaded,
 * rate-limiting), how long this replica hands out the token in hand before it asks again: a
 * provider's outage must not send every fetch of its connections to its token endpoint.
 */
const RETRY_AFTER_FAILED_FOR_NOW_MS = 30_000;
/** How long a failed refresh's announcement waits for JetStream (a leader election, a restart). */
const REFRESH_FAILED_PUBLISH_RETRY_MS = 60_000;

/**
 * Refresh on fetch. One refresh per connection at a time across every vault replica: the
 * replica that creates the connection's lock key re-reads the connection (another may just
 * have refreshed it), calls the provider once and stores the result; the others hand out the
 * token they have while it outlives the call by a minute, and otherwise wait for the key to go
 * and read what was stored. Within a replica, concurrent fetches share one attempt.
 */
export function createRefresher(deps: RefresherDeps): Refresher {
  const locks = createKvLocks(deps.locks);
  const inFlight = new Map<string, Promise<{ doc: ConnectionDoc; credentials: StoredCredentials }>>();
  const fallbackWarned = createCache<true>({ maxEntries: 10_000, ttlMs: FALLBACK_WARN_EVERY_MS });
  // Connections whose refresh failed for now on this replica; bounded like the other caches (a
  // connection evicted early only asks its provider again sooner).
  const retryLater = createCache<true>({ maxEntries: 10_000, ttlMs: RETRY_AFTER_FAILED_FOR_NOW_MS });

  /** Says once per connection and fallback in FALLBACK_WARN_EVERY_MS that a fetch got the token in hand. */
  function warnFallback(doc: ConnectionDoc, fallback: string, message: string, fields: Record<string, unknown>) {
    const key = `${doc._id}\u0000${fallback}`;
    if (fallbackWarned.get(key)) return;
    fallbackWarned.set(key, true);
    deps.logger.warn(message, { connection: doc._id, ...fields });
  }

  async function reread(doc: ConnectionDoc) {
    const fresh = await deps.connections.findById(environmentId(doc.environment_id), doc._id);
    if (!fresh) throw new AppError('unknown_connection', `Connection "${doc.connection_id}" was deleted`);
    return { doc: fresh, credentials: await deps.credentials.open(fresh) };
  }

  function refusal(doc: ConnectionDoc): AppError | undefined {
    const failure = doc.refresh_failure;
    if (isExhausted(failure)) {
      return new AppError('connection_refresh_exhausted', 'Refreshing this connection failed on several days; reconnect it', {
        payload: failure?.last_error ?? {},
      });
    }
    if (inBackoff(failure, Date.now())) {
      return new AppError('connection_refresh_backoff', 'The last refresh failed moments ago; retry after the back-off', {
        payload: { ...(failure?.last_error ?? {}), retry_after: failure?.backoff_until },
      });
    }
    return undefined;
  }

  /**
   * Calls the provider and stores its answer, fenced twice. Before the call the lock is renewed
   * by compare-and-set: a holder paused past the TTL learns it lost the lock before it presents
   * a refresh token another holder may already have used (`null`: the caller waits and reads).
   * The write is a compare-and-set on the credentials version read under the lock: whatever
   * happened meanwhile, an older result never replaces newer credentials, and a failure is not
   * recorded against credentials that have changed since; both then answer what is stored.
   */
  async function refreshNow(lock: HeldLock, doc: ConnectionDoc, credentials: StoredCredentials, force: boolean, vendorJwt: boolean) {
    const environment = environmentId(doc.environment_id);
    const version = credentialsVersionOf(doc);
    const integration = await deps.integrations.findByKey(environment, doc.provider_config_key);
    const provider = deps.providers.get(doc.provider);
    if (!integration || !provider) throw new AppError('unknown_provider_config', `Integration "${doc.provider_config_key}" is gone`);
    const client = await deps.integrationService.clientCredentials(integration);
    if (!(await locks.renew(lock))) return null;
    const now = new Date();
    const logRefresh = (error?: AppError) => {
      const requestId = currentRequestId();
      deps.operations.record({
        type: 'refresh',
        environment_id: doc.environment_id,
        status: error ? 'failure' : 'success',
        started_at: now.toISOString(),
        duration_ms: Math.max(0, Date.now() - now.getTime()),
        integration_id: doc.provider_config_key,
        connection_id: doc.connection_id,
        ...(requestId === undefined ? {} : { request_id: requestId }),
        ...(error ? { error: { code: error.code, message: error.message.slice(0, 1000) } } : {}),
      });
    };
    let fresh: StoredCredentials;
    try {
      // The token request as a span: which provider and connection, never the request or answer.
      fresh = await inSpan('vault token refresh', { kind: SpanKind.CLIENT, attributes: { 'latchkey.provider': doc.provider, 'latchkey.connection_id': doc.connection_id } }, () =>
        requestFreshCredentials(doc.credentials_type, {
          provider,
          client,
          connectionConfig: { ...doc.connection_config, ...(vendorJwt ? { refresh_vendor_app_jwt_token: true } : {}) },
          credentials,
          now,
          timeoutMs: deps.timeoutMs,
          http: deps.http,
        }),
      );
    } catch (error) {
      const appError = toAppError(error);
      logRefresh(appError);
      // A token endpoint that failed only for now (unreachable, 5xx, 429, 408) refused nothing: while
      // the token in hand outlives the call it is handed out, and nothing is charged to the
      // connection (no auth error, back-off or day towards exhaustion, no refresh-failed event
      // whose auth webhook would have the end user reconnect); this replica asks again after
      // RETRY_AFTER_FAILED_FOR_NOW_MS. A forced refresh comes because the provider refused that
      // token, and one about to expire has nothing to fall back on: both fail as a refusal does.
      if (!force && failedForNow(appError) && stillValid(doc.expires_at, Date.now())) {
        countRefresh('deferred');
        retryLater.set(doc._id, true);
        const { status, reason } = appError.payload ?? {};
        warnFallback(doc, 'failed_for_now', "the provider's token endpoint failed for now; handing out the current token", { provider: doc.provider, status, reason });
        return { doc, credentials };
      }
      countRefresh('failed');
      const logId = randomUUID();
      const lastError = { code: appError.code, message: appError.message, ...(appError.payload ? { payload: appError.payload } : {}) };
      await deps.logs.insert({ _id: logId, environment_id: doc.environment_id, connection: doc._id, at: now, code: appError.code, message: appError.message, payload: appError.payload ?? null });
      const recorded = await deps.connections.updateAtVersion(environment, doc._id, version, {
        errors: [...doc.errors.filter((item) => item.type !== 'auth'), { type: 'auth', log_id: logId }],
        refresh_failure: recordFailure(doc.refresh_failure, now, lastError),
      });
      if (!recorded) return reread(doc);
      // The customer's only word that the end user must reconnect (the connection backs off, so
      // nothing announces it again): tried for a minute while JetStream is away, once (its log
      // id), and not waited for, so the caller hears of the failure at once.
      void deps.bus
        .publish(
          vaultContracts.connectionRefreshFailed,
          { ...connectionEvent(doc), tags: doc.tags, log_id: logId, error: { code: appError.code, message: appError.message } },
          { msgId: `refresh-failed-${logId}`, retryForMs: REFRESH_FAILED_PUBLISH_RETRY_MS },
        )
        .catch((error: unknown) => deps.logger.error('a failed refresh was not announced: its auth webhook is lost', { connection: doc._id, error }));
      deps.logger.warn('token refresh failed', { connection: doc._id, provider: doc.provider, code: appError.code });
      throw appError;
    }
    logRefresh();
    // Sealing reads the environment's active data key (cached a minute): a database away just
    // now is waited out like the store's, or the only copy of a rotated token would go here.
    const sealed = await untilStored(lock, doc, () => deps.credentials.seal(doc, fresh));
    const fields = answerFields(doc, sealed, expiryOf(fresh), now, now);
    // First of all, the answer is kept: one write by `_id`, where the store below waits for the
    // connection's write key. Should this replica die before that store, the next holder of the
    // lock stores what was kept (`storeKept`). Best effort, and waited for KEEP_WAIT_MS at most:
    // through an outage the store's own retries hold the answer in memory. (A keep that lands
    // after the store is older than the connection's credentials: the next holder drops it.)
    const kept = deps.answers
      .keep({ _id: doc._id, environment_id: doc.environment_id, read_version: version, credentials: fields.credentials, expires_at: fields.expires_at, at: now })
      .catch((error: unknown) => deps.logger.warn('could not keep the refresh answer before storing it', { connection: doc._id, code: deps.bus.toAppError(error).code }));
    await settledWithin(kept, KEEP_WAIT_MS);
    const stored = await storeAnswer(lock, doc, version, fields, fresh);
    if (stored) {
      countRefresh('success');
      retryLater.delete(doc._id);
      return stored;
    }
    deps.logger.warn('a newer refresh stored credentials first; keeping them', { connection: doc._id });
    countRefresh('superseded');
    return reread(doc);
  }

  /**
   * What storing a provider's answer writes: the sealed credentials, their expiry and when they
   * were asked for (`obtainedAt`), with the connection's auth error and refresh failure cleared.
   */
  function answerFields(doc: ConnectionDoc, sealed: string, expiresAt: Date | null, at: Date, obtainedAt: Date) {
    return {
      credentials: sealed,
      expires_at: expiresAt,
      token_obtained_at: obtainedAt,
      errors: doc.errors.filter((error) => error.type !== 'auth'),
      refresh_failure: null,
      updated_at: at,
    };
  }

  /**
   * Writes an answer over the credentials version it replaces, then drops its kept copy and
   * announces the change; null when newer credentials were stored first (they stay).
   */
  async function storeAnswer(lock: HeldLock, doc: ConnectionDoc, version: number, fields: ReturnType<typeof answerFields>, credentials: StoredCredentials) {
    const environment = environmentId(doc.environment_id);
    const stored =
      (await untilStored(lock, doc, () => deps.connections.replaceCredentials(environment, doc._id, version, fields))) ||
      // A try that landed may have been answered 503 (its write key lost as it ended), and the
      // retry then found the version it wrote itself: the sealed credentials, unique to this
      // answer, tell our own store from a newer refresh's.
      (await deps.connections.findById(environment, doc._id))?.credentials === fields.credentials;
    await deps.answers.forget(doc._id, version).catch(() => undefined);
    if (!stored) return null;
    await deps.bus.publish(vaultContracts.connectionUpdated, connectionEvent(doc)).catch(() => undefined);
    return { doc: { ...doc, ...fields, credentials_version: version + 1 }, credentials };
  }

  /**
   * Stores the answer a holder of the lock kept and did not store (it died, or stopped, between
   * the provider's answer and its write): its refresh token is the live one, the connection's
   * is spent. Under the lock, at the version the answer replaces; an answer older than the
   * connection's credentials, or one that no longer opens, is forgotten. Undefined when there
   * is none to store.
   */
  async function storeKept(lock: HeldLock, doc: ConnectionDoc) {
    const kept = await deps.answers.find(doc._id);
    if (!kept) return undefined;
    const version = credentialsVersionOf(doc);
    const credentials = kept.read_version === version ? await deps.credentials.open({ ...doc, credentials: kept.credentials }).catch(() => undefined) : undefined;
    if (!credentials) {
      await deps.answers.forget(doc._id, kept.read_version).catch(() => undefined);
      return undefined;
    }
    const stored = await storeAnswer(lock, doc, version, answerFields(doc, kept.credentials, kept.expires_at, new Date(), kept.at), credentials);
    if (!stored) return reread(doc);
    deps.logger.warn('stored the refresh answer a replica got and did not store', { connection: doc._id, answered_at: kept.at });
    countRefresh('recovered');
    return stored;
  }

  /**
   * Seals, or stores, what the provider just answered. It may have rotated the refresh token, and
   * then the answer in hand is the only copy of the new one: a step that meets an outage (the write keys'
   * bucket electing a leader after a NATS node loss, the database restarting) is tried again with
   * back-off for up to STORE_RETRY_MS, the refresh lock renewed meanwhile so no other replica
   * presents the used token, rather than lose it and leave the connection to fail for good. The
   * write's compare-and-set on the credentials version still decides between two results.
   */
  async function untilStored<T>(lock: HeldLock, doc: ConnectionDoc, store: () => Promise<T>): Promise<T> {
    return withRetries(store, {
      forMs: STORE_RETRY_MS,
      firstDelayMs: 200,
      maxDelayMs: STORE_BACKOFF_CAP_MS,
      retryIf: (error) => deps.bus.toAppError(error).retryable,
      onRetry: async (error, tries) => {
        if (tries === 1) deps.logger.warn('could not store refreshed credentials; trying again', { connection: doc._id, code: deps.bus.toAppError(error).code });
        await locks.renew(lock).catch(() => false);
      },
    }).catch((error: unknown) => {
      throw deps.bus.toAppError(error);
    });
  }

  async function underLock(held: { doc: ConnectionDoc; credentials: StoredCredentials }, force: boolean, vendorJwt: boolean, startedAt: number) {
    const { doc } = held;
    const key = `conn_${doc._id.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    // New credentials since this fetch began, which a forced one takes as its refresh: a write of
    // the credentials (each one moves their version), not any write of the connection (metadata).
    const renewed = (current: ConnectionDoc) => credentialsVersionOf(current) > credentialsVersionOf(doc);
    for (;;) {
      const lock = await locks.acquire(key);
      if (lock !== null) {
        try {
          const read = await reread(doc);
          const current = (await storeKept(lock, read.doc)) ?? read;
          if (!force && !needsRefresh(current.doc.credentials_type, current.doc.expires_at, Date.now(), false, current.credentials, current.doc.token_obtained_at ?? null)) return current;
          if (force && renewed(current.doc) && !current.doc.refresh_failure) return current;
          const refused = force ? undefined : refusal(current.doc);
          if (refused) throw refused;
          const done = await refreshNow(lock, current.doc, current.credentials, force, vendorJwt);
          if (done !== null) return done;
          deps.logger.warn('the refresh lock expired before the provider was called; reading what its new holder stores', { connection: doc._id });
        } finally {
          await locks.release(lock).catch(() => undefined);
        }
      }
      // Another replica is refreshing. A token that outlives the call by a minute is handed out as
      // it is: that replica may have died holding the lock, which then lasts its TTL. One about to
      // expire (or a forced refresh) waits for the lock to go, then reads what was stored.
      if (!force && stillValid(doc.expires_at, Date.now())) return held;
      const deadline = Date.now() + deps.lockTtlMs;
      const waitStart = performance.now();
      while ((await locks.isHeld(key)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      observeLockWait((performance.now() - waitStart) / 1000);
      const current = await reread(doc);
      if (current.doc.updated_at.getTime() >= startedAt) {
        const refused = refusal(current.doc);
        if (refused && current.doc.refresh_failure && new Date(current.doc.refresh_failure.last_at).getTime() >= startedAt) throw refused;
        if (force ? renewed(current.doc) : !needsRefresh(current.doc.credentials_type, current.doc.expires_at, Date.now(), false, current.credentials, current.doc.token_obtained_at ?? null)) return current;
      }
    }
  }

  return {
    async ensureFresh(doc, credentials, flags) {
      const { vendorJwt } = flags;
      const force = shouldForce(doc.credentials_type, flags);
      if (!needsRefresh(doc.credentials_type, doc.expires_at, Date.now(), force, credentials, doc.token_obtained_at ?? null)) return { doc, credentials };
      // An OAuth 2 token with no refresh token cannot be renewed: it is handed out while it
      // works, and refused (424 no_refresh_token) once it does not, rather than for its last
      // quarter of an hour, with a refresh failure charged to the connection.
      if (!force && doc.credentials_type === 'OAUTH2' && typeof credentials['refresh_token'] !== 'string' && stillValid(doc.expires_at, Date.now())) {
        return { doc, credentials };
      }
      if (!force) {
        const refused = refusal(doc);
        if (refused) throw refused;
        // Its last refresh here failed for now moments ago: the token in hand, until it is time to ask again.
        if (retryLater.has(doc._id) && stillValid(doc.expires_at, Date.now())) return { doc, credentials };
      }
      // Fetches of one connection share one attempt, but a forced one (the provider refused the
      // token) or one for the vendor's JWT never takes a plain attempt's answer: that may be the
      // token in hand, handed out while another replica refreshes.
      const flight = force || vendorJwt ? `${doc._id}\u0000${force ? 'force' : ''}\u0000${vendorJwt ? 'jwt' : ''}` : doc._id;
      let attempt = inFlight.get(flight);
      if (!attempt) {
        attempt = underLock({ doc, credentials }, force, vendorJwt, Date.now()).finally(() => inFlight.delete(flight));
        inFlight.set(flight, attempt);
      }
      try {
        // A token that still outlives the call is handed out if the attempt is slow; the attempt
        // goes on, and fetches meanwhile join it.
        if (!force && stillValid(doc.expires_at, Date.now()) && !(await settledWithin(attempt, FALLBACK_WAIT_MS))) {
          warnFallback(doc, 'slow', 'refreshing ahead of expiry is slow; handing out the current token', {});
          return { doc, credentials };
        }
        return await attempt;
      } catch (error) {
        // A token refreshed ahead of its expiry still works: while the lock bucket or the
        // database is away (a NATS node lost, its bucket electing a leader, the driver's own
        // errors), it is handed out as it is, and the next fetch tries again. A forced refresh
        // has nothing to fall back on.
        const unavailable = deps.bus.toAppError(error);
        if (force || unavailable.code !== 'service_unavailable' || !stillValid(doc.expires_at, Date.now())) throw error;
        warnFallback(doc, 'unavailable', 'could not refresh ahead of expiry; handing out the current token', { error: unavailable.message });
        return { doc, credentials };
      }
    },
    forget: (doc) => deps.answers.forget(doc._id),
  };
}
