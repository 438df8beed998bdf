import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, repoRoot } from '@latchkey/testing';

// The README's first command: `make up` (deploy/local/up.sh, once `make` has built) on a fresh
// data folder starts NATS, FerretDB and the six services, prints a key that works, and `make
// down` stops exactly what it started. It runs in a folder of its own, whose code is this
// checkout's (linked) and whose `.data/` is new, on free ports, so a `make up` of the developer's
// own is neither in its way nor touched. The services' probe and metrics ports, fixed by default,
// are turned off here for the same reason.

let root: string;
let env: Record<string, string>;
let port: number;

function run(script: 'up' | 'down'): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('bash', [join(root, 'deploy', 'local', `${script}.sh`)], { env, timeout: 120_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** The pids `make up` recorded, and whether each process still runs. */
function recorded(): Array<{ name: string; pid: number; alive: boolean }> {
  const dir = join(root, '.data', 'run');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((file) => file.endsWith('.pid'))
    .map((file) => {
      const pid = Number(readFileSync(join(dir, file), 'utf8'));
      let alive = true;
      try {
        process.kill(pid, 0);
      } catch {
        alive = false;
      }
      return { name: file.replace(/\.pid$/, ''), pid, alive };
    });
}

beforeAll(async () => {
  const checkout = repoRoot();
  root = mkdtempSync(join(tmpdir(), 'latchkey-up-'));
  for (const entry of ['deploy', 'services', 'libs', 'packages', 'node_modules']) symlinkSync(join(checkout, entry), join(root, entry));
  mkdirSync(join(root, '.data'), { mode: 0o700 });
  symlinkSync(join(checkout, '.data', 'bin'), join(root, '.data', 'bin'));
  port = await freePort();
  env = {
    PATH: process.env['PATH'] ?? '',
    HOME: process.env['HOME'] ?? root,
    // The Node 24 running this test: nothing to install into the new folder.
    LATCHKEY_NODE: process.execPath,
    PORT: String(port),
    LOCAL_NATS_PORT: String(await freePort()),
    LOCAL_MONGODB_PORT: String(await freePort()),
    HEALTH_PORT: '0',
    METRICS_PORT: '0',
  };
});

afterAll(async () => {
  if (!root) return;
  // Whatever a failed case left running is stopped before the folder goes.
  if (recorded().some((proc) => proc.alive)) await run('down');
  rmSync(root, { recursive: true, force: true });
}, 60_000);

describe('make up and make down', () => {
  it('starts the whole system on its embedded defaults, prints a key that works, and stops everything it started', async () => {
    const up = await run('up');
    expect({ code: up.code, stderr: up.stderr }).toEqual({ code: 0, stderr: '' });
    expect(up.stdout).toContain('Generating local secrets in .data/secrets.env');
    expect(up.stdout).toContain('Latchkey is up.');
    const key = /API key:\s+(lk_sk_\S+)/.exec(up.stdout)?.[1];
    expect(key).toBeDefined();
    expect(recorded().map((proc) => proc.name).sort()).toEqual(
      ['action-runner', 'credential-vault', 'ferretdb', 'gateway', 'nats', 'proxy', 'sync-scheduler', 'webhook-router'].sort(),
    );

    // The printed key is the bootstrap environment's full-access key, and the secrets stay private.
    const listed = await fetch(`http://127.0.0.1:${port}/environment-variables`, { headers: { authorization: `Bearer ${key}` } });
    expect(listed.status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/environment-variables`, { headers: { authorization: 'Bearer lk_sk_wrong' } })).status).toBe(401);
    expect(readFileSync(join(root, '.data', 'secrets.env'), 'utf8')).toContain(`BOOTSTRAP_SECRET_KEY=${key}`);

    // A second `make up` while it runs refuses, and starts nothing.
    const again = await run('up');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already running');

    const pids = recorded();
    expect(pids.every((proc) => proc.alive)).toBe(true);
    const down = await run('down');
    expect(down.code).toBe(0);
    expect(recorded()).toEqual([]);
    for (const { pid } of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 180_000);
});
