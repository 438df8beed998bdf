import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { ConfigError } from '@latchkey/config';
import { parse } from 'yaml';
import { interpolate, placeholdersOf } from './interpolate.js';
import { BUILT_IN_CATALOG, loadCatalog, parseCatalog } from './load-catalog.js';
import { providerSchema, toPublicProvider } from './provider-schema.js';

const scratch = mkdtempSync(join(tmpdir(), 'latchkey-catalog-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function writeProvidersFile(name: string, text: string): string {
  const path = join(scratch, name);
  writeFileSync(path, text);
  return path;
}

function problemsOf(action: () => unknown): string[] {
  try {
    action();
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

/** A base URL the proxy can use: https, and a URL once its connection config is filled in. */
function isHttpsBaseUrl(template: string): boolean {
  const connectionConfig = Object.fromEntries(placeholdersOf(template).map((key) => [key, 'example']));
  try {
    return new URL(interpolate(template, { connectionConfig, apiKey: 'key' })).protocol === 'https:';
  } catch {
    return false;
  }
}

describe('the built-in catalog', () => {
  const catalog = loadCatalog();

  it('validates every entry, each reported on its own', () => {
    const document = parse(readFileSync(BUILT_IN_CATALOG, 'utf8')) as Record<string, unknown>;
    const problems = Object.entries(document).flatMap(([name, entry]) => {
      const result = providerSchema.safeParse(entry);
      return result.success ? [] : result.error.issues.map((issue) => `${name}: ${issue.path.join('.')}: ${issue.message}`);
    });
    expect(problems).toEqual([]);
    expect(catalog.size).toBe(Object.keys(document).length);
  });

  it('has at least 250 providers, 150 of them with an https proxy base URL', () => {
    const table: Record<string, { providers: number; with_base_url: number }> = {};
    let withBaseUrl = 0;
    for (const [, provider] of catalog.list()) {
      const row = (table[provider.auth_mode] ??= { providers: 0, with_base_url: 0 });
      row.providers += 1;
      if (provider.proxy && isHttpsBaseUrl(provider.proxy.base_url)) {
        row.with_base_url += 1;
        withBaseUrl += 1;
      }
    }
    console.log(
      ['auth_mode   providers  with https base_url', ...Object.entries(table).map(([mode, row]) => `${mode.padEnd(12)}${String(row.providers).padStart(9)}  ${String(row.with_base_url).padStart(19)}`), `total       ${String(catalog.size).padStart(9)}  ${String(withBaseUrl).padStart(19)}`].join('\n'),
    );
    expect(catalog.size).toBeGreaterThanOrEqual(250);
    expect(withBaseUrl).toBeGreaterThanOrEqual(150);
    expect(table['OAUTH2']?.providers).toBeGreaterThanOrEqual(150);
    expect(table['API_KEY']?.providers).toBeGreaterThanOrEqual(40);
  });

  it('maps the upstream data and the overlay onto our fields', () => {
    expect(catalog.get('github')).toMatchObject({
      display_name: 'GitHub',
      auth_mode: 'OAUTH2',
      authorization_url: 'https://github.com/login/oauth/authorize',
      token_url: 'https://github.com/login/oauth/access_token',
      scope_separator: ',',
      proxy: { base_url: 'https://api.github.com', paginate: { type: 'link' } },
    });
    expect(catalog.get('twitter')).toMatchObject({ auth_mode: 'OAUTH1', request_url: 'https://api.twitter.com/oauth/request_token' });
    expect(catalog.get('zendesk')).toMatchObject({
      authorization_url: 'https://${connectionConfig.subdomain}.zendesk.com/oauth/authorizations/new',
      connection_configuration: ['subdomain'],
      connection_config: { subdomain: { type: 'string' } },
    });
    expect(catalog.get('stripe')).toMatchObject({ auth_mode: 'API_KEY', proxy: { headers: { Authorization: 'Bearer ${apiKey}' } } });
    expect(catalog.get('stripe-connect')?.auth_mode).toBe('OAUTH2');
    expect(catalog.get('twilio')).toMatchObject({ auth_mode: 'BASIC', proxy: { base_url: 'https://api.twilio.com' } });
    expect(catalog.get('angellist')).toBeUndefined();
  });

  it('is read-only', () => {
    const github = catalog.get('github');
    expect(Object.isFrozen(github)).toBe(true);
    expect(Object.isFrozen(github?.proxy)).toBe(true);
  });

  it('is read from the same file by the sources and by dist/', () => {
    const fromDist = new URL('../../src/catalog/providers.yaml', 'file:///app/services/credential-vault/dist/catalog/load-catalog.js');
    expect(fileURLToPath(fromDist)).toBe('/app/services/credential-vault/src/catalog/providers.yaml');
    expect(fileURLToPath(BUILT_IN_CATALOG)).toBe(fileURLToPath(new URL('./providers.yaml', import.meta.url)));
  });
});

describe('list', () => {
  const catalog = loadCatalog();

  it('returns every provider sorted by name', () => {
    const names = catalog.list().map(([name]) => name);
    expect(names).toHaveLength(catalog.size);
    expect(names).toEqual([...names].sort());
  });

  it('matches name, display name or category, ignoring case', () => {
    expect(catalog.list('GITHUB').map(([name]) => name)).toEqual(['github', 'github-pat']);
    expect(catalog.list('quickbooks').map(([name]) => name)).toEqual(['intuit']);
    const payments = catalog.list('Payments');
    expect(payments.map(([name]) => name)).toEqual(expect.arrayContaining(['stripe', 'paypal', 'square']));
    for (const [name, provider] of payments) {
      const haystack = [name, provider.display_name, ...provider.categories].join(' ').toLowerCase();
      expect(haystack).toContain('payments');
    }
    expect(catalog.list('  ')).toHaveLength(catalog.size);
    expect(catalog.list('no-such-provider-anywhere')).toEqual([]);
  });
});

describe('PROVIDERS_FILE', () => {
  it('replaces a built-in entry whole and adds new names', () => {
    const providersFile = writeProvidersFile(
      'override.yaml',
      [
        'github:',
        '  display_name: GitHub Enterprise',
        '  auth_mode: OAUTH2',
        '  authorization_url: https://${connectionConfig.host}/login/oauth/authorize',
        '  token_url: https://${connectionConfig.host}/login/oauth/access_token',
        '  connection_configuration: [host]',
        '  proxy:',
        '    base_url: https://${connectionConfig.host}/api/v3',
        'acme-internal:',
        '  display_name: Acme internal API',
        '  categories: [in-house]',
        '  auth_mode: API_KEY',
        '  proxy:',
        '    base_url: http://127.0.0.1:8080',
        '    headers:',
        '      X-Api-Key: ${apiKey}',
        '',
      ].join('\n'),
    );
    const builtIn = loadCatalog();
    const catalog = loadCatalog({ providersFile });

    expect(catalog.size).toBe(builtIn.size + 1);
    const github = catalog.get('github');
    expect(github?.display_name).toBe('GitHub Enterprise');
    expect(github?.proxy).toEqual({ base_url: 'https://${connectionConfig.host}/api/v3', decompress: false });
    // Replaced whole: nothing of the built-in entry survives.
    expect(github?.categories).toEqual([]);
    expect(github?.webhook).toBeUndefined();
    expect(github?.scope_separator).toBe(' ');

    expect(catalog.get('acme-internal')).toMatchObject({ auth_mode: 'API_KEY', categories: ['in-house'] });
    expect(catalog.list('IN-HOUSE').map(([name]) => name)).toEqual(['acme-internal']);
    expect(toPublicProvider('acme-internal', catalog.get('acme-internal')!, 'http://localhost:3003')).toEqual({
      name: 'acme-internal',
      display_name: 'Acme internal API',
      logo_url: 'http://localhost:3003/logos/acme-internal.svg',
      categories: ['in-house'],
      auth_mode: 'API_KEY',
      connection_configuration: [],
      proxy: { base_url: 'http://127.0.0.1:8080', decompress: false },
    });
  });

  it('accepts an empty file', () => {
    expect(loadCatalog({ providersFile: writeProvidersFile('empty.yaml', '') }).size).toBe(loadCatalog().size);
  });

  it('is refused with every problem, each naming the file, the provider and the field', () => {
    const providersFile = writeProvidersFile(
      'invalid.yaml',
      [
        'acme:',
        '  display_name: Acme',
        '  auth_mode: OAUTH2',
        '  authorization_url: https://acme.test/authorize',
        '  proxy:',
        '    base_url: not a url',
        'Bad Name:',
        '  display_name: Bad',
        '  auth_mode: NONE',
        'keyed:',
        '  display_name: Keyed',
        '  auth_mode: API_KEY',
        '  proxy:',
        '    base_url: https://${connectionConfig.subdomain}.keyed.test',
        '    headers: { X-Key: "${apiKey}" }',
        '',
      ].join('\n'),
    );
    const problems = problemsOf(() => loadCatalog({ providersFile }));
    const prefix = `PROVIDERS_FILE ${providersFile}: provider`;
    expect(problems).toEqual(
      expect.arrayContaining([
        `${prefix} "acme": proxy.base_url: must be an http(s) URL (placeholders allowed)`,
        `${prefix} "acme": token_url: is required for auth_mode OAUTH2`,
        expect.stringMatching(new RegExp(`^${escape(prefix)} "Bad Name": invalid provider name: provider names are lowercase`)),
        `${prefix} "keyed": proxy.base_url: uses \${connectionConfig.subdomain} but connection_configuration does not list "subdomain"`,
      ]),
    );
    expect(problems).toHaveLength(4);
  });

  it('is refused when it is not YAML, not a mapping, or missing', () => {
    const notYaml = writeProvidersFile('broken.yaml', 'acme: [unclosed\n');
    expect(problemsOf(() => loadCatalog({ providersFile: notYaml }))).toEqual([expect.stringContaining(`PROVIDERS_FILE ${notYaml}: not valid YAML`)]);
    const list = writeProvidersFile('list.yaml', '- acme\n');
    expect(problemsOf(() => loadCatalog({ providersFile: list }))).toEqual([`PROVIDERS_FILE ${list}: must be a mapping of provider name to provider entry`]);
    const missing = join(scratch, 'missing.yaml');
    expect(problemsOf(() => loadCatalog({ providersFile: missing }))).toEqual([expect.stringContaining(`PROVIDERS_FILE ${missing}: cannot be read`)]);
  });
});

describe('parseCatalog', () => {
  it('lists every problem of every entry, not the first one only', () => {
    const problems = problemsOf(() =>
      parseCatalog('one:\n  auth_mode: OAUTH2\ntwo:\n  display_name: Two\n  auth_mode: API_KEY\n  colour: blue\n', 'test catalog'),
    );
    expect(problems).toEqual([
      'test catalog: provider "one": display_name: Invalid input: expected string, received undefined',
      'test catalog: provider "two": Unrecognized key: "colour"',
    ]);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
