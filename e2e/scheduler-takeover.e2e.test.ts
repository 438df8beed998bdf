import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Latchkey, LatchkeyError, type SyncStatus } from '@latchkey/client';
import { repoRoot } from '@latchkey/testing';
import { deployWithCli, eventually } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack, type StackProcess } from './support/stack.js';

/**
 * Two sync-scheduler replicas with the default lease timings (`SCHEDULER_LEASE_MS` 6 s,
 * `SCHEDULER_TICK_MS` 1 s): the one holding the lease is killed without warning, and the other
 * must be queuing the schedule's runs within 10 s. The sync `beat`
 * (`e2e/scheduler-functions/clock/beat.ts`) runs every 2 seconds, so a gap in scheduling shows
 * at once, and only the scheduler queues its runs (the test never triggers one).
 */
const FUNCTIONS_DIR = join(repoRoot(), 'e2e', 'scheduler-functions');
const INTERVAL_MS = 2000;
const TAKEOVER_LIMIT_MS = 10_000;

let stack: Stack;
let client: Latchkey;
let upstream: Server;
/** When the upstream was called: each call is one run of `beat` executing. */
const beats: number[] = [];

async function startUpstream(): Promise<string> {
  upstream = createServer((req, res) => {
    if (req.headers['x-api-key'] !== 'clock-key' || req.url !== '/beat') {
      res.writeHead(req.headers['x-api-key'] === 'clock-key' ? 404 : 401).end();
      return;
    }
    beats.push(Date.now());
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: beats.length }));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
}

async function beatStatus(): Promise<SyncStatus | undefined> {
  const { syncs } = await client.syncStatus('clock', ['beat'], 'conn-1');
  return syncs.find((entry) => entry.variant === 'base');
}

/**
 * `beatStatus` while a replica is being killed: a request NATS handed to the killed replica just
 * before the server saw its connection close is never answered, and the gateway says 503
 * `service_unavailable` after its deadline. That answer is the documented "try again", so it
 * reads as "not yet"; any other error fails the test.
 */
async function beatStatusDuringTakeover(): Promise<SyncStatus | undefined> {
  try {
    return await beatStatus();
  } catch (error) {
    if (error instanceof LatchkeyError && error.status === 503 && error.code === 'service_unavailable') return undefined;
    throw error;
  }
}

/**
 * The process the operator API names as the scheduling one (`<host>/<pid>/<random>`), or
 * undefined while nobody holds the lease.
 */
async function leaseHolder(): Promise<StackProcess | undefined> {
  const answer = await http(`${stack.url}/admin/sync-scheduler`, { token: stack.adminToken });
  expect(answer.status).toBe(200);
  const leader = answer.json.data.leader as string | null;
  if (leader === null) return undefined;
  const pid = Number(leader.split('/')[1]);
  return schedulers().find((proc) => proc.child.pid === pid);
}

const schedulers = () => stack.services.filter((proc) => proc.service === 'sync-scheduler');

beforeAll(async () => {
  const upstreamUrl = await startUpstream();
  stack = await startStack({
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstreamUrl)), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
    replicas: { 'sync-scheduler': 2 },
    // Only the frequency floor is lowered (to run every 2 s); the lease and tick keep their defaults.
    serviceEnv: { 'sync-scheduler': { SYNC_MIN_FREQUENCY_MS: '1000' } },
  });
  client = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
  await seedApiKeyConnection(stack, 'clock', 'conn-1', 'clock-key');
  await deployWithCli(FUNCTIONS_DIR, stack);
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  upstream?.close();
});

it('kills the sync-scheduler holding the lease: the other replica takes it and queues the next run within 10 s', async () => {
  expect(schedulers()).toHaveLength(2);
  // The schedule runs every 2 s under the first holder.
  await eventually(async () => (beats.length >= 3 ? true : undefined), 20_000, 'three scheduled runs');
  const holder = (await leaseHolder())!;
  expect(holder).toBeDefined();
  const survivor = schedulers().find((proc) => proc !== holder)!;

  // Kill it just after a run finished, so that no run is half-queued (a queued run whose job was
  // never published would hold its schedule's slot until SYNC_RUN_STALE_MS).
  const seen = beats.length;
  const finished = await eventually(
    async () => {
      const status = await beatStatus();
      return beats.length > seen && status?.status === 'SUCCESS' ? status : undefined;
    },
    10_000,
    'a finished run',
  );
  const exited = new Promise((resolve) => holder.child.once('exit', resolve));
  const killedAt = Date.now();
  holder.child.kill('SIGKILL');
  await exited;
  const dueBeforeKill = Date.parse(finished.nextScheduledSyncAt!);

  // A run queued after the kill can only come from the survivor: queuing sets the next run one
  // interval later, so nextScheduledSyncAt moves past killedAt + INTERVAL_MS.
  const queued = await eventually(
    async () => {
      const status = await beatStatusDuringTakeover();
      const next = status?.nextScheduledSyncAt ? Date.parse(status.nextScheduledSyncAt) : 0;
      return next - INTERVAL_MS > killedAt ? next - INTERVAL_MS : undefined;
    },
    TAKEOVER_LIMIT_MS + 5000,
    'a run queued after the kill',
  );
  expect(queued - killedAt).toBeLessThan(TAKEOVER_LIMIT_MS);
  // It was due before the takeover: the gap is the lease expiring, not the schedule.
  expect(dueBeforeKill).toBeLessThan(queued);
  expect(await leaseHolder()).toBe(survivor);

  // The run queued by the survivor executes, and the schedule keeps its pace afterwards.
  await eventually(async () => (beats.some((at) => at >= queued) ? true : undefined), 10_000, 'the run queued by the survivor to execute');
  const after = await eventually(
    async () => {
      const status = await beatStatus();
      return status?.finishedAt && Date.parse(status.finishedAt) > queued && status.status === 'SUCCESS' ? status : undefined;
    },
    10_000,
    'the run queued by the survivor to finish',
  );
  expect(after.latestError).toBeNull();
  const runsAfter = beats.length;
  await new Promise((resolve) => setTimeout(resolve, 3 * INTERVAL_MS + 500));
  expect(beats.length - runsAfter).toBeGreaterThanOrEqual(2);
  expect(survivor.child.exitCode).toBeNull();
}, 90_000);
