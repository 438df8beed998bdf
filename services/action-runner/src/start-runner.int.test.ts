import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createBus, type Bus } from '@latchkey/bus';
import { STREAMS, actionContracts, functionsContracts, recordsContracts, syncContracts, vaultContracts, webhookContracts, type PayloadOf, type RequestOf, type ServiceName } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { eventually, startMongo, startNats, type TestMongo, type TestNats, serviceEnvironment } from '@latchkey/testing';
import { configSchema } from './config.js';
import { startRunner } from './start-runner.js';

type Completed = PayloadOf<typeof actionContracts.asyncCompleted>;

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let mongo: TestMongo;
let runner: RunningService<void>;
let gateway: Bus;
let neighbours: Bus[];

/** A bundle as esbuild writes it: CommonJS whose default export is the definition. */
const actionBundle = (name: string, exec: string) => `"use strict";\nmodule.exports = { default: { kind: 'action', name: '${name}', exec: ${exec} } };`;
const lifecycleBundle = (name: string, exec: string) =>
  `"use strict";\nmodule.exports = { default: { kind: 'on-event', name: '${name}', event: 'post-connection-creation', exec: ${exec} } };`;
const syncBundle = (name: string, onWebhook: string) =>
  `"use strict";\nmodule.exports = { default: { kind: 'sync', name: '${name}', exec: async () => {}, onWebhook: ${onWebhook} } };`;
/** A sync that leaves a batch of several messages' worth (some 3.3 MB, in parts under 1 MiB) to the host, unawaited, and returns. */
const UNAWAITED_SYNC = `"use strict";\nmodule.exports = { default: { kind: 'sync', name: 'sync-unawaited', exec: async (ctx) => {
  void ctx.batchSave(Array.from({ length: 10000 }, (_, n) => ({ id: 'item-' + n, name: 'x'.repeat(300) })), 'Item').catch(() => undefined);
} } };`;
const BUNDLES: Record<string, string> = {
  'sync-unawaited': UNAWAITED_SYNC,
  'hook-first': syncBundle('hook-first', `async (ctx) => { await ctx.updateMetadata({ 'hook-first': true }); }`),
  'hook-second': syncBundle('hook-second', `async (ctx) => { await ctx.updateMetadata({ 'hook-second': true }); }`),
  'hook-broken': syncBundle('hook-broken', `async () => { throw new Error('no such contact'); }`),
  'hook-third': syncBundle('hook-third', `async (ctx) => { await ctx.updateMetadata({ 'hook-third': true }); }`),
  echo: actionBundle('echo', `async (ctx, input) => ({ n: input.n, connection: ctx.connectionId })`),
  broken: actionBundle('broken', `async () => { throw new Error('nope'); }`),
  'mark-first': lifecycleBundle('mark-first', `async (ctx) => { await ctx.updateMetadata({ first: true }); }`),
  'mark-second': lifecycleBundle('mark-second', `async (ctx) => { await ctx.updateMetadata({ second: true }); }`),
};
/** Metadata writes the vault took, by the key written; the first of `second` and of `hook-second` meets an outage. */
const metadataWrites = new Map<string, number>();
/** The webhook runs the sync-scheduler was told of. */
const webhookRuns: Array<RequestOf<typeof syncContracts.webhookRunFinished>> = [];
/** What the scheduled sync run told the sync-scheduler, in order: its writes, reports and end. */
const runTold: Array<{ subject: string; attempt: number | undefined; run_id?: string | undefined; records?: number }> = [];
/** Answers the run's first write once the run's end arrived: the attempt ends with that write in flight. */
let runEnded: () => void = () => undefined;
const ended = new Promise<void>((resolve) => (runEnded = resolve));

const login = (service: ServiceName | 'observer') => createBus({ servers: nats.url, service, identity: nats.credentials(service), logger, requestTimeoutMs: 5_000 });

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  // The runner's neighbours, played by the services they are: the functions service hands out
  // deployed bundles (the sync-scheduler keeps deployments), the vault knows connection `c1`.
  const deployments = await login('sync-scheduler');
  deployments.serve(functionsContracts.get, ({ name }) => {
    const bundle = BUNDLES[name];
    if (!bundle) throw new Error(`no function ${name}`);
    const description = name.startsWith('mark-')
      ? { type: 'on-event' as const, name, event: 'post-connection-creation' as const }
      : name.startsWith('hook-') || name.startsWith('sync-')
        ? { type: 'sync' as const, name, frequency: 'every hour', models: [{ name: 'Item', fields: [] }], webhook_subscriptions: ['*'] }
        : { type: 'action' as const, name, has_input_schema: false };
    return { version: 1, description, bundle };
  });
  deployments.serve(functionsContracts.listLifecycle, ({ event }) => (event === 'post-connection-creation' ? ['mark-first', 'mark-second'] : []));
  deployments.serve(functionsContracts.listWebhookSyncs, ({ provider_config_key }) =>
    (provider_config_key === 'api' ? ['hook-first', 'hook-second'] : ['hook-third', 'hook-broken']).map((name) => ({ name, webhook_subscriptions: ['*'] })),
  );
  deployments.serve(syncContracts.webhookRunFinished, (request) => {
    webhookRuns.push(request);
    // The first announcement of `hook-broken`'s failure meets the sync-scheduler restarting.
    if (request.sync_name === 'hook-broken' && webhookRuns.filter((run) => run.sync_name === 'hook-broken').length === 1) {
      throw new AppError('service_unavailable', 'the sync-scheduler is restarting');
    }
    return { published: true as const };
  });
  // The sync-scheduler's side of a scheduled run: attempt 3 of `sync-unawaited`.
  deployments.serve(syncContracts.beginRun, () => ({
    run: { provider_config_key: 'api', connection_id: 'c1', sync_name: 'sync-unawaited', variant: 'base', started_at: new Date().toISOString(), checkpoint: null, results: {}, attempt: 3 },
  }));
  deployments.serve(syncContracts.reportProgress, ({ attempt }) => {
    runTold.push({ subject: 'progress', attempt });
    return { recorded: true };
  });
  deployments.serve(syncContracts.finishRun, ({ attempt }) => {
    runTold.push({ subject: 'finish', attempt });
    runEnded();
    return { recorded: true };
  });
  deployments.serve(recordsContracts.write, async ({ attempt, run_id, records }) => {
    runTold.push({ subject: 'write', attempt, run_id, records: records.length });
    await ended;
    return { added: records.length, updated: 0, deleted: 0, unchanged: 0, failed: [] };
  });
  const vault = await login('credential-vault');
  vault.serve(vaultContracts.resolveConnection, ({ connection_id, provider_config_key }) => ({ id: 1, connection_id, provider_config_key, provider: 'api' }));
  vault.serve(vaultContracts.writeMetadata, ({ metadata }) => {
    const key = Object.keys(metadata)[0] ?? '';
    metadataWrites.set(key, (metadataWrites.get(key) ?? 0) + 1);
    if ((key === 'second' || key === 'hook-second') && metadataWrites.get(key) === 1) throw new AppError('service_unavailable', 'the vault is restarting');
    return { success: true as const };
  });
  neighbours = [deployments, vault];
  await Promise.all(neighbours.map((bus) => bus.flush()));

  // The runner itself, wired as main.ts wires it.
  const config = configSchema.parse(serviceEnvironment('action-runner', nats, mongo.uri, { FUNCTION_CONCURRENCY: '2' }));
  runner = await runService({ service: 'action-runner', config, start: startRunner, handleSignals: false });
  gateway = await login('gateway');
}, 60_000);

afterAll(async () => {
  await gateway?.drain();
  await runner?.runtime.mongo.dropDatabase().catch(() => undefined);
  await runner?.shutdown();
  await Promise.all((neighbours ?? []).map((bus) => bus.drain()));
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

/** Every `action.async_completed` event JetStream stored, read with an ordered consumer. */
async function storedCompletions(): Promise<Completed[]> {
  const observer = await login('observer');
  try {
    const js = (await observer.jetstreamManager()).jetstream();
    const consumer = await js.consumers.get(STREAMS.events.name, { filter_subjects: actionContracts.asyncCompleted.subject });
    const events: Completed[] = [];
    const batch = await consumer.fetch({ max_messages: 1000, expires: 1000 });
    for await (const msg of batch) {
      events.push(msg.json<Completed>());
      if (msg.info.pending === 0) break;
    }
    return events;
  } finally {
    await observer.close();
  }
}


const trigger = (action_name: string, n: number) =>
  gateway.request(actionContracts.trigger, { environment_id: 'env_a', provider_config_key: 'api', connection_id: 'c1', action_name, input: { n }, async: true });

describe('async actions', () => {
  // Not visible through the API: the event is what the webhook router turns into the customer's
  // async_action webhook, so the e2e suite sees only the webhooks and the results.
  it('publish one completion event per run, and a redelivered job of a finished run neither runs it again nor doubles its event', async () => {
    const ids: string[] = [];
    for (let n = 0; n < 6; n++) {
      const queued = await trigger(n === 5 ? 'broken' : 'echo', n);
      if (queued.status !== 'queued') throw new Error('expected the action to be queued');
      ids.push(queued.id);
    }
    const results = await eventually(async () => {
      const all = await Promise.all(ids.map((id) => gateway.request(actionContracts.getResult, { environment_id: 'env_a', id })));
      return all.every((result) => result.status === 'done' || result.status === 'failed') ? all : undefined;
    }, 20_000, 'every run to finish');
    expect(results.slice(0, 5).map((result) => result.status)).toEqual(Array(5).fill('done'));
    expect(results[5]).toMatchObject({ status: 'failed', error: { code: expect.any(String) } });

    const events = await eventually(async () => {
      const seen = await storedCompletions();
      return seen.length >= ids.length ? seen : undefined;
    }, 20_000, 'the completion events');
    expect(events.map((event) => event.id).sort()).toEqual([...ids].sort());
    const byId = new Map(events.map((event) => [event.id, event]));
    for (const id of ids.slice(0, 5)) {
      expect(byId.get(id)).toMatchObject({ environment_id: 'env_a', statusUrl: `/action/${id}`, action_name: 'echo', provider_config_key: 'api', connection_id: 'c1', success: true });
    }
    expect(byId.get(ids[5]!)).toMatchObject({ action_name: 'broken', success: false, error: { code: results[5]!.status === 'failed' ? results[5]!.error.code : '' } });

    // JetStream delivers at least once: the same job again (a new message, as after a crash
    // between recording the outcome and acknowledging) finds the run finished.
    await runner.runtime.bus.enqueue(actionContracts.run, { environment_id: 'env_a', id: ids[0]! }, { msgId: `action-run-${ids[0]}-again` });
    await eventually(async () => {
      const consumer = await (await runner.runtime.bus.jetstreamManager()).consumers.info(STREAMS.jobs.name, 'action-runner-actions');
      return consumer.num_pending === 0 && consumer.num_ack_pending === 0 ? true : undefined;
    }, 20_000, 'the job again to be handled');
    const after = await storedCompletions();
    expect(after).toHaveLength(ids.length);
    expect(await gateway.request(actionContracts.getResult, { environment_id: 'env_a', id: ids[0]! })).toMatchObject({ status: 'done' });
  }, 60_000);
});

describe('post-creation functions', () => {
  // A post-creation function that met the vault restarting was counted as failed and never run
  // again: the provider subscription it registers was never made.
  it('run again, once the event comes again, when an outage of ours failed one; those that ran are not run twice', async () => {
    const vault = neighbours[1]!;
    await vault.publish(vaultContracts.connectionCreated, { environment_id: 'env_a', id: 41, connection_id: 'c1', provider_config_key: 'api', provider: 'api' });
    await eventually(async () => ((metadataWrites.get('second') ?? 0) >= 2 ? true : undefined), 20_000, 'the failed function to run again');
    // Time for any further delivery.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(Object.fromEntries(metadataWrites)).toEqual({ first: 1, second: 2 });

    // A reconnect of the same connection is another creation: every function runs for it.
    await vault.publish(vaultContracts.connectionCreated, { environment_id: 'env_a', id: 41, connection_id: 'c1', provider_config_key: 'api', provider: 'api', operation: 'override' });
    await eventually(async () => ((metadataWrites.get('second') ?? 0) >= 3 ? true : undefined), 20_000, 'the reconnect\'s functions to run');
    expect(metadataWrites.get('first')).toBe(2);
  }, 60_000);
});

describe("syncs' onWebhook", () => {
  // An onWebhook that met the vault restarting was reported failed and never run again: the
  // provider had been answered 200, and the change it announced was lost for that sync.
  it('run again, once the webhook comes again, when an outage of ours failed one; those that ran are not run twice', async () => {
    const router = await login('webhook-router');
    try {
      await router.publish(webhookContracts.received, { environment_id: 'env_a', inbound_id: 'inb_outage', provider_config_key: 'api', provider: 'api', connection_id: 'c1', payload: { type: 'contact.updated' } });
      await eventually(async () => ((metadataWrites.get('hook-second') ?? 0) >= 2 ? true : undefined), 20_000, 'the failed onWebhook to run again');
      // Time for any further delivery.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
    } finally {
      await router.close();
    }
    expect(metadataWrites.get('hook-first')).toBe(1);
    expect(metadataWrites.get('hook-second')).toBe(2);
    // The outage was no failure of the sync: nothing says it failed.
    expect(webhookRuns.filter((run) => run.status === 'ERROR')).toEqual([]);
  }, 60_000);

  it('are announced again when the sync-scheduler did not take the announcement, and the syncs that ran are not run twice', async () => {
    const router = await login('webhook-router');
    try {
      await router.publish(webhookContracts.received, { environment_id: 'env_a', inbound_id: 'inb_announce', provider_config_key: 'api2', provider: 'api', connection_id: 'c1', payload: { type: 'contact.deleted' } });
      await eventually(async () => (webhookRuns.filter((run) => run.sync_name === 'hook-broken').length >= 2 ? true : undefined), 20_000, 'the failure to be announced again');
      // Time for any further delivery.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
    } finally {
      await router.close();
    }
    // Before, the failed announcement handed the webhook back with nothing marked: `hook-third` ran again.
    expect(metadataWrites.get('hook-third')).toBe(1);
    expect(webhookRuns.filter((run) => run.sync_name === 'hook-broken').map((run) => run.status)).toEqual(['ERROR', 'ERROR']);
  }, 60_000);
});

describe('a scheduled sync run', () => {
  // A batch the function did not await went on writing after its attempt ended: beside the next
  // attempt of the run, or over the next run's newer records.
  it("names its attempt in every write, report and end, and writes nothing more of a batch once the attempt ended", async () => {
    const scheduler = neighbours[0]!;
    await scheduler.enqueue(syncContracts.run, { environment_id: 'env_a', run_id: 'run-unawaited' }, { msgId: 'sync-run-unawaited' });
    await eventually(async () => (runTold.some((told) => told.subject === 'progress') ? true : undefined), 20_000, 'the first write to be answered');
    // Time for any further write.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    // One message in flight when the function returned; its later parts were never sent.
    expect(runTold).toEqual([
      { subject: 'write', attempt: 3, run_id: 'run-unawaited', records: expect.any(Number) },
      { subject: 'finish', attempt: 3 },
      { subject: 'progress', attempt: 3 },
    ]);
    expect(runTold[0]!.records).toBeLessThan(10_000);
  }, 60_000);
});
