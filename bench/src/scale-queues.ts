import { createHmac } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import mongoose from 'mongoose';
import type { Bus } from '@latchkey/bus';
import { syncContracts, webhookContracts } from '@latchkey/contracts';

/**
 * `make bench-scale`'s webhooks and scheduler parts: backlogs drained by the webhook router, and
 * the sync-scheduler's tick with many schedules due at once.
 * - Inbound webhooks: N signed provider webhooks go through the gateway's public route
 *   (`POST /webhook/{environment}/{integration}`, 64 in flight) while the router is stopped, so
 *   they wait on JOBS; then the router starts and forwards each to a receiver on loopback.
 * - Customer deliveries: N `jobs.webhook.deliver` jobs are published straight onto JetStream with
 *   the router's own NATS identity (the only one allowed to, and far faster than making N events
 *   that the router turns into deliveries), again while it is stopped; then it starts and sends them.
 *   For both: the drain's milliseconds per 1,000 webhooks (from the first to the last received,
 *   so the router's start is left out) and the router's peak RSS (VmHWM, /proc/<pid>/status).
 * - Scheduler: N schedules due at once go into `sync_schedules` in the scheduler's shape while the
 *   scheduler is stopped; once it is back, its first tick's figures (`GET /admin/sync-scheduler`):
 *   the due query and the whole tick per run queued (a tick queues 500 at most); then, once every
 *   due run is queued, the due query of a tick that finds nothing (what every idle second costs).
 *   Then N more are written while it leads and announced as its repo does (`sync.schedule.changed`
 *   with the scheduler's identity): the due query per schedule read and the tick per run queued
 *   of the first tick that finds them (no full read: the tick of a leader in its steady state).
 */
export interface QueueBench {
  mongoUri: string;
  schedulerDb: string;
  environmentId: string;
  /** The router's NATS identity, for loading deliveries. */
  routerBus: Bus;
  /** The scheduler's, for announcing schedules written in bulk (`sync.schedule.changed`). */
  schedulerBus: Bus;
  gatewayUrl: string;
  api(method: string, path: string, body?: unknown): Promise<unknown>;
  admin(method: string, path: string, body?: unknown): Promise<unknown>;
  /** Starts a service (the same database on a restart). */
  startService(service: 'webhook-router' | 'sync-scheduler'): ChildProcess;
  /** Stops it (SIGTERM: it drains and gives up its lease) and waits for its exit. */
  stopService(child: ChildProcess): Promise<void>;
  record(name: string, size: number, value: number): void;
  note(text: string): void;
}

const INTEGRATION = 'scale-hooks';
const IN_FLIGHT = 64;
const BULK = 5000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A customer's receiver on loopback: counts what arrives, and when the first and last came. */
async function startReceiver() {
  const state = { count: 0, first: 0, last: 0 };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const now = performance.now();
      if (state.count === 0) state.first = now;
      state.count += 1;
      state.last = now;
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    state,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    reset: () => Object.assign(state, { count: 0, first: 0, last: 0 }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Peak resident memory of a process, in MiB (the kernel's high-water mark). */
function peakRssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((item) => item.startsWith('VmHWM:'));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

/** Runs the router until the receiver has `count` webhooks; records the drain's cost and the router's memory. */
async function drain(bench: QueueBench, receiver: Awaited<ReturnType<typeof startReceiver>>, what: string, count: number): Promise<void> {
  receiver.reset();
  const router = bench.startService('webhook-router');
  const deadline = Date.now() + 60 * 60_000;
  let peak = 0;
  try {
    while (receiver.state.count < count) {
      if (Date.now() > deadline || router.exitCode !== null) throw new Error(`${what}: ${receiver.state.count} of ${count} arrived`);
      // The high-water mark is read while the router lives; it only grows.
      peak = peakRssMiB(router.pid!);
      await sleep(100);
    }
    peak = peakRssMiB(router.pid!);
  } finally {
    await bench.stopService(router);
  }
  const ms = receiver.state.last - receiver.state.first;
  bench.record(`${what}: drain, ms per 1,000`, count, (ms / Math.max(count - 1, 1)) * 1000);
  bench.record(`${what}: router peak RSS, MiB`, count, peak);
  bench.note(`${what}: ${count} drained at ${Math.round(((count - 1) / Math.max(ms, 1)) * 1000)}/s, router peak RSS ${peak.toFixed(0)} MiB`);
}

export async function benchWebhooks(bench: QueueBench, sizes: number[]): Promise<void> {
  const receiver = await startReceiver();
  try {
    await bench.admin('PATCH', '/admin/environments/dev', { webhook_url: receiver.url });
    await bench.api('POST', '/integrations', { provider: INTEGRATION, unique_key: INTEGRATION, forward_webhooks: true });
    const secret = ((await bench.api('GET', `/integrations/${INTEGRATION}?include=webhook`)) as { data: { webhookSecret: string } }).data.webhookSecret;
    const environments = (await bench.admin('GET', '/admin/environments')) as { data: Array<{ name: string; public_id: string }> };
    const publicId = environments.data.find((environment) => environment.name === 'dev')!.public_id;

    for (const size of sizes) {
      // Each webhook's body differs: the router refuses a replay of a signed body within its window.
      let next = 0;
      const loadStarted = performance.now();
      const send = async () => {
        while (next < size) {
          const body = JSON.stringify({ size, index: next++, event: 'contact.updated' });
          const response = await fetch(`${bench.gatewayUrl}/webhook/${publicId}/${INTEGRATION}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-scale-signature': `sha256=${createHmac('sha256', secret).update(body).digest('hex')}` },
            body,
          });
          await response.arrayBuffer();
          if (response.status !== 200) throw new Error(`POST /webhook: ${response.status}`);
        }
      };
      await Promise.all(Array.from({ length: IN_FLIGHT }, send));
      bench.note(`${size} provider webhooks waiting on JOBS (${((performance.now() - loadStarted) / 1000).toFixed(1)} s through the gateway)`);
      await drain(bench, receiver, 'inbound webhooks', size);
    }

    for (const size of sizes) {
      const loadStarted = performance.now();
      for (let from = 0; from < size; from += 1000) {
        const jobs = [];
        for (let i = from; i < Math.min(size, from + 1000); i++) {
          const webhookId = `msg_scale_${size}_${i}`;
          const body = JSON.stringify({ type: 'sync', size, index: i });
          jobs.push(
            bench.routerBus.enqueue(
              webhookContracts.deliver,
              { webhook_id: webhookId, environment_id: bench.environmentId, target: 'primary', url: receiver.url, kind: 'sync', body, created_at: new Date().toISOString() },
              { msgId: `${webhookId}:primary` },
            ),
          );
        }
        await Promise.all(jobs);
      }
      bench.note(`${size} customer deliveries waiting on JOBS (${((performance.now() - loadStarted) / 1000).toFixed(1)} s)`);
      await drain(bench, receiver, 'customer deliveries', size);
    }
  } finally {
    await receiver.close();
  }
}

interface LastTick {
  at: string;
  duration_ms: number;
  due_query_ms: number;
  read: number;
  queued: number;
}

export async function benchScheduler(bench: QueueBench, sizes: number[], scheduler: { child: ChildProcess }): Promise<void> {
  const client = await mongoose.mongo.MongoClient.connect(bench.mongoUri);
  const lastTick = async () => ((await bench.admin('GET', '/admin/sync-scheduler')) as { data: { last_tick: LastTick | null } }).data.last_tick;
  try {
    const collection = client.db(bench.schedulerDb).collection('sync_schedules');
    const insertDue = async (prefix: string, count: number, from: number): Promise<string[]> => {
      const due = new Date(Date.now() - 60_000);
      const ids: string[] = [];
      for (let start = 0; start < count; start += BULK) {
        const docs = [];
        for (let i = start; i < Math.min(count, start + BULK); i++) {
          const n = from + i;
          ids.push(`${prefix}${n}`);
          docs.push({
            _id: `${prefix}${n}`,
            environment_id: bench.environmentId,
            provider_config_key: 'scale-upstream',
            connection_id: `${prefix}${n}`,
            sync_name: 'contacts',
            variant: 'base',
            frequency: 'every day',
            frequency_override: null,
            paused: false,
            running: null,
            next_run_at: due,
            last_status: null,
            last_finished_at: null,
            last_results: {},
            last_error: null,
            checkpoint: null,
            created_at: due,
          });
        }
        await collection.insertMany(docs as never[], { ordered: false });
      }
      return ids;
    };
    /** The first tick since `since` that found some due, then the first that found none. */
    const ticks = async (since: number, size: number) => {
      let first: LastTick | null = null;
      let drained: LastTick | null = null;
      const deadline = Date.now() + 30 * 60_000;
      while (!drained) {
        if (Date.now() > deadline) throw new Error(`scheduler: ${size} due schedules not queued in time`);
        const tick = await lastTick().catch(() => null);
        if (tick && Date.parse(tick.at) >= since) {
          if (!first && tick.read > 0) first = tick;
          if (first && tick.read === 0) drained = tick;
        }
        await sleep(100);
      }
      return { first: first!, drained };
    };
    let loaded = 0;
    for (const size of sizes) {
      await bench.stopService(scheduler.child);
      await insertDue('sched_bulk_', size, loaded);
      loaded += size;
      bench.note(`${size} schedules due (${loaded} in sync_schedules, bulk, in the scheduler's shape)`);
      const restartedAt = Date.now();
      scheduler.child = bench.startService('sync-scheduler');
      const { first, drained } = await ticks(restartedAt, size);
      bench.record('scheduler tick: due query, ms', size, first.due_query_ms);
      bench.record('scheduler tick: ms per run queued', size, first.duration_ms / Math.max(first.queued, 1));
      // The steady state: a tick that finds nothing due still runs the due query, every second.
      bench.record('scheduler tick, nothing due: due query, ms', size, drained.due_query_ms);

      // N more, written while the scheduler leads and announced as its repo does: no full read.
      const heardAt = Date.now();
      const ids = await insertDue('sched_heard_', size, loaded);
      for (let start = 0; start < ids.length; start += 1000) bench.schedulerBus.broadcast(syncContracts.scheduleChanged, { ids: ids.slice(start, start + 1000) });
      const heard = await ticks(heardAt, size);
      bench.record('scheduler tick, heard: due query per schedule, ms', size, heard.first.due_query_ms / Math.max(heard.first.read, 1));
      bench.record('scheduler tick, heard: ms per run queued', size, heard.first.duration_ms / Math.max(heard.first.queued, 1));
      bench.note(`scheduler: first tick read ${first.read}, queued ${first.queued} in ${first.duration_ms} ms (due query ${first.due_query_ms} ms); heard: read ${heard.first.read} in ${heard.first.due_query_ms} ms`);
    }
  } finally {
    await client.close();
  }
}
