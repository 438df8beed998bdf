import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Writes a catalog in the vault's YAML format to a fresh file, for `PROVIDERS_FILE`. */
export function writeProvidersFile(yaml: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'latchkey-providers-')), 'providers.yaml');
  writeFileSync(file, yaml);
  return file;
}
