/**
 * Catalog templates: strings such as `https://${connectionConfig.subdomain}.zendesk.com` or
 * `Bearer ${apiKey}` whose placeholders are filled per connection. The set of placeholders is
 * closed, so a typo in a catalog entry is caught when the catalog is validated, not when a
 * request is proxied.
 *
 * Values are inserted as they are: a caller that builds a URL from a template must check the
 * result (host, scheme) itself, since connection config comes from end users.
 */

export type TemplateContext = {
  connectionConfig?: Record<string, unknown> | undefined;
  credentials?: Record<string, unknown> | undefined;
  apiKey?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
  accessToken?: string | undefined;
};

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
