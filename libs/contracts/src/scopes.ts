/**
 * The closed list of API-key scopes, exactly as the API document's table gives them. Every
 * gateway route names one of these (or says why it needs none).
 */
export const SCOPES = [
  'environment:integrations:list',
  'environment:integrations:list_credentials',
  'environment:integrations:list_functions',
  'environment:integrations:read',
  'environment:integrations:read_credentials',
  'environment:integrations:create',
  'environment:integrations:update',
  'environment:integrations:delete',
  'environment:connections:list',
  'environment:connections:list_credentials',
  'environment:connections:read',
  'environment:connections:read_credentials',
  'environment:connections:create',
  'environment:connections:update',
  'environment:connections:delete',
  'environment:connect_sessions:write',
  'environment:syncs:read',
  'environment:syncs:execute',
  'environment:syncs:update',
  'environment:syncs:variant:create',
  'environment:syncs:variant:delete',
  'environment:deploy',
  'environment:functions:compile',
  'environment:functions:dryrun',
  'environment:records:read',
  'environment:records:write',
  'environment:actions:execute',
  'environment:proxy',
  'environment:variables:read',
  'environment:mcp',
  /** Not in the API document: Latchkey's operations log (`GET /operations`). */
  'environment:operations:read',
] as const;

export type Scope = (typeof SCOPES)[number];

/**
 * What a deployed function does when it runs: for the environment, with no key behind it (its
 * context reads connections' and the integration's credentials, proxies, writes metadata and
 * records, reads variables). Deploying takes each of these besides `environment:deploy`: a key
 * deploys no code that could do more than the key itself through the API.
 */
export const DEPLOYED_FUNCTION_SCOPES: readonly Scope[] = [
  'environment:connections:read_credentials',
  'environment:connections:update',
  'environment:integrations:read_credentials',
  'environment:proxy',
  'environment:records:write',
  'environment:variables:read',
];

/** A key either holds every scope (the `Default - Full access` kind) or a chosen list. */
export type KeyScopes = 'full_access' | readonly Scope[];

export const FULL_ACCESS = 'full_access' as const;

const SCOPE_SET: ReadonlySet<string> = new Set(SCOPES);

export function isScope(value: unknown): value is Scope {
  return typeof value === 'string' && SCOPE_SET.has(value);
}

/** A `*_credentials` scope is a superset of its plain scope: this names the plain one it implies. */
function impliedBy(scope: Scope): Scope | undefined {
  if (!scope.endsWith('_credentials')) return undefined;
  const plain = scope.replace(/_credentials$/, '');
  return isScope(plain) ? plain : undefined;
}

/** Expands a key's scopes once, at cache fill, so each request is a set lookup. */
export function expandScopes(scopes: KeyScopes): ReadonlySet<Scope> {
  if (scopes === FULL_ACCESS) return new Set(SCOPES);
  const expanded = new Set<Scope>(scopes);
  for (const scope of scopes) {
    const plain = impliedBy(scope);
    if (plain !== undefined) expanded.add(plain);
  }
  return expanded;
}
