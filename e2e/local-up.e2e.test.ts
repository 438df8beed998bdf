import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '@latchkey/testing';
import { baseEnvironment, isAlive, localRun, type LocalRun } from './support/local-run.js';

// The README's first command: `make up` (deploy/local/up.sh, once `make` has built) on a fresh
// data folder starts NATS, FerretDB and the six services, prints a key that works, and `make
// down` stops exactly what it started. It runs in a folder of its own (`localRun`), on free
// ports; the services' probe and metrics ports, fixed by default, are turned off for the same
// reason: a `make up` of the developer's own is not in its way.

let local: LocalRun;
let env: Record<string, string>;
let port: number;

beforeAll(async () => {
  local = localRun();
  port = await freePort();
  env = {
    ...baseEnvironment(),
    PORT: String(port),
    LOCAL_NATS_PORT: String(await freePort()),
    LOCAL_MONGODB_PORT: String(await freePort()),
    HEALTH_PORT: '0',
    METRICS_PORT: '0',
  };
});

afterAll(async () => {
  if (!local) return;
  // Whatever a failed case left running is stopped before the folder goes.
  if (local.recorded('run').some((proc) => proc.alive)) await local.run('down', env);
  local.remove();
}, 60_000);

describe('make up and make down', () => {
  it('starts the whole system on its embedded defaults, prints a key that works, and stops everything it started', async () => {
    const up = await local.run('up', env);
    expect({ code: up.code, stderr: up.stderr }).toEqual({ code: 0, stderr: '' });
    expect(up.stdout).toContain('Generating local secrets in .data/secrets.env');
    expect(up.stdout).toContain('Latchkey is up.');
    const key = /API key:\s+(lk_sk_\S+)/.exec(up.stdout)?.[1];
    expect(key).toBeDefined();
    expect(local.recorded('run').map((proc) => proc.name).sort()).toEqual(
      ['action-runner', 'credential-vault', 'ferretdb', 'gateway', 'nats', 'proxy', 'sync-scheduler', 'webhook-router'].sort(),
    );

    // The printed key is the bootstrap environment's full-access key, kept in the secrets file.
    const listed = await fetch(`http://127.0.0.1:${port}/environment-variables`, { headers: { authorization: `Bearer ${key}` } });
    expect(listed.status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/environment-variables`, { headers: { authorization: 'Bearer lk_sk_wrong' } })).status).toBe(401);
    expect(readFileSync(join(local.root, '.data', 'secrets.env'), 'utf8')).toContain(`BOOTSTRAP_SECRET_KEY=${key}`);

    // A second `make up` while it runs refuses, and starts nothing.
    const again = await local.run('up', env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already running');

    const pids = local.recorded('run');
    expect(pids.every((proc) => proc.alive)).toBe(true);
    expect((await local.run('down', env)).code).toBe(0);
    expect(local.recorded('run')).toEqual([]);
    expect(pids.filter((proc) => isAlive(proc.pid))).toEqual([]);
  }, 180_000);

  it('says at once which service could not start, and why, rather than waiting out the minute', async () => {
    const started = Date.now();
    const up = await local.run('up', { ...env, PROVIDERS_FILE: join(local.root, 'no-such-providers.yaml') });
    expect(up.code).toBe(1);
    expect(up.stderr).toContain('credential-vault exited while starting');
    expect(up.stderr).toContain('no-such-providers.yaml');
    expect(up.stderr).not.toContain('did not become ready within 60 s');
    expect(Date.now() - started).toBeLessThan(50_000);
    expect((await local.run('down', env)).code).toBe(0);
    expect(local.recorded('run')).toEqual([]);
  }, 120_000);
});
