import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '@latchkey/config';
import { parse } from 'yaml';
import { catalogFileSchema, type Provider } from './provider-schema.js';

/**
 * Where the built-in catalog lives. tsc copies no YAML, so rather than a copy step or a
 * generated .ts module (a second 4,000-line copy of the data to review), both the sources and
 * the compiled code read the one committed file: this module sits two levels below the
 * package root in `src/catalog/` and in `dist/catalog/`, so the same relative URL reaches
 * `src/catalog/providers.yaml` from either. The image ships `src/` beside `dist/`
 * (deploy/Dockerfile copies each service folder whole); a missing file stops the vault at
 * start with its path.
 */
export const BUILT_IN_CATALOG = new URL('../../src/catalog/providers.yaml', import.meta.url);

export type Catalog = {
  get(name: string): Provider | undefined;
  /** Entries sorted by name; `search` matches name, display name or a category, ignoring case. */
  list(search?: string): Array<[string, Provider]>;
  readonly size: number;
};

export type LoadCatalogOptions = {
  /** PROVIDERS_FILE: an operator's catalog in the same format, merged over the built-in one. */
  providersFile?: string | undefined;
};

/**
 * Reads and validates the built-in catalog and, when given, the operator's file. An operator
 * entry replaces the built-in entry of the same name whole; new names add providers. Any
 * invalid entry throws (ConfigError for the operator's file) so that the vault refuses to start.
 */
export function loadCatalog(options: LoadCatalogOptions = {}): Catalog {
  const builtInPath = fileURLToPath(BUILT_IN_CATALOG);
  let builtIn: Map<string, Provider>;
  try {
    builtIn = parseCatalog(readText(builtInPath, 'built-in catalog'), `built-in catalog ${builtInPath}`);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    // A bad built-in entry is our bug, not the operator's configuration.
    throw new Error(`${error.message}\n(a bug in the built-in catalog: fix overlay.yaml, run npm run catalog and the catalog tests)`);
  }
  const merged = new Map(builtIn);
  if (options.providersFile !== undefined) {
    const source = `PROVIDERS_FILE ${options.providersFile}`;
    for (const [name, provider] of parseCatalog(readText(options.providersFile, 'PROVIDERS_FILE'), source)) {
      merged.set(name, provider);
    }
  }
  return catalogOf(merged);
}

/**
 * Parses one catalog file's text. Throws a ConfigError listing every problem, each naming the
 * source, the provider and the field, e.g.
 * `PROVIDERS_FILE /etc/latchkey/providers.yaml: provider "acme": proxy.base_url: must be ...`.
 */
export function parseCatalog(text: string, source: string): Map<string, Provider> {
  let document: unknown;
  try {
    document = parse(text);
  } catch (error) {
    throw new ConfigError([`${source}: not valid YAML: ${(error as Error).message}`]);
  }
  // An empty operator file is allowed: it adds nothing.
  if (document === null || document === undefined) return new Map();
  if (typeof document !== 'object' || Array.isArray(document)) {
    throw new ConfigError([`${source}: must be a mapping of provider name to provider entry`]);
  }
  const result = catalogFileSchema.safeParse(document);
  if (!result.success) {
    throw new ConfigError(
      result.error.issues.map((issue) => {
        const [name, ...field] = issue.path.map(String);
        const where = field.length > 0 ? `${field.join('.')}: ` : '';
        const message = issue.code === 'invalid_key' ? `invalid provider name: ${issue.issues.map((inner) => inner.message).join('; ')}` : issue.message;
        return `${source}: provider "${name ?? ''}": ${where}${message}`;
      }),
    );
  }
  return new Map(Object.entries(result.data));
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new ConfigError([`${what} ${path}: cannot be read: ${(error as Error).message}`]);
  }
}

function catalogOf(entries: Map<string, Provider>): Catalog {
  const sorted = [...entries].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  // Handlers share these objects; freezing them keeps one request from changing another's view.
  for (const [, provider] of sorted) deepFreeze(provider);
  const byName = new Map(sorted);
  return {
    get: (name) => byName.get(name),
    list: (search) => {
      const needle = search?.trim().toLowerCase();
      if (!needle) return [...sorted];
      return sorted.filter(
        ([name, provider]) =>
          name.includes(needle) ||
          provider.display_name.toLowerCase().includes(needle) ||
          provider.categories.some((category) => category.toLowerCase().includes(needle)),
      );
    },
    size: sorted.length,
  };
}

function deepFreeze(value: unknown): void {
  if (value === null || typeof value !== 'object' || Object.isFrozen(value)) return;
  Object.freeze(value);
  for (const inner of Object.values(value)) deepFreeze(inner);
}
