import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';

/**
 * What `make up` hands each process, from deploy/local/secrets.sh (the part of up.sh that reads
 * .data/secrets.env and builds each process's environment), run by bash in a temporary data dir.
 */
const script = fileURLToPath(new URL('./secrets.sh', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'latchkey-up-secrets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SERVICES = ['gateway', 'credential-vault', 'proxy', 'sync-scheduler', 'action-runner', 'webhook-router'];
const OWN: Record<string, string[]> = {
  gateway: ['ADMIN_TOKEN', 'API_KEY_DIGEST_SECRET', 'BOOTSTRAP_SECRET_KEY', 'SETTINGS_ENCRYPTION_KEYS'],
  'credential-vault': ['ENCRYPTION_KEYS'],
};
const passwordName = (service: string) => `LATCHKEY_NATS_PASSWORD_${service.toUpperCase().replace(/-/g, '_')}`;

/** The environment a process started by up.sh's `start` would see, with `callerEnv` in the shell. */
function environmentOf(who: string, secretsFile: string, callerEnv: Record<string, string> = {}): Record<string, string> {
  const output = execFileSync(
    'bash',
    ['-c', `set -euo pipefail; source "$0"; load_secrets "$1"; mapfile -t args < <(service_env "$2"); env "\${args[@]}" env -0`, script, secretsFile, who],
    { env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...callerEnv } },
  ).toString('utf8');
  return Object.fromEntries(
    output
      .split('\0')
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

describe('make up secrets', () => {
  const file = join(dir, 'secrets.env');
  writeFileSync(file, '');
  execFileSync('bash', ['-c', 'source "$0"; generate_secrets "$1"', script, file]);
  const generated = Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );

  it('generates every secret once, mode 600, and adds only missing ones to an older file', () => {
    expect(statSync(file).mode & 0o777).toBe(0o600);
    for (const name of ['ADMIN_TOKEN', 'API_KEY_DIGEST_SECRET', 'ENCRYPTION_KEYS', 'BOOTSTRAP_SECRET_KEY', ...SERVICES.map(passwordName)]) {
      expect(generated[name]?.length).toBeGreaterThanOrEqual(32);
    }
    // NATS reads its passwords as config values: a leading digit or '-' would make a number.
    for (const service of SERVICES) expect(generated[passwordName(service)]).toMatch(/^[A-Za-z][A-Za-z0-9_-]+$/);
    const older = join(dir, 'older.env');
    writeFileSync(older, 'ADMIN_TOKEN=kept-admin-token-0123456789abcdefghijklmnop\n');
    execFileSync('bash', ['-c', 'source "$0"; generate_secrets "$1"', script, older]);
    const lines = readFileSync(older, 'utf8').split('\n');
    expect(lines[0]).toBe('ADMIN_TOKEN=kept-admin-token-0123456789abcdefghijklmnop');
    expect(lines.filter((line) => line.startsWith('ADMIN_TOKEN='))).toHaveLength(1);
    expect(lines.some((line) => line.startsWith(`${passwordName('proxy')}=`))).toBe(true);
  });

  it('reads a value ending in "=" whole, so every way of starting a service sees the same digest secret', () => {
    const withPadding = join(dir, 'padding.env');
    const digest = 'q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq8=';
    writeFileSync(withPadding, `API_KEY_DIGEST_SECRET=${digest}\nENCRYPTION_KEYS=v1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n${passwordName('gateway')}=pw-a=b==\n`);
    const gateway = environmentOf('gateway', withPadding);
    expect(gateway['API_KEY_DIGEST_SECRET']).toBe(digest);
    expect(gateway['NATS_PASSWORD']).toBe('pw-a=b==');
    expect(environmentOf('credential-vault', withPadding, { [passwordName('credential-vault')]: 'vault-pw' })['ENCRYPTION_KEYS']).toBe(
      'v1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=',
    );
  });

  it('gives each service only its own secrets and NATS password, even when the caller exported them all', () => {
    const everything = { ...generated, NATS_PASSWORD: 'exported-by-the-caller' };
    for (const service of SERVICES) {
      const env = environmentOf(service, file, everything);
      const secretNames = Object.keys(env).filter((name) => name in everything);
      expect(secretNames.sort()).toEqual([...(OWN[service] ?? []), 'NATS_PASSWORD'].filter((name) => name === 'NATS_PASSWORD' || name in generated).sort());
      expect(env['NATS_PASSWORD']).toBe(generated[passwordName(service)]);
      for (const name of OWN[service] ?? []) if (name in generated) expect(env[name]).toBe(generated[name]);
    }
  });

  it('gives NATS the services’ passwords and nothing else, and FerretDB no secret', () => {
    const nats = environmentOf('nats', file, generated);
    expect(Object.keys(nats).filter((name) => name in generated).sort()).toEqual(SERVICES.map(passwordName).sort());
    expect(Object.keys(environmentOf('none', file, generated)).filter((name) => name in generated)).toEqual([]);
  });

  it('gives the MongoDB URI, which may carry a password, to every service but the proxy, which stores nothing', () => {
    const database = { MONGODB_URI: 'mongodb://user:password@127.0.0.1:27018/?directConnection=true', MONGODB_DB: 'chosen' };
    for (const service of SERVICES) {
      const env = environmentOf(service, file, database);
      expect({ service, uri: env['MONGODB_URI'], db: env['MONGODB_DB'] }).toEqual(service === 'proxy' ? { service } : { service, uri: database.MONGODB_URI, db: database.MONGODB_DB });
    }
  });

  it('lets the caller’s environment win over the file', () => {
    expect(environmentOf('gateway', file, { ADMIN_TOKEN: 'from-the-shell-0123456789abcdefghijklmnopq' })['ADMIN_TOKEN']).toBe(
      'from-the-shell-0123456789abcdefghijklmnopq',
    );
  });
});
