#!/usr/bin/env node
/**
 * Builds src/catalog/providers.yaml, the vault's built-in provider catalog, from
 *   - grant (MIT): config/oauth.json, OAuth 1 and 2 endpoints of ~200 providers;
 *   - @purest/providers (Apache-2.0): API hosts and where each API expects the token;
 *   - src/catalog/overlay.yaml (ours): what those lack or have wrong, and the API key and
 *     HTTP Basic providers they do not cover.
 * Only facts (URLs, parameter names) are taken from the packages. The output is committed so
 * that every change to the catalog is reviewed as a diff; the catalog tests validate it.
 *
 *   npm run catalog -w @latchkey/credential-vault
 *
 * Plain JavaScript, so node runs it without a build step.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';

const require = createRequire(import.meta.url);
const catalogDir = resolve(dirname(fileURLToPath(import.meta.url)), '../src/catalog');
const overlayPath = resolve(catalogDir, 'overlay.yaml');
const outputPath = resolve(catalogDir, 'providers.yaml');

const grant = require('grant/config/oauth.json');
const grantVersion = require('grant/package.json').version;
const purest = require('@purest/providers');
const purestVersion = require('@purest/providers/package.json').version;
const overlay = parse(readFileSync(overlayPath, 'utf8'));

const NAME = /^[a-z0-9][a-z0-9_-]*$/;
const GRANT_FIELDS = new Set(['authorize_url', 'access_url', 'request_url', 'oauth', 'scope_delimiter']);
const FIELD_ORDER = [
  'display_name', 'categories', 'logo_url', 'auth_mode', 'authorization_url', 'token_url', 'request_url',
  'token_request_auth_method', 'scope_separator', 'default_scopes', 'disable_pkce', 'authorization_params',
  'token_params', 'refresh_params', 'connection_configuration', 'connection_config', 'credentials',
  'post_connection_script', 'webhook_routing_script', 'proxy', 'webhook', 'docs',
];

const problems = [];
const problem = (message) => problems.push(message);

// --- upstream placeholders -------------------------------------------------------------------

/**
 * Upstream data writes an account-specific part as `[subdomain]`. When it stands for the whole
 * host (`https://[subdomain]/...`) we call the connection config key `host`, else `subdomain`.
 */
function fromUpstreamUrl(url, where, subdomainDefault) {
  const converted = url.replace(/\[subdomain\]/g, (_match, offset) => {
    if (subdomainDefault !== undefined) return subdomainDefault;
    const wholeHost = url.slice(offset - 3, offset) === '://' && /^(\/|$)/.test(url.slice(offset + '[subdomain]'.length));
    return wholeHost ? '${connectionConfig.host}' : '${connectionConfig.subdomain}';
  });
  if (/\[[a-z_]+\]/.test(converted)) problem(`${where}: unhandled placeholder in ${url}`);
  return converted;
}

// --- grant: OAuth endpoints ------------------------------------------------------------------

function fromGrant(name, source) {
  for (const field of Object.keys(source)) {
    if (!GRANT_FIELDS.has(field)) problem(`grant ${name}: field ${field} is not mapped; extend build-catalog.mjs`);
  }
  if (source.oauth !== 1 && source.oauth !== 2) {
    problem(`grant ${name}: unknown oauth version ${source.oauth}`);
    return undefined;
  }
  const where = `grant ${name}`;
  const entry = {
    auth_mode: source.oauth === 1 ? 'OAUTH1' : 'OAUTH2',
    authorization_url: fromUpstreamUrl(source.authorize_url, where),
    token_url: fromUpstreamUrl(source.access_url, where),
  };
  if (source.oauth === 1) entry.request_url = fromUpstreamUrl(source.request_url, where);
  // grant joins scopes with "," unless the provider says otherwise.
  if (source.oauth === 2) entry.scope_separator = source.scope_delimiter ?? ',';
  return entry;
}

// --- @purest/providers: API hosts ------------------------------------------------------------

/** The first alternative that sends a bearer token, else the first one. */
function pickAuth(auth) {
  if (!Array.isArray(auth)) return auth;
  return auth.find((option) => option?.auth?.bearer !== undefined) ?? auth[0];
}

/** Where purest puts the OAuth 2 token, as our templates; a bearer token is the proxy's default. */
function tokenPlacement(auth) {
  const placement = {};
  // Purest numbers a request's secrets [0], [1], ...; the token is the bearer one when there
  // is one, else [0]. Other secrets (app keys) are not per connection, so they are left out.
  const token = auth?.auth?.bearer ?? '[0]';
  const onlyToken = (map) => Object.fromEntries(
    Object.entries(map ?? {})
      .filter(([, value]) => typeof value === 'string' && value.includes(token) && !/\[\d\]/.test(value.replace(token, '')))
      .map(([key, value]) => [key, value.replace(token, '${accessToken}')]),
  );
  const query = onlyToken(auth?.qs);
  const headers = onlyToken(auth?.headers);
  if (Object.keys(query).length > 0) placement.query = query;
  if (Object.keys(headers).length > 0) placement.headers = headers;
  return placement;
}

function fromPurest(name, authMode) {
  const domains = purest[name];
  if (!domains) return undefined;
  for (const [domain, paths] of Object.entries(domains)) {
    for (const [path, config] of Object.entries(paths)) {
      if (path === '__domain') continue;
      const aliases = [config?.__path?.alias ?? []].flat();
      if (!aliases.includes('__default')) continue;
      const domainConfig = paths.__domain ?? {};
      const subdomainDefault = config.__path.subdomain ?? domainConfig.subdomain ?? domainConfig.auth?.subdomain;
      // The API root: everything before the first per-request part (version, endpoint, format).
      const stable = `${domain}/${path}`.split(/\[version\]|\{endpoint\}|\[type\]|\[subpath\]/)[0].replace(/\/+$/, '');
      const proxy = { base_url: fromUpstreamUrl(stable, `purest ${name}`, subdomainDefault) };
      if (authMode === 'OAUTH2') Object.assign(proxy, tokenPlacement(pickAuth(config.__path.auth ?? domainConfig.auth)));
      return proxy;
    }
  }
  return undefined;
}

// --- assembling ------------------------------------------------------------------------------

const removed = new Set(overlay.remove ?? []);
const renames = overlay.rename ?? {};
for (const name of [...removed, ...Object.keys(renames)]) {
  if (!grant[name]) problem(`overlay: ${name} (in remove or rename) is not in grant`);
}

/** @type {Map<string, Record<string, unknown>>} */
const catalog = new Map();
const upstreamName = new Map();
for (const [name, source] of Object.entries(grant)) {
  if (removed.has(name)) continue;
  const ourName = renames[name] ?? name;
  const entry = fromGrant(name, source);
  if (!entry) continue;
  if (catalog.has(ourName)) problem(`grant ${name}: ${ourName} already taken`);
  catalog.set(ourName, entry);
  upstreamName.set(ourName, name);
}

for (const [ourName, entry] of catalog) {
  const proxy = fromPurest(upstreamName.get(ourName), entry.auth_mode);
  if (proxy) entry.proxy = proxy;
}

for (const [name, patch] of Object.entries(overlay.providers ?? {})) {
  if (!patch || typeof patch !== 'object') {
    problem(`overlay providers.${name}: must be a mapping`);
    continue;
  }
  const entry = catalog.get(name) ?? {};
  for (const [field, value] of Object.entries(patch)) {
    if (value === null) delete entry[field];
    else entry[field] = value;
  }
  catalog.set(name, entry);
}

const categoriesOf = new Map();
for (const [category, names] of Object.entries(overlay.categories ?? {})) {
  for (const name of names) {
    if (!catalog.has(name)) problem(`overlay categories.${category}: no provider ${name}`);
    categoriesOf.set(name, [...(categoriesOf.get(name) ?? []), category]);
  }
}
for (const section of ['display_names', 'docs']) {
  for (const name of Object.keys(overlay[section] ?? {})) {
    if (!catalog.has(name)) problem(`overlay ${section}: no provider ${name}`);
  }
}

const TEMPLATE_FIELDS = ['authorization_url', 'token_url', 'request_url'];
const TEMPLATE_MAPS = ['authorization_params', 'token_params', 'refresh_params'];

function templatesOf(entry) {
  const found = TEMPLATE_FIELDS.map((field) => entry[field]);
  for (const field of TEMPLATE_MAPS) found.push(...Object.values(entry[field] ?? {}));
  if (entry.proxy) found.push(entry.proxy.base_url, ...Object.values(entry.proxy.headers ?? {}), ...Object.values(entry.proxy.query ?? {}));
  return found.filter((value) => typeof value === 'string');
}

const humanize = (key) => key.replace(/[_-]+/g, ' ').replace(/^./, (first) => first.toUpperCase()).replace(/\bid\b/gi, 'ID');

function complete(name, entry) {
  if (!NAME.test(name)) problem(`${name}: not a valid provider name`);
  entry.display_name = overlay.display_names?.[name] ?? entry.display_name ?? name.charAt(0).toUpperCase() + name.slice(1);
  entry.categories = categoriesOf.get(name) ?? entry.categories ?? [];
  if (entry.categories.length === 0) problem(`${name}: has no category; add it under categories in overlay.yaml`);
  entry.logo_url ??= `/images/providers/${name}.svg`;
  if (overlay.docs?.[name] && !entry.docs) entry.docs = overlay.docs[name];
  if (entry.auth_mode !== 'OAUTH2' && entry.auth_mode !== 'OAUTH2_CC') delete entry.scope_separator;
  if (entry.scope_separator === ' ') delete entry.scope_separator;

  // Ask before connecting for every connection config key a template reads.
  const keys = new Set(entry.connection_configuration ?? []);
  for (const template of templatesOf(entry)) {
    for (const match of template.matchAll(/\$\{connectionConfig\.([A-Za-z0-9_-]+)\}/g)) keys.add(match[1]);
  }
  if (keys.size > 0) {
    entry.connection_configuration = [...keys];
    const form = { ...entry.connection_config };
    for (const key of keys) form[key] ??= overlay.fields?.[key] ?? { type: 'string', title: humanize(key) };
    entry.connection_config = form;
  }
  if (entry.auth_mode === 'API_KEY') entry.credentials ??= { apiKey: { type: 'string', title: 'API key' } };
  if (entry.auth_mode === 'BASIC') {
    entry.credentials ??= { username: { type: 'string', title: 'User name' }, password: { type: 'string', title: 'Password' } };
  }

  const base = entry.proxy?.base_url;
  if (base !== undefined && !base.startsWith('https://')) problem(`${name}: proxy.base_url ${base} is not https; fix it in overlay.yaml`);

  const ordered = {};
  for (const field of FIELD_ORDER) if (entry[field] !== undefined) ordered[field] = entry[field];
  for (const field of Object.keys(entry)) if (!(field in ordered)) ordered[field] = entry[field];
  return ordered;
}

const output = {};
for (const name of [...catalog.keys()].sort()) output[name] = complete(name, catalog.get(name));

if (problems.length > 0) {
  process.stderr.write(`catalog not written:\n${problems.map((line) => `  - ${line}`).join('\n')}\n`);
  process.exit(1);
}

const header = `# GENERATED by scripts/build-catalog.mjs: do not edit; change overlay.yaml and run
#   npm run catalog -w @latchkey/credential-vault
# Sources: grant ${grantVersion} (MIT, config/oauth.json), @purest/providers ${purestVersion}
# (Apache-2.0), overlay.yaml. Logos are served by us at /images/providers/<name>.svg.
`;
writeFileSync(outputPath, header + stringify(output, { lineWidth: 0, aliasDuplicateObjects: false }));

const byMode = {};
for (const entry of Object.values(output)) {
  const row = (byMode[entry.auth_mode] ??= { providers: 0, with_base_url: 0 });
  row.providers += 1;
  if (entry.proxy?.base_url) row.with_base_url += 1;
}
console.log(`wrote ${Object.keys(output).length} providers to ${outputPath}`);
console.table(byMode);
