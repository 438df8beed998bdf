import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Writes a catalog in the vault's YAML format to a fresh file, for `PROVIDERS_FILE`. */
export function writeProvidersFile(yaml: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'latchkey-providers-')), 'providers.yaml');
  writeFileSync(file, yaml);
  return file;
}

/** `loopback-api`: an API-key provider whose key goes in `X-Api-Key`, proxied to `baseUrl`. */
export function apiKeyProviderYaml(baseUrl: string, name = 'loopback-api'): string {
  return `${name}:\n  display_name: Loopback API\n  categories: [test]\n  auth_mode: API_KEY\n  proxy:\n    base_url: ${baseUrl}\n    headers:\n      X-Api-Key: \${apiKey}\n`;
}
