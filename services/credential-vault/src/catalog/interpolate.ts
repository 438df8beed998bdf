/**
 * Catalog templates: strings such as `https://${connectionConfig.subdomain}.zendesk.com` or
 * `Bearer ${apiKey}` whose placeholders are filled per connection. The set of placeholders is
 * closed, so a typo in a catalog entry is caught when the catalog is validated, not when a
 * request is proxied.
 *
 * Values come from end users (connection config, credentials), so a URL is never filled with
 * `interpolate`: `interpolateUrl` fills each placeholder for its place in the URL and refuses a
 * value that would change the URL's structure (its scheme, host, path or query).
 */

export type TemplateContext = {
  connectionConfig?: Record<string, unknown> | undefined;
  credentials?: Record<string, unknown> | undefined;
  apiKey?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
  accessToken?: string | undefined;
};

/**
 * The fields `${credentials.FIELD}` reads. A TWO_STEP or CUSTOM connection's free-form fields
 * are in its `raw`, so they are read there, under the credentials' own; any other type's `raw`
 * (a BILL connection's is the provider's last answer) is not.
 */
export function templateCredentials(credentials: Record<string, unknown>): Record<string, unknown> {
  const raw = credentials['raw'];
  const freeForm = credentials['type'] === 'TWO_STEP' || credentials['type'] === 'CUSTOM';
  return freeForm && raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? { ...(raw as Record<string, unknown>), ...credentials } : credentials;
}

type Placeholder =
  | { kind: 'connectionConfig' | 'credentials'; key: string }
  | { kind: 'apiKey' | 'username' | 'password' | 'accessToken' };

const placeholderPattern = /\$\{([^}]*)\}/g;
const scopedPattern = /^(connectionConfig|credentials)\.([A-Za-z0-9_-]+)$/;
const plainNames = new Set(['apiKey', 'username', 'password', 'accessToken']);

function parsePlaceholder(expression: string): Placeholder | undefined {
  const scoped = scopedPattern.exec(expression);
  if (scoped) return { kind: scoped[1] as 'connectionConfig' | 'credentials', key: scoped[2] as string };
  if (plainNames.has(expression)) return { kind: expression as 'apiKey' | 'username' | 'password' | 'accessToken' };
  return undefined;
}

function expressionsOf(template: string): string[] {
  return [...template.matchAll(placeholderPattern)].map((match) => match[1] as string);
}

function lookUp(placeholder: Placeholder, context: TemplateContext): unknown {
  switch (placeholder.kind) {
    case 'connectionConfig':
      return context.connectionConfig?.[placeholder.key];
    case 'credentials':
      return context.credentials?.[placeholder.key];
    default:
      return context[placeholder.kind];
  }
}

/**
 * Fills every placeholder of `template` from `context`. Throws an Error naming the placeholder
 * when one is unknown, missing (undefined or null) or not a scalar; callers turn it into an
 * AppError with the code that fits where the template came from.
 */
export function interpolate(template: string, context: TemplateContext): string {
  return template.replace(placeholderPattern, (whole, expression: string) => {
    const placeholder = parsePlaceholder(expression);
    if (!placeholder) throw new Error(`unknown placeholder ${whole}`);
    const value = lookUp(placeholder, context);
    if (value === undefined || value === null) throw new Error(`missing value for ${whole}`);
    if (typeof value === 'string') return value;
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    throw new Error(`value for ${whole} must be a string, number or boolean`);
  });
}

/** Where in a URL template a placeholder stands, which decides what its value may be. */
type UrlPart = 'host-label' | 'host-name' | 'host' | 'port' | 'path' | 'query';

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i;
const isDnsName = (value: string) => value.length <= 253 && value.split('.').every((label) => DNS_LABEL.test(label));
const URL_END = /^([/?#]|$)/;

/**
 * The part of the URL a placeholder stands in, from the template's own text around it (values
 * cannot move it: none may hold a delimiter of the part it fills).
 */
function urlPartOf(before: string, after: string): UrlPart {
  const schemeEnd = before.indexOf('://');
  if (schemeEnd < 0) throw new Error('placeholders may not stand in a URL scheme');
  const rest = before.slice(schemeEnd + 3);
  if (/[?#]/.test(rest)) return 'query';
  if (rest.includes('/')) return 'path';
  if (rest.includes('@')) throw new Error('placeholders may not stand in URL user information');
  if (rest.includes(':')) return 'port';
  // A placeholder followed by more of the host fills one label of a domain the template fixes;
  // one that ends the host names the domain (`api.${site}`), or the whole host and port.
  const endsHost = URL_END.test(after) || after.startsWith(':');
  if (!endsHost) return 'host-label';
  return rest === '' && URL_END.test(after) ? 'host' : 'host-name';
}

/** The part of the URL the placeholder `whole`, at `offset` of `template`, stands in (`urlPartOf`). */
const partAt = (template: string, offset: number, whole: string): UrlPart =>
  urlPartOf(template.slice(0, offset).replace(placeholderPattern, 'x'), template.slice(offset + whole.length));

/** A path value percent-encoded but for the characters a segment may hold as they are (RFC 3986 pchar). */
const encodePathValue = (value: string) => encodeURIComponent(value).replace(/%3A/gi, ':').replace(/%40/gi, '@');

function urlValue(part: UrlPart, value: string, whole: string): string {
  switch (part) {
    case 'host-label':
      if (!DNS_LABEL.test(value)) throw new Error(`value for ${whole} must be a DNS label (letters, digits and "-")`);
      return value;
    case 'host-name':
      if (!isDnsName(value)) throw new Error(`value for ${whole} must be a DNS name`);
      return value;
    case 'host': {
      const [, name = '', port] = /^([^:]*)(?::(\d{1,5}))?$/.exec(value) ?? [];
      if (!isDnsName(name) || (port !== undefined && Number(port) > 65535)) throw new Error(`value for ${whole} must be a host name, with an optional port`);
      return value;
    }
    case 'port':
      if (!/^\d{1,5}$/.test(value) || Number(value) > 65535) throw new Error(`value for ${whole} must be a port number`);
      return value;
    case 'path':
      // Percent-encoded, a value cannot add a segment or a query; alone it must not be a dot segment either.
      if (value === '' || value === '.' || value === '..') throw new Error(`value for ${whole} must be a non-empty path segment other than . and ..`);
      return encodePathValue(value);
    case 'query':
      return encodeURIComponent(value);
  }
}

/**
 * Fills a URL template (a provider's API base URL, token, authorization or verification URL):
 * each value is checked or encoded for where it stands, so that no value can change where the
 * URL points beyond the part the template gives it. A value in the host must be a DNS label
 * (`${connectionConfig.subdomain}.zendesk.com`), a DNS name where it ends the host
 * (`api.${connectionConfig.site}`), or a host name and port where it is the whole host; one in
 * the path is percent-encoded and may not be `.` or `..`; one in the query is percent-encoded.
 * Throws an Error naming the placeholder, never the value.
 */
export function interpolateUrl(template: string, context: TemplateContext): string {
  const filled = template.replace(placeholderPattern, (whole, _expression: string, offset: number) =>
    urlValue(partAt(template, offset, whole), interpolate(whole, context), whole),
  );
  try {
    new URL(filled);
  } catch {
    throw new Error('the filled URL is not valid');
  }
  return filled;
}

/**
 * The connection config values given for a URL template that `interpolateUrl` would refuse, by
 * the same rules, each with why (naming the placeholder, never the value): a connection's config
 * is checked when it is given, not found wrong at its first call. Other placeholders are not read.
 */
export function refusedUrlConfig(template: string, connectionConfig: Record<string, unknown>): Array<{ key: string; message: string }> {
  const refused: Array<{ key: string; message: string }> = [];
  for (const match of template.matchAll(placeholderPattern)) {
    const placeholder = parsePlaceholder(match[1] ?? '');
    if (placeholder?.kind !== 'connectionConfig') continue;
    const value = connectionConfig[placeholder.key];
    if (value === undefined || value === null) continue;
    try {
      urlValue(partAt(template, match.index, match[0]), interpolate(match[0], { connectionConfig }), match[0]);
    } catch (error) {
      refused.push({ key: placeholder.key, message: (error as Error).message });
    }
  }
  return refused;
}

/** The connection config keys a template uses, each once, in order of appearance. */
export function placeholdersOf(template: string): string[] {
  return keysOf(template, 'connectionConfig');
}

/** The credential fields a template uses (`${credentials.FIELD}`), each once. */
export function credentialFieldsOf(template: string): string[] {
  return keysOf(template, 'credentials');
}

/** Placeholders a template uses that `interpolate` would refuse, e.g. `${apikey}`. */
export function unknownPlaceholdersOf(template: string): string[] {
  return expressionsOf(template)
    .filter((expression) => parsePlaceholder(expression) === undefined)
    .map((expression) => `\${${expression}}`);
}

/** Whether a template reads the API key or any credential field. */
export function usesCredentials(template: string): boolean {
  return expressionsOf(template).some((expression) => {
    const placeholder = parsePlaceholder(expression);
    return placeholder !== undefined && placeholder.kind !== 'connectionConfig';
  });
}

function keysOf(template: string, kind: 'connectionConfig' | 'credentials'): string[] {
  const keys: string[] = [];
  for (const expression of expressionsOf(template)) {
    const placeholder = parsePlaceholder(expression);
    if (placeholder?.kind === kind && !keys.includes(placeholder.key)) keys.push(placeholder.key);
  }
  return keys;
}
