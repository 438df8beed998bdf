import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { natsPasswordVariable, renderNatsAuthorization } from '@latchkey/contracts';

/**
 * The deployment files must give every service the settings its config.ts reads, with required
 * secrets only ever referenced (never written down) and each secret given only to its service.
 * Docker is not needed: this reads the files as data.
 */

interface ComposeService {
  image?: string;
  build?: { context?: string; dockerfile?: string; args?: Record<string, string> };
  environment?: Record<string, string | null>;
  ports?: string[];
  depends_on?: Record<string, { condition?: string }>;
  restart?: string;
  stop_grace_period?: string;
}

interface HelmValues {
  services: Record<
    string,
    { replicas?: unknown; port?: unknown; env?: Record<string, string>; secretEnv?: Array<{ name: string; key?: string }>; resources?: { requests?: { memory?: string }; limits?: { memory?: string } } }
  >;
}

function readYaml<T>(relativePath: string): T {
  // merge: Compose files share settings through `<<: *anchor`, a YAML 1.1 feature.
  return parse(readFileSync(new URL(relativePath, import.meta.url), 'utf8'), { merge: true }) as T;
}

const compose = readYaml<{ services: Record<string, ComposeService> }>('../docker-compose.yml');
const helmValues = readYaml<HelmValues>('./helm/latchkey/values.yaml');

const SERVICES = ['gateway', 'credential-vault', 'proxy', 'sync-scheduler', 'action-runner', 'webhook-router'];
const COMMON = ['NATS_URL', 'NATS_PASSWORD', 'LOG_LEVEL', 'REQUEST_TIMEOUT_MS', 'SHUTDOWN_TIMEOUT_MS'];
/** Services with a database of their own; the proxy stores nothing. */
const DATABASE_USERS = SERVICES.filter((name) => name !== 'proxy');
/** Settings several services read and must agree on → the services that read each. */
const SHARED_SETTINGS: Record<string, string[]> = {
  FUNCTION_TIMEOUT_MS: ['gateway', 'action-runner'],
  PROXY_TIMEOUT_MS: ['gateway', 'proxy', 'action-runner'],
  PROXY_ALLOW_CIDRS: ['proxy', 'credential-vault'],
};
const HEALTH_PORTS: Record<string, string> = {
  'credential-vault': '3010',
  proxy: '3011',
  'sync-scheduler': '3012',
  'action-runner': '3013',
  'webhook-router': '3014',
};
const GATEWAY_SETTINGS = ['PORT', 'BOOTSTRAP_ENVIRONMENT', 'RATE_LIMIT_PER_MINUTE', 'MAX_BODY_BYTES'];
/** Services that build public links from PUBLIC_URL (the vault: providers' logo URLs). */
const PUBLIC_URL_READERS = ['gateway', 'credential-vault', 'action-runner'];
/** Secret → the one service that reads it, and whether it must be set. */
const SECRETS: Record<string, { service: string; required: boolean }> = {
  ADMIN_TOKEN: { service: 'gateway', required: true },
  API_KEY_DIGEST_SECRET: { service: 'gateway', required: true },
  BOOTSTRAP_SECRET_KEY: { service: 'gateway', required: false },
  ENCRYPTION_KEYS: { service: 'credential-vault', required: true },
  SETTINGS_ENCRYPTION_KEYS: { service: 'gateway', required: true },
};

function service(name: string): ComposeService {
  const found = compose.services[name];
  if (!found) throw new Error(`docker-compose.yml has no service ${name}`);
  return found;
}

function environment(name: string): Record<string, string | null> {
  return service(name).environment ?? {};
}

function expectedVariables(name: string): string[] {
  const own = name === 'gateway' ? GATEWAY_SETTINGS : ['HEALTH_PORT'];
  const publicUrl = PUBLIC_URL_READERS.includes(name) ? ['PUBLIC_URL'] : [];
  const database = DATABASE_USERS.includes(name) ? ['MONGODB_URI', 'MONGODB_DB'] : [];
  const shared = Object.keys(SHARED_SETTINGS).filter((setting) => SHARED_SETTINGS[setting]?.includes(name));
  const secrets = Object.keys(SECRETS).filter((secret) => SECRETS[secret]?.service === name);
  return [...COMMON, ...own, ...database, ...publicUrl, ...shared, ...secrets];
}

describe('docker-compose.yml', () => {
  it('runs MongoDB, NATS and the six services', () => {
    expect(Object.keys(compose.services).sort()).toEqual(['mongo', 'nats', ...SERVICES].sort());
    expect(service('mongo').image).toMatch(/^mongo:7/);
    expect(service('nats').image).toMatch(/^nats:2\.10/);
  });

  it.each(SERVICES)('builds %s from deploy/Dockerfile with its SERVICE arg', (name) => {
    expect(service(name).build).toEqual({ context: '.', dockerfile: 'deploy/Dockerfile', args: { SERVICE: name } });
  });

  it.each(SERVICES)('gives %s every variable it reads', (name) => {
    const env = environment(name);
    expect(Object.keys(env).sort()).toEqual(expect.arrayContaining(expectedVariables(name).sort()));
    if (DATABASE_USERS.includes(name)) {
      expect(env['MONGODB_DB']).toBe(`latchkey_${name.replace(/-/g, '_')}`);
      expect(env['MONGODB_URI']).toMatch(/^mongodb:\/\/mongo:27017\/.*directConnection=true/);
    }
    expect(env['NATS_URL']).toBe('nats://nats:4222');
    if (name !== 'gateway') expect(env['HEALTH_PORT']).toBe(HEALTH_PORTS[name]);
  });

  it('gives every service that builds public links the same PUBLIC_URL', () => {
    for (const name of PUBLIC_URL_READERS) expect(environment(name)['PUBLIC_URL']).toBe('${PUBLIC_URL:-http://localhost:3003}');
  });

  it('gives the proxy, which stores nothing, no MongoDB URI or database, and does not wait for MongoDB to start it', () => {
    expect(Object.keys(environment('proxy'))).not.toContain('MONGODB_URI');
    expect(Object.keys(environment('proxy'))).not.toContain('MONGODB_DB');
    expect(service('proxy').depends_on).toEqual({ nats: { condition: 'service_healthy' } });
  });

  it.each(Object.entries(SHARED_SETTINGS))('gives %s, which its readers must agree on, to each of them from one variable', (setting, readers) => {
    const values = SERVICES.map((name) => environment(name)[setting]);
    expect(values).toEqual(SERVICES.map((name) => (readers.includes(name) ? expect.stringMatching(new RegExp(`^\\$\\{${setting}:-[^}]*\\}$`)) : undefined)));
    expect(new Set(values.filter((value) => value !== undefined)).size).toBe(1);
  });

  it('lets a started async action of the action-runner finish within its drain, and the proxy its upstream call', () => {
    const runner = environment('action-runner');
    const functionTimeoutMs = Number(/^\$\{FUNCTION_TIMEOUT_MS:-(\d+)\}$/.exec(runner['FUNCTION_TIMEOUT_MS'] ?? '')?.[1]);
    // Async actions still running 3 s before the drain ends are handed back and run again.
    expect(Number(runner['SHUTDOWN_TIMEOUT_MS'])).toBeGreaterThanOrEqual(functionTimeoutMs + 3000 + 5000);
    const proxyTimeoutMs = Number(/^\$\{PROXY_TIMEOUT_MS:-(\d+)\}$/.exec(environment('proxy')['PROXY_TIMEOUT_MS'] ?? '')?.[1]);
    expect(Number(environment('proxy')['SHUTDOWN_TIMEOUT_MS'])).toBeGreaterThanOrEqual(proxyTimeoutMs + 10_000);
  });

  it.each(Object.entries(SECRETS))('only references %s, in its own service', (secret, { service: owner, required }) => {
    const value = environment(owner)[secret];
    // Required: ${NAME:?message}, so Compose refuses to start without it. Optional: ${NAME:-}.
    expect(value).toMatch(required ? new RegExp(`^\\$\\{${secret}:\\?[^}]+\\}$`) : new RegExp(`^\\$\\{${secret}(:-)?\\}$`));
    for (const other of SERVICES.filter((name) => name !== owner)) {
      expect(Object.keys(environment(other))).not.toContain(secret);
    }
  });

  it.each(SERVICES)('logs %s in to NATS with its own password, which NATS alone also gets', (name) => {
    const variable = natsPasswordVariable(name);
    expect(environment(name)['NATS_PASSWORD']).toMatch(new RegExp(`^\\$\\{${variable}:\\?[^}]+\\}$`));
    for (const other of SERVICES.filter((candidate) => candidate !== name)) {
      expect(Object.values(environment(other)).join('\n')).not.toContain(variable);
    }
    expect(environment('nats')[variable]).toMatch(new RegExp(`^\\$\\{${variable}:\\?[^}]+\\}$`));
  });

  it('runs NATS with the authorization generated from the contracts, and gives it no other secret', () => {
    expect(Object.keys(environment('nats')).sort()).toEqual(SERVICES.map(natsPasswordVariable).sort());
    expect((service('nats') as { volumes?: string[] }).volumes).toContain('./deploy/nats/auth.conf:/etc/nats/auth.conf:ro');
    expect(readFileSync(new URL('./nats/nats.conf', import.meta.url), 'utf8')).toMatch(/^include "auth\.conf"$/m);
  });

  it('publishes the gateway on 3003 and nothing else', () => {
    expect(service('gateway').ports).toEqual(['3003:3003']);
    for (const name of ['mongo', 'nats', ...SERVICES.filter((other) => other !== 'gateway')]) {
      expect(service(name).ports).toBeUndefined();
    }
  });

  it.each(SERVICES)('starts %s after healthy NATS (and MongoDB, if it has a database), restarts it, and lets it drain', (name) => {
    const { depends_on: dependsOn, restart, stop_grace_period: grace } = service(name);
    const mongo = DATABASE_USERS.includes(name) ? { mongo: { condition: 'service_healthy' } } : {};
    expect(dependsOn).toEqual({ ...mongo, nats: { condition: 'service_healthy' } });
    expect(restart).toBe('unless-stopped');
    const graceSeconds = Number(/^(\d+)s$/.exec(grace ?? '')?.[1]);
    expect(graceSeconds * 1000).toBeGreaterThan(Number(environment(name)['SHUTDOWN_TIMEOUT_MS']));
  });
});

describe('NATS authorization', () => {
  // Generated files: a contract added without regenerating them (npm run nats-auth) fails here.
  it.each(['./nats/auth.conf', './helm/latchkey/files/nats-auth.conf'])('%s is what the contracts generate', (file) => {
    expect(readFileSync(new URL(file, import.meta.url), 'utf8')).toBe(renderNatsAuthorization());
  });
});

describe('helm values.yaml', () => {
  it.each(SERVICES)('gives %s its own NATS password and no other', (name) => {
    const entries = (helmValues.services[name]?.secretEnv ?? []).filter((entry) => entry.name === 'NATS_PASSWORD' || entry.key?.startsWith('LATCHKEY_NATS_PASSWORD_'));
    expect(entries).toEqual([{ name: 'NATS_PASSWORD', key: natsPasswordVariable(name) }]);
  });

  it('requests for the action-runner the memory its runs take at full concurrency', () => {
    // Scheduled on less, a node fills up with runners that each grow to their limit, and the
    // kernel kills them mid-run.
    const mebibytes = (quantity: string | undefined) => {
      const [, amount, unit] = /^(\d+)(Mi|Gi)$/.exec(quantity ?? '') ?? [];
      return Number(amount) * (unit === 'Gi' ? 1024 : 1);
    };
    const runner = helmValues.services['action-runner'];
    const heapMb = Number(/--max-old-space-size=(\d+)/.exec(runner?.env?.['NODE_OPTIONS'] ?? '')?.[1]);
    const runsMb = Number(runner?.env?.['FUNCTION_MEMORY_MB']) * Number(runner?.env?.['FUNCTION_CONCURRENCY']);
    expect(mebibytes(runner?.resources?.requests?.memory)).toBeGreaterThanOrEqual(heapMb + runsMb);
    expect(mebibytes(runner?.resources?.limits?.memory)).toBeGreaterThanOrEqual(mebibytes(runner?.resources?.requests?.memory));
  });

  it('lists the six services, each with a replica count and its port', () => {
    expect(Object.keys(helmValues.services).sort()).toEqual([...SERVICES].sort());
    for (const name of SERVICES) {
      const values = helmValues.services[name];
      expect(Number.isInteger(values?.replicas)).toBe(true);
      expect(values?.replicas).toBeGreaterThanOrEqual(1);
      expect(String(values?.port)).toBe(name === 'gateway' ? '3003' : HEALTH_PORTS[name]);
    }
  });
});

describe('Node 24 everywhere', () => {
  const read = (relativePath: string) => readFileSync(new URL(relativePath, import.meta.url), 'utf8');

  it('builds every stage of deploy/Dockerfile from the Node 24 base image', () => {
    const dockerfile = read('./Dockerfile');
    expect(/^ARG NODE_IMAGE=(\S+)$/m.exec(dockerfile)?.[1]).toBe('node:24-bookworm-slim');
    // Each FROM names the base image or a stage built from it above, never another image.
    const stages: string[] = [];
    for (const [, from, stage] of dockerfile.matchAll(/^FROM (\S+)(?: AS (\S+))?$/gm)) {
      expect(from === '${NODE_IMAGE}' || stages.includes(from!)).toBe(true);
      if (stage) stages.push(stage);
    }
    expect(stages).toContain('runtime');
  });

  it('asks for Node 24 in engines and installs Node 24 for local runs', () => {
    const root = JSON.parse(read('../package.json')) as { engines?: { node?: string } };
    expect(root.engines?.node).toBe('>=24');
    expect(/^NODE_VERSION=(\d+)\.\d+\.\d+$/m.exec(read('./local/node.sh'))?.[1]).toBe('24');
  });
});
