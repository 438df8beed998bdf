import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { http } from './stack.js';

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

/**
 * An integration of the loopback API-key provider (`apiKeyProviderYaml`) and one connection to
 * it, made through the gateway; anything but 201 fails the test's setup.
 */
export async function seedApiKeyConnection(
  stack: { url: string; bootstrapKey: string },
  integration: string,
  connectionId: string,
  apiKey: string,
): Promise<void> {
  const created = async (path: string, body: unknown) => {
    const response = await http(`${stack.url}${path}`, { method: 'POST', token: stack.bootstrapKey, body });
    if (response.status !== 201) throw new Error(`POST ${path}: ${response.status} ${JSON.stringify(response.json)}`);
  };
  await created('/integrations', { provider: 'loopback-api', unique_key: integration });
  await created('/connections', { provider_config_key: integration, connection_id: connectionId, credentials: { type: 'API_KEY', apiKey } });
}
