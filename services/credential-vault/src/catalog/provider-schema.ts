import { CREDENTIAL_TYPES, allowedHostSchema } from '@latchkey/contracts';
import { z } from 'zod';
import { credentialFieldsOf, placeholdersOf, unknownPlaceholdersOf, usesCredentials } from './interpolate.js';

/**
 * One provider in the catalog YAML (the built-in `providers.yaml` and an operator's
 * PROVIDERS_FILE share this format). Objects are strict so that a misspelt key in an operator
 * file stops the vault at start instead of being ignored.
 *
 * Proxy credentials: when `proxy.headers` and `proxy.query` do not place the credential, the
 * proxy applies the auth mode's default (OAuth 2 and its variants: `Authorization: Bearer
 * ${accessToken}`; OAuth 1: a signed request; BASIC: `Authorization: Basic` of username and
 * password). API_KEY has no default, so its entries must say where the key goes.
 */

/** A provider's auth mode is the credential type its connections hold, or NONE. */
export const AUTH_MODES = [...CREDENTIAL_TYPES, 'NONE'] as const;

export const authModeSchema = z.enum(AUTH_MODES);
export type AuthMode = z.infer<typeof authModeSchema>;

export const providerNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]*$/, 'provider names are lowercase letters, digits, "-" and "_", starting with a letter or digit');

/** A string that may hold placeholders; only the ones `interpolate` knows are allowed. */
const template = z
  .string()
  .min(1)
  .superRefine((value, ctx) => {
    for (const placeholder of unknownPlaceholdersOf(value)) {
      ctx.addIssue({ code: 'custom', message: `unknown placeholder ${placeholder}` });
    }
  });

/** An http(s) URL once its placeholders are filled; http stays allowed for loopback test providers. */
const urlTemplate = template.refine((value) => {
  try {
    const url = new URL(value.replace(/\$\{[^}]*\}/g, 'x'));
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}, 'must be an http(s) URL (placeholders allowed)');

const stringMap = z.record(z.string().min(1), z.string());
const templateMap = z.record(z.string().min(1), template);

export const paginateSchema = z.strictObject({
  type: z.enum(['cursor', 'link', 'offset']).optional(),
  cursor_path_in_response: z.string().min(1).optional(),
  limit_name_in_request: z.string().min(1).optional(),
  cursor_name_in_request: z.string().min(1).optional(),
  response_path: z.string().min(1).optional(),
  link_rel_in_response_header: z.string().min(1).optional(),
  offset_name_in_request: z.string().min(1).optional(),
});

export const proxySchema = z.strictObject({
  base_url: urlTemplate,
  decompress: z.boolean().default(false),
  paginate: paginateSchema.optional(),
  headers: templateMap.optional(),
  query: templateMap.optional(),
  /** Hosts besides base_url's where a `Base-Url-Override` still gets the credentials (regional or sandbox APIs). */
  allowed_hosts: z.array(allowedHostSchema).max(50).optional(),
  /**
   * How OAUTH1 and TBA calls are signed: HMAC-SHA1 (OAuth 1.0a's) for OAUTH1 and HMAC-SHA256
   * for TBA unless said (NetSuite, whose scheme TBA is, refuses HMAC-SHA1).
   */
  signature_method: z.enum(['HMAC-SHA1', 'HMAC-SHA256']).optional(),
  /** The `realm` of a signed call's Authorization header, a template of connection config (NetSuite: its account id). */
  realm: template.optional(),
  retry: z
    .strictObject({
      /** Response header holding the time the rate limit resets (epoch seconds or a date). */
      at: z.string().min(1).optional(),
      /** Response header holding the seconds to wait. */
      after: z.string().min(1).optional(),
    })
    .optional(),
});

const fieldSchema = z.strictObject({
  type: z.enum(['string', 'number', 'boolean']),
  title: z.string().min(1).optional(),
  description: z.string().min(1).optional(),
  pattern: z
    .string()
    .refine((value) => {
      try {
        new RegExp(value);
        return true;
      } catch {
        return false;
      }
    }, 'must be a valid regular expression')
    .optional(),
  example: z.union([z.string(), z.number(), z.boolean()]).optional(),
  optional: z.boolean().optional(),
});

/** A form: the fields an end user fills in (connection config, or credentials for non-OAuth modes). */
export const fieldsSchema = z.record(z.string().regex(/^[A-Za-z0-9_-]+$/, 'field names are letters, digits, "-" and "_"'), fieldSchema);

const headerName = z.string().regex(/^[A-Za-z0-9-]+$/, 'must be an HTTP header name');

export const webhookSchema = z
  .strictObject({
    signature_header: z.string().min(1),
    algorithm: z.enum(['sha256', 'sha1', 'sha512']),
    encoding: z.enum(['hex', 'base64']),
    /** Text before the digest in the header, e.g. `sha256=`. */
    prefix: z.string().min(1).optional(),
    /**
     * What the provider's HMAC covers, `{body}` when absent: e.g. Standard Webhooks'
     * `{id}.{timestamp}.{body}` or Slack's `v0:{timestamp}:{body}`.
     */
    signed_content: z.string().includes('{body}', { message: 'must contain {body}' }).optional(),
    /** The header with the signing time in unix seconds; the router refuses a webhook signed more than 5 minutes off. */
    timestamp_header: headerName.optional(),
    /** The header with the provider's delivery id; the router takes each id once (its replays are refused). */
    id_header: headerName.optional(),
    /** How an incoming webhook finds its connection: a value in the body matched against a connection's config or metadata. */
    routing: z
      .strictObject({
        body_path: z.string().min(1),
        match: z.enum(['connection_config', 'metadata']),
        key: z.string().min(1),
      })
      .optional(),
  })
  .superRefine((webhook, ctx) => {
    // A timestamp or delivery id is trusted only when the signature covers it: an unsigned one
    // could be rewritten to slip a replay past the window or the once-per-id rule.
    const content = webhook.signed_content ?? '{body}';
    for (const [field, placeholder] of [['timestamp_header', '{timestamp}'], ['id_header', '{id}']] as const) {
      if ((webhook[field] !== undefined) !== content.includes(placeholder)) {
        ctx.addIssue({ code: 'custom', path: [field], message: `${field} is set exactly when signed_content contains ${placeholder}` });
      }
    }
  });

/** A dotted path into a JSON answer, e.g. `response_data.sessionId` (digits index arrays). */
const dottedPath = z.string().regex(/^[^.\s]+(\.[^.\s]+)*$/, 'must be a dotted path such as response_data.sessionId');

/** The auth modes whose token the vault buys with the connection's credentials through `token_request`. */
export const TOKEN_REQUEST_MODES: ReadonlySet<AuthMode> = new Set(['TWO_STEP', 'BILL', 'SIGNATURE']);

/**
 * TWO_STEP, BILL and SIGNATURE: how a token is obtained. Templates may read
 * `${connectionConfig.KEY}`, `${credentials.FIELD}`, `${username}` and `${password}`; the token
 * is read from the JSON answer at `token_path`, its lifetime (seconds) at `expires_in_path`,
 * else `expires_in_seconds`.
 */
export const tokenRequestSchema = z
  .strictObject({
    method: z.enum(['GET', 'POST', 'PUT']).default('POST'),
    url: urlTemplate,
    body_format: z.enum(['json', 'form']).default('json'),
    body: templateMap.optional(),
    headers: templateMap.optional(),
    token_path: dottedPath,
    expires_in_path: dottedPath.optional(),
    expires_in_seconds: z.number().int().positive().max(366 * 24 * 3600).optional(),
  })
  .superRefine((request, ctx) => {
    if (request.method === 'GET' && request.body !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['body'], message: 'a GET token request has no body' });
    }
    // Without a lifetime every fetch would buy a new token.
    if (request.expires_in_path === undefined && request.expires_in_seconds === undefined) {
      ctx.addIssue({ code: 'custom', message: 'needs expires_in_path or expires_in_seconds' });
    }
  });
export type TokenRequest = z.infer<typeof tokenRequestSchema>;

/**
 * A request that tells whether credentials an end user entered work, tried before a connect
 * flow saves them: each endpoint (a path under the proxy base URL, or under
 * `base_url_override`) is called with the credentials injected as the proxy would; one 2xx
 * answer accepts them. For auth modes whose credentials come from a form.
 */
export const verificationSchema = z.strictObject({
  method: z.enum(['GET', 'POST']).default('GET'),
  endpoints: z.array(z.string().min(1).max(2048)).min(1).max(5),
  base_url_override: urlTemplate.optional(),
  headers: stringMap.optional(),
});

/** Auth modes whose connections come from an OAuth dance, not a form: no verification request. */
const REDIRECT_OR_GRANT_MODES: ReadonlySet<AuthMode> = new Set(['OAUTH2', 'OAUTH1', 'OAUTH2_CC', 'APP', 'NONE']);

const OAUTH_REDIRECT_MODES: ReadonlySet<AuthMode> = new Set(['OAUTH2', 'OAUTH1']);
/** Form-based modes whose calls carry a token the vault signs or buys once the credentials are saved: nothing to verify with before. */
const MADE_TOKEN_MODES: ReadonlySet<AuthMode> = new Set(['JWT', 'TWO_STEP', 'BILL', 'SIGNATURE']);

export const providerSchema = z
  .strictObject({
    display_name: z.string().min(1),
    categories: z.array(z.string().min(1)).default([]),
    logo_url: z.string().regex(/^(https:\/\/|\/)\S+$/, 'must be an https URL or an absolute path').optional(),
    auth_mode: authModeSchema,
    authorization_url: urlTemplate.optional(),
    token_url: urlTemplate.optional(),
    /** OAuth 1 only: where the temporary request token is obtained. */
    request_url: urlTemplate.optional(),
    connection_configuration: z.array(z.string().regex(/^[A-Za-z0-9_-]+$/)).default([]),
    /**
     * RFC 9207 (mix-up defence): the authorization server's issuer identifier. When an
     * authorization response carries `iss`, it must equal this (filled like the other URLs).
     */
    issuer: urlTemplate.optional(),
    /** The provider always sends `iss` in authorization responses: one without it is refused. Needs `issuer`. */
    authorization_response_iss_parameter_supported: z.boolean().optional(),
    post_connection_script: z.string().min(1).optional(),
    webhook_routing_script: z.string().min(1).optional(),
    docs: z.url({ protocol: /^https?$/ }).optional(),
    authorization_params: templateMap.optional(),
    token_params: templateMap.optional(),
    refresh_params: templateMap.optional(),
    scope_separator: z.string().min(1).default(' '),
    default_scopes: z.array(z.string().min(1)).optional(),
    disable_pkce: z.boolean().optional(),
    /** How the client authenticates at the token endpoint: HTTP Basic or client_id/secret in the body. */
    token_request_auth_method: z.enum(['basic', 'body']).optional(),
    proxy: proxySchema.optional(),
    connection_config: fieldsSchema.optional(),
    credentials: fieldsSchema.optional(),
    webhook: webhookSchema.optional(),
    token_request: tokenRequestSchema.optional(),
    /** JWT only: what the provider requires of the tokens the vault signs for its connections. */
    jwt: z
      .strictObject({
        /** The `aud` claim (Ghost's Admin API: `/admin/`; App Store Connect: `appstoreconnect-v1`). */
        audience: z.string().min(1).max(256).optional(),
        /** How long a token lives (20 minutes unless said; Ghost takes 5 at most). */
        lifetime_seconds: z.number().int().min(60).max(3600).optional(),
      })
      .optional(),
    verification: verificationSchema.optional(),
  })
  .superRefine((provider, ctx) => {
    const requireField = (field: 'authorization_url' | 'token_url' | 'request_url') => {
      if (provider[field] === undefined) {
        ctx.addIssue({ code: 'custom', path: [field], message: `is required for auth_mode ${provider.auth_mode}` });
      }
    };
    if (OAUTH_REDIRECT_MODES.has(provider.auth_mode)) {
      requireField('authorization_url');
      requireField('token_url');
    }
    if (provider.auth_mode === 'OAUTH1') requireField('request_url');
    if (provider.authorization_response_iss_parameter_supported && provider.issuer === undefined) {
      ctx.addIssue({ code: 'custom', path: ['issuer'], message: 'is required with authorization_response_iss_parameter_supported' });
    }
    if (provider.auth_mode === 'OAUTH2_CC') requireField('token_url');
    if (provider.verification && REDIRECT_OR_GRANT_MODES.has(provider.auth_mode)) {
      ctx.addIssue({ code: 'custom', path: ['verification'], message: `applies to form-based auth modes, not ${provider.auth_mode}` });
    }
    if (provider.verification && MADE_TOKEN_MODES.has(provider.auth_mode)) {
      ctx.addIssue({
        code: 'custom',
        path: ['verification'],
        message: `applies to form-based auth modes whose credentials are sent as typed, not ${provider.auth_mode} (its token is made from them once saved)`,
      });
    }
    if (provider.verification && !provider.verification.base_url_override && !provider.proxy) {
      ctx.addIssue({ code: 'custom', path: ['verification'], message: 'needs base_url_override or a proxy.base_url' });
    }
    for (const field of ['signature_method', 'realm'] as const) {
      if (provider.proxy?.[field] !== undefined && provider.auth_mode !== 'OAUTH1' && provider.auth_mode !== 'TBA') {
        ctx.addIssue({ code: 'custom', path: ['proxy', field], message: `applies to auth_mode OAUTH1 and TBA, not ${provider.auth_mode}` });
      }
    }
    if (provider.proxy?.realm !== undefined && (usesCredentials(provider.proxy.realm) || credentialFieldsOf(provider.proxy.realm).length > 0)) {
      ctx.addIssue({ code: 'custom', path: ['proxy', 'realm'], message: 'may use ${connectionConfig.KEY} placeholders only' });
    }
    if (provider.jwt && provider.auth_mode !== 'JWT') {
      ctx.addIssue({ code: 'custom', path: ['jwt'], message: `applies to auth_mode JWT, not ${provider.auth_mode}` });
    }
    if (provider.token_request && !TOKEN_REQUEST_MODES.has(provider.auth_mode)) {
      ctx.addIssue({ code: 'custom', path: ['token_request'], message: `applies to auth_mode ${[...TOKEN_REQUEST_MODES].join(', ')}, not ${provider.auth_mode}` });
    }

    // Every connection config key a template reads must be asked for before connecting.
    for (const [path, value] of templatesOf(provider)) {
      for (const key of placeholdersOf(value)) {
        if (!provider.connection_configuration.includes(key)) {
          ctx.addIssue({ code: 'custom', path, message: `uses \${connectionConfig.${key}} but connection_configuration does not list "${key}"` });
        }
      }
      if (provider.credentials) {
        for (const field of credentialFieldsOf(value)) {
          if (!(field in provider.credentials)) {
            ctx.addIssue({ code: 'custom', path, message: `uses \${credentials.${field}} but credentials does not define "${field}"` });
          }
        }
      }
    }

    if (provider.auth_mode === 'API_KEY' && provider.proxy) {
      const { base_url, headers = {}, query = {} } = provider.proxy;
      const placed = [base_url, ...Object.values(headers), ...Object.values(query)].some(usesCredentials);
      if (!placed) {
        ctx.addIssue({ code: 'custom', path: ['proxy'], message: 'an API_KEY provider must place ${apiKey} in proxy.headers, proxy.query or proxy.base_url' });
      }
    }
  });

function templatesOf(provider: z.output<typeof providerSchema>): Array<[Array<string>, string]> {
  const found: Array<[Array<string>, string]> = [];
  for (const field of ['authorization_url', 'token_url', 'request_url', 'issuer'] as const) {
    const value = provider[field];
    if (value !== undefined) found.push([[field], value]);
  }
  for (const field of ['authorization_params', 'token_params', 'refresh_params'] as const) {
    for (const [key, value] of Object.entries(provider[field] ?? {})) found.push([[field, key], value]);
  }
  if (provider.token_request) {
    found.push([['token_request', 'url'], provider.token_request.url]);
    for (const field of ['body', 'headers'] as const) {
      for (const [key, value] of Object.entries(provider.token_request[field] ?? {})) found.push([['token_request', field, key], value]);
    }
  }
  if (provider.verification?.base_url_override) found.push([['verification', 'base_url_override'], provider.verification.base_url_override]);
  if (provider.proxy) {
    found.push([['proxy', 'base_url'], provider.proxy.base_url]);
    if (provider.proxy.realm !== undefined) found.push([['proxy', 'realm'], provider.proxy.realm]);
    for (const field of ['headers', 'query'] as const) {
      for (const [key, value] of Object.entries(provider.proxy[field] ?? {})) found.push([['proxy', field, key], value]);
    }
  }
  return found;
}

export type Provider = z.infer<typeof providerSchema>;
/** What a catalog YAML file holds before defaults apply. */
export type ProviderInput = z.input<typeof providerSchema>;

/** A catalog file: provider name → entry. */
export const catalogFileSchema = z.record(providerNameSchema, providerSchema);

/** The Provider object of the spec: what the catalog endpoints return, nothing internal. */
export type PublicProvider = {
  name: string;
  display_name: string;
  logo_url: string;
  categories: string[];
  auth_mode: AuthMode;
  authorization_url?: string;
  token_url?: string;
  connection_configuration: string[];
  post_connection_script?: string;
  webhook_routing_script?: string;
  proxy?: { base_url: string; decompress: boolean; paginate?: z.infer<typeof paginateSchema> };
  docs?: string;
};

/**
 * The provider's logo as an absolute URL: an https logo the catalog entry names, else the one the
 * gateway serves for every provider at `<logoBase>/logos/<name>.svg` (a brand icon or a monogram).
 */
export function logoUrl(name: string, entry: Pick<Provider, 'logo_url'> | undefined, logoBase: string): string {
  return entry?.logo_url?.startsWith('https://') ? entry.logo_url : `${logoBase.replace(/\/+$/, '')}/logos/${name}.svg`;
}

export function toPublicProvider(name: string, entry: Provider, logoBase: string): PublicProvider {
  const { proxy } = entry;
  return {
    name,
    display_name: entry.display_name,
    logo_url: logoUrl(name, entry, logoBase),
    categories: [...entry.categories],
    auth_mode: entry.auth_mode,
    ...(entry.authorization_url !== undefined && { authorization_url: entry.authorization_url }),
    ...(entry.token_url !== undefined && { token_url: entry.token_url }),
    connection_configuration: [...entry.connection_configuration],
    ...(entry.post_connection_script !== undefined && { post_connection_script: entry.post_connection_script }),
    ...(entry.webhook_routing_script !== undefined && { webhook_routing_script: entry.webhook_routing_script }),
    ...(proxy && {
      proxy: {
        base_url: proxy.base_url,
        decompress: proxy.decompress,
        ...(proxy.paginate && { paginate: { ...proxy.paginate } }),
      },
    }),
    ...(entry.docs !== undefined && { docs: entry.docs }),
  };
}
