import { createHash, randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { TAGS_MAX, vaultContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { environmentId } from '@latchkey/mongo';
import { checkHostValues, freeHostKeys } from '../catalog/provider-url.js';
import type { ConnectSessionDoc } from '../db/connect-session-model.js';
import type { ConnectSessionRepo } from '../db/connect-session-repo.js';
import { credentialsVersionOf } from '../db/connection-repo.js';
import type { ConnectionRepo } from '../db/connection-repo.js';
import type { ConnectionDoc } from '../db/connection-model.js';
import type { IntegrationDoc } from '../db/integration-model.js';
import type { ConnectionCredentials, StoredCredentials } from './connection-credentials.js';
import { creationEvents, insertConnection } from './connections.js';
import type { IntegrationService } from './integrations.js';
import type { ProviderEntry, VaultDeps } from './vault-deps.js';
import type { LifecycleEvents } from './lifecycle-events.js';
import { connectionEvent, expiryOf } from './views.js';

/** Session tokens start with this, and live 30 minutes. */
export const SESSION_TOKEN_PREFIX = 'lk_cs_';
export const SESSION_LIFETIME_MS = 30 * 60 * 1000;
/** The most connections one session creates (a reconnect replaces, and is not counted). */
export const SESSION_CONNECTIONS_MAX = 20;

export const digestOf = (token: string) => createHash('sha256').update(token).digest('base64url');

/** A reconnect that loses the credentials compare-and-set this often in a row gives up. */
const RECONNECT_ATTEMPTS = 5;

/** Where a customer's OAuth client secret for a session's flow is sealed (the AAD's field). */
export const SESSION_CLIENT_SECRET_PLACE = { field: 'connect_session.oauth_client_secret_override' };

/** Markers in the session's defaults that offer the end user their own OAuth client; not config. */
const CLIENT_OVERRIDE_MARKERS = new Set(['oauth_client_id_override', 'oauth_client_secret_override']);

type ConfigRules = Pick<ProviderEntry, 'connection_configuration' | 'connection_config' | 'authorization_url' | 'token_url' | 'request_url'>;

function notAllowed(key: string, code: string, why: string, under = ''): AppError {
  const path = `${under}connection_config.${key}`;
  return new AppError('invalid_body', `${path} ${why}`, { errors: [{ code, message: why, path }] });
}

/** The connection config fields that make up the whole host of a provider's token or request URL: its client secret goes there. */
function secretHostKeys(provider: Pick<ConfigRules, 'token_url' | 'request_url'> | undefined): string[] {
  return [provider?.token_url, provider?.request_url].flatMap((template) => (template === undefined ? [] : freeHostKeys(template)));
}

/**
 * Refuses `config` naming the host a self-hosted provider's token or request URL is built on,
 * for a caller whose key may not read the integration's client secret (an import, or a
 * session's defaults, without `integrations:read_credentials`): the secret goes to that host at
 * the next refresh or code exchange. `under` prefixes the path the error names.
 */
export function checkSecretHostsNamed(provider: Pick<ConfigRules, 'token_url' | 'request_url'> | undefined, config: Record<string, unknown>, under = ''): void {
  for (const key of secretHostKeys(provider)) {
    const value = config[key];
    if (value !== undefined && value !== null && value !== '') {
      throw notAllowed(key, 'not_allowed', "names the host the integration's client secret is sent to: that takes a key with integrations:read_credentials, or the connection's own OAuth client", under);
    }
  }
}

/**
 * The connection config of a connect flow: the customer's values from the session's
 * `integrations_config_defaults` (minus the client-override markers), then what the end user
 * filled in. This is the one gate for end-user config, and it is strict, because these values
 * build the URLs the vault sends client secrets, codes and PKCE verifiers to:
 * - the end user may fill only fields the provider's catalog entry declares;
 * - a field the customer set (to anything but an empty string) is theirs: a different value
 *   from the end user is refused, never merged over it;
 * - a value must match the field's catalog pattern, and every value that lands in the host of
 *   the provider's authorization, token or request URL must pass the host rules
 *   (catalog/provider-url.ts), whoever set it;
 * - with a client of the customer's (`customerClient`: the integration's, or one the customer
 *   set in the session's defaults), a field that makes up the whole host of the token or
 *   request URL is the customer's alone: the client secret goes there, so an end user naming
 *   it would receive it. Only the end user's own client leaves it to them.
 */
export function sessionConnectionConfig(
  session: ConnectSessionDoc,
  integrationKey: string,
  provider: ConfigRules | undefined,
  given: Record<string, unknown> = {},
  options: { customerClient?: boolean } = {},
): Record<string, unknown> {
  const defaults = Object.fromEntries(
    Object.entries((session.integrations_config_defaults[integrationKey]?.connection_config ?? {}) as Record<string, unknown>).filter(([key]) => !CLIENT_OVERRIDE_MARKERS.has(key)),
  );
  const declared = new Set([...(provider?.connection_configuration ?? []), ...Object.keys(provider?.connection_config ?? {})]);
  const secretHosts = new Set(options.customerClient ? secretHostKeys(provider) : []);
  for (const [key, value] of Object.entries(given)) {
    const preset = defaults[key];
    const customerSet = preset !== undefined && preset !== null && preset !== '';
    // The customer's own value coming back (a flow's saved config, a page echoing it) is theirs.
    if (customerSet && value === preset) continue;
    if (customerSet) throw notAllowed(key, 'not_allowed', 'was set by the customer for this connect session and cannot be changed');
    // An end user's value is text, whoever forwarded it: an array or object passes a pattern as
    // its String() and breaks the proxy's templates later. (The customer's null placeholder comes
    // back as it was, in a flow's saved config.)
    if (typeof value !== 'string' && value !== preset) throw notAllowed(key, 'invalid_type', 'must be a string');
    if (secretHosts.has(key)) {
      throw notAllowed(key, 'not_allowed', "names the host the integration's client secret is sent to: the customer sets it in the session, or the end user brings their own OAuth client");
    }
    if (!declared.has(key)) throw notAllowed(key, 'not_allowed', 'is not a connection config field of this provider');
    const pattern = provider?.connection_config?.[key]?.pattern;
    if (pattern !== undefined && value !== '' && !new RegExp(`^(?:${pattern})$`).test(String(value))) {
      throw notAllowed(key, 'invalid_value', "does not match the provider's pattern");
    }
  }
  const config = { ...defaults, ...given };
  if (provider) checkHostValues(provider, config);
  return config;
}

/**
 * Refuses config given for a reconnect that is not the connection's own: a different value, or
 * a field the connection was made without. A reconnect replaces credentials only, and they must
 * come from where the connection says it lives: an end user typing Zendesk's `evilcorp` for a
 * connection saying `acme` would authorize there with the customer's client and bind those
 * tokens to it. Adding a field is refused too, rather than stored: the connection's config is
 * fixed once it is made (its search lists are built from it).
 */
export function checkKeptConfig(kept: Record<string, unknown>, given: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(given)) {
    if (!isDeepStrictEqual(kept[key], value)) {
      throw notAllowed(key, 'not_allowed', "is the connection's own: a reconnect keeps the connection's config and replaces its credentials only");
    }
  }
}

/**
 * The connection config of a reconnect's flow: the connection's own, as stored; the end user may
 * repeat its values (`checkKeptConfig`), and the session's defaults do not apply. With a client
 * of the customer's, a field that makes up the whole host of the token or request URL must be
 * the customer's value in the session, as in `sessionConnectionConfig`: the connection may have
 * been made with the end user's own client, and that host is where the customer's client secret
 * would now go. Host-bearing values are checked again, under today's catalog.
 */
export function reconnectConnectionConfig(
  session: ConnectSessionDoc,
  integrationKey: string,
  provider: ConfigRules | undefined,
  kept: Record<string, unknown>,
  given: Record<string, unknown> = {},
  options: { customerClient?: boolean } = {},
): Record<string, unknown> {
  checkKeptConfig(kept, given);
  const defaults = (session.integrations_config_defaults[integrationKey]?.connection_config ?? {}) as Record<string, unknown>;
  for (const key of options.customerClient ? secretHostKeys(provider) : []) {
    const value = kept[key];
    if (value !== undefined && value !== null && value !== '' && defaults[key] !== value) {
      throw notAllowed(key, 'not_allowed', "names the host the integration's client secret is sent to: the customer sets it in the reconnect session, or the end user brings their own OAuth client");
    }
  }
  if (provider) checkHostValues(provider, kept);
  return { ...kept };
}

/**
 * The tags a reconnect leaves on its connection: the connection's, with the session's over them
 * (both lower-cased already). A connection holds at most `TAGS_MAX`, and no reconnect makes one
 * hold more: refused when the session is created (`'session'`), and again when its flow ends
 * (`'flow'`), since the connection's tags may have changed in between; nothing is stored then.
 */
export function reconnectedTags(existing: Record<string, string>, added: Record<string, string>, when: 'session' | 'flow'): Record<string, string> {
  const tags = { ...existing, ...added };
  const count = Object.keys(tags).length;
  if (count <= TAGS_MAX) return tags;
  const brings = `would bring the connection to ${count} tags, more than ${TAGS_MAX}`;
  throw new AppError(
    'invalid_body',
    when === 'session'
      ? `The connection has ${Object.keys(existing).length} tags, and this session's tags ${brings}: a connection holds at most ${TAGS_MAX}`
      : `The connection was not reconnected: its tags changed after this session was made, and the session's tags ${brings}. Ask for a new link.`,
    { errors: [{ code: 'too_many_tags', message: brings, path: 'tags' }] },
  );
}

export interface ConnectSessionServiceDeps extends Pick<VaultDeps, 'providers'> {
  sessions: Pick<ConnectSessionRepo, 'findByDigest' | 'removeByDigest' | 'countConnection'>;
  connections: Pick<ConnectionRepo, 'find' | 'replaceCredentials' | 'insert'>;
  integrationService: Pick<IntegrationService, 'find' | 'storing'>;
  credentials: Pick<ConnectionCredentials, 'seal'>;
  lifecycle: Pick<LifecycleEvents, 'announce'>;
}

/** The rules of an end user's connect flow: a live session, the integrations it allows, saving what it connects. */
export function createConnectSessionService(deps: ConnectSessionServiceDeps) {
  /** The integration, if the session allows it. */
  async function allowedIntegration(session: ConnectSessionDoc, integrationKey: string): Promise<IntegrationDoc> {
    if (session.allowed_integrations && !session.allowed_integrations.includes(integrationKey)) {
      throw new AppError('forbidden', `This connect session does not allow the integration "${integrationKey}"`);
    }
    return deps.integrationService.find(environmentId(session.environment_id), integrationKey);
  }

  /** The connection a reconnect session replaces the credentials of, as stored now. */
  async function reconnected(session: ConnectSessionDoc, reconnect: NonNullable<ConnectSessionDoc['reconnect']>, integrationKey: string): Promise<ConnectionDoc> {
    const existing = await deps.connections.find(environmentId(session.environment_id), reconnect.integration_id, reconnect.connection_id);
    if (!existing || existing.provider_config_key !== integrationKey) {
      throw new AppError('unknown_connection', 'The connection this session reconnects is gone');
    }
    return existing;
  }

  return {
    /** The live session behind a token or a digest, or `unknown_connect_session_token`. */
    async live(by: { token: string } | { digest: string }): Promise<ConnectSessionDoc> {
      const unknown = new AppError('unknown_connect_session_token', 'Unknown or expired connect session token');
      if ('token' in by && !by.token.startsWith(SESSION_TOKEN_PREFIX)) throw unknown;
      const digest = 'token' in by ? digestOf(by.token) : by.digest;
      const doc = await deps.sessions.findByDigest(digest);
      if (!doc) throw unknown;
      if (doc.expires_at.getTime() <= Date.now()) {
        await deps.sessions.removeByDigest(digest);
        throw unknown;
      }
      return doc;
    },

    allowedIntegration,

    /**
     * The connection config a connect flow runs with (its authorization and token URLs, the
     * verification of typed-in credentials): the session's and the end user's
     * (`sessionConnectionConfig`), or for a reconnect the connection's own
     * (`reconnectConnectionConfig`).
     */
    async flowConnectionConfig(
      session: ConnectSessionDoc,
      integration: Pick<IntegrationDoc, 'unique_key'>,
      provider: ConfigRules | undefined,
      given: Record<string, unknown> = {},
      options: { customerClient?: boolean } = {},
    ): Promise<Record<string, unknown>> {
      if (!session.reconnect) return sessionConnectionConfig(session, integration.unique_key, provider, given, options);
      const existing = await reconnected(session, session.reconnect, integration.unique_key);
      return reconnectConnectionConfig(session, integration.unique_key, provider, existing.connection_config ?? {}, given, options);
    },

    /**
     * Saves credentials an end user gave in a connect flow, for an integration the session allows.
     * New connections get a server-chosen id and the session's tags and end user; a reconnect
     * session replaces the credentials of its one connection and nothing else, and only when the
     * flow's config is the connection's own (`checkKeptConfig`), checked on the very document
     * whose credentials are replaced.
     */
    async saveConnection(
      session: ConnectSessionDoc,
      integrationKey: string,
      credentials: StoredCredentials,
      connectionConfig: Record<string, unknown> = {},
    ): Promise<{ connectionId: string; providerConfigKey: string; operation: 'creation' | 'override' }> {
      const environment = environmentId(session.environment_id);
      const integration = await allowedIntegration(session, integrationKey);
      const expected = deps.providers.get(integration.provider)?.auth_mode;
      if (expected && expected !== credentials.type) {
        throw new AppError('invalid_body', `Integration "${integration.unique_key}" takes ${expected} credentials`, {
          errors: [{ code: 'invalid_value', message: `expected ${expected}`, path: 'credentials.type' }],
        });
      }
      const now = new Date();
      if (session.reconnect) {
        // The end user's new credentials replace whatever is stored, a refresh that lands meanwhile
        // included. The tags written are the ones read here joined with the session's, so the
        // compare-and-set requires the connection unchanged since this read (its credentials
        // version, and `updated_at`, which a tags PATCH moves), and is retried on a fresh read.
        for (let attempt = 1; ; attempt++) {
          const existing = await reconnected(session, session.reconnect, integration.unique_key);
          checkKeptConfig(existing.connection_config ?? {}, connectionConfig);
          const tags = reconnectedTags(existing.tags ?? {}, session.tags ?? {}, 'flow');
          const sealed = await deps.credentials.seal(existing, credentials);
          const overridden = { contract: vaultContracts.connectionCreated, payload: { ...connectionEvent(existing), operation: 'override' as const, tags, end_user: session.end_user } };
          const replaced = await deps.lifecycle.announce(existing, { when: 'present', credentialsVersionAbove: credentialsVersionOf(existing) }, [overridden], () =>
            deps.connections.replaceCredentials(environment, existing._id, credentialsVersionOf(existing), {
              credentials: sealed,
              credentials_type: credentials.type,
              expires_at: expiryOf(credentials),
              token_obtained_at: null,
              errors: existing.errors.filter((error) => error.type !== 'auth'),
              refresh_failure: null,
              tags,
              updated_at: now,
            }, existing.updated_at),
          );
          if (!replaced) {
            if (attempt >= RECONNECT_ATTEMPTS) throw new AppError('service_unavailable', 'The connection kept changing while it was reconnected; try again');
            continue;
          }
          return { connectionId: existing.connection_id, providerConfigKey: existing.provider_config_key, operation: 'override' };
        }
      }
      // A link in the wrong hands, replayed for its half hour, must not fill the environment.
      if (!(await deps.sessions.countConnection(session, SESSION_CONNECTIONS_MAX))) {
        throw new AppError('too_many_requests', `This connect session has created its ${SESSION_CONNECTIONS_MAX} connections; create a new session`);
      }
      const doc = await insertConnection(
        { ...deps, integrations: deps.integrationService },
        environment,
        integration,
        credentials,
        {
          connection_id: randomUUID(),
          metadata: {},
          connection_config: sessionConnectionConfig(session, integration.unique_key, deps.providers.get(integration.provider), connectionConfig),
          tags: session.tags,
          end_user: session.end_user,
          created_via_session: true,
        },
        (fresh) => creationEvents(fresh, { ...connectionEvent(fresh), operation: 'creation', tags: fresh.tags, end_user: fresh.end_user }),
      );
      return { connectionId: doc.connection_id, providerConfigKey: doc.provider_config_key, operation: 'creation' };
    },
  };
}

export type ConnectSessionService = ReturnType<typeof createConnectSessionService>;
