import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { canBind } from '@latchkey/testing';
import { baseEnvironment, isAlive, localRun, type LocalRun } from './support/local-run.js';

// `make cluster-up` (deploy/local/cluster-up.sh): three NATS nodes, FerretDB on PostgreSQL and
// two replicas of every service come up, both gateways serve one system, and `make cluster-down`
// stops every process and drops the run's database. Its ports are fixed; CLUSTER_PORT_OFFSET
// moves them all, here to a block where nothing listens, in a folder of its own (`localRun`).

const POSTGRES = process.env['CLUSTER_POSTGRES_URL'] ?? 'postgres://postgres@127.0.0.1:5432';
/** Every port the cluster takes, at offset 0. */
const PORTS = [4331, 4332, 4333, 6331, 6332, 6333, 8331, 8332, 8333, 27019, 3303, 3304, 9465, 9466, 3310, 3311, 3312, 3313, 3314, 3320, 3321, 3322, 3323, 3324];

let local: LocalRun;
let env: Record<string, string>;
let offset: number;

/** The PostgreSQL databases the cluster runs made, by name. */
const clusterDatabases = () =>
  execFileSync('psql', [`${POSTGRES}/postgres`, '-qAtc', "SELECT datname FROM pg_database WHERE datname LIKE 'latchkey_cluster_%'"], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);

beforeAll(async () => {
  local = localRun();
  offset = -1;
  for (const candidate of [1000, 2000, 12000, 14000]) {
    if ((await Promise.all(PORTS.map((port) => canBind(port + candidate)))).every(Boolean)) {
      offset = candidate;
      break;
    }
  }
  if (offset < 0) throw new Error('no block of free ports for the cluster');
  env = { ...baseEnvironment(), CLUSTER_PORT_OFFSET: String(offset), CLUSTER_POSTGRES_URL: POSTGRES };
});

afterAll(async () => {
  if (!local) return;
  if (local.recorded('cluster/run').some((proc) => proc.alive)) await local.run('cluster-down', env);
  local.remove();
}, 120_000);

describe('make cluster-up and make cluster-down', () => {
  it('starts every replica, serves one system through both gateways, and stops it all, its database dropped', async () => {
    const before = clusterDatabases();
    const up = await local.run('cluster-up', env);
    expect({ code: up.code, stderr: up.stderr }).toEqual({ code: 0, stderr: '' });
    expect(up.stdout).toContain('Latchkey is up as a cluster.');
    const gateways = [3303 + offset, 3304 + offset].map((port) => `http://127.0.0.1:${port}`);
    expect(up.stdout).toContain(`Metrics:  the gateways' on ${9465 + offset} and ${9466 + offset}`);
    const key = /API key:\s+(lk_sk_\S+)/.exec(up.stdout)?.[1];
    expect(key).toBeDefined();
    // Three NATS nodes, FerretDB, and two of each of the six services.
    const started = local.recorded('cluster/run');
    expect(started.length).toBe(16);
    expect(started.every((proc) => proc.alive)).toBe(true);
    const [database] = clusterDatabases().filter((name) => !before.includes(name));
    expect(database).toBeDefined();

    // What one gateway stores, the other serves; each replica's metrics port answers.
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${gateways[0]}/integrations`, { method: 'POST', headers, body: JSON.stringify({ provider: 'github', unique_key: 'github' }) });
    expect(created.status).toBe(201);
    const read = await fetch(`${gateways[1]}/integrations/github`, { headers });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ data: { unique_key: 'github', provider: 'github' } });
    for (const port of [9465, 9466, 3310, 3324]) expect((await fetch(`http://127.0.0.1:${port + offset}/metrics`)).status).toBe(200);

    const down = await local.run('cluster-down', env);
    expect(down.code).toBe(0);
    expect(down.stdout).toContain(`dropped PostgreSQL database ${database}`);
    expect(local.recorded('cluster/run')).toEqual([]);
    expect(started.filter((proc) => isAlive(proc.pid))).toEqual([]);
    expect(clusterDatabases()).not.toContain(database);
  }, 300_000);
});
