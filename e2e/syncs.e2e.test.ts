import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { Latchkey, LatchkeyError, type SyncStatus } from '@latchkey/client';
import { repoRoot } from '@latchkey/testing';
import { deployWithCli, eventually } from './support/functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './support/providers.js';
import { http, startStack, type Stack } from './support/stack.js';
import { startReceiver, type Receiver } from './support/webhooks.js';

/** `e2e/sync-functions/store/*.ts`: the syncs this test deploys for the integration `store`. */
// A run that writes 10,000 records takes seconds on FerretDB.
jest.setTimeout(120_000);

const SYNC_FUNCTIONS_DIR = join(repoRoot(), 'e2e', 'sync-functions');
const PRODUCTS = 10_000;
const UPDATED = Array.from({ length: 10 }, (_, i) => `p-${String(100 + i * 37).padStart(5, '0')}`);
const DELETED = Array.from({ length: 5 }, (_, i) => `p-${String(500 + i * 11).padStart(5, '0')}`);
/** Products left upstream after the deletions. */
const KEPT = PRODUCTS - DELETED.length;
/**
 * The schedule, variant and restart tests make many runs: they sync the first 1,000 products
 * only, so a run takes about a second instead of ten on FerretDB.
 */
const FEWER = 1000;
const FEWER_KEPT = FEWER - DELETED.length;

let stack: Stack;
let client: Latchkey;
let receiver: Receiver;
/** The provider: a product list paged by cursor, which the test changes between runs. */
let upstream: Server;
const products = new Map<string, { id: string; name: string; price: number }>();
let deletedUpstream: string[] = [];
/** Milliseconds the upstream waits before each page: a run long enough to be killed in. */
let pageDelayMs = 0;
/** The most items a page holds, whatever the sync asks for: more pages, a run with more steps to be killed between. */
let pageCap = Number.POSITIVE_INFINITY;
/**
 * Listings per market (`GET /listings?market=`), for the `listings` sync: its base reads `home`,
 * a variant the market it is named after. Some ids are in both, with other content in each.
 */
const listings: Record<string, Array<{ id: string; market: string; title: string }>> = {
  home: [1, 2, 3, 4].map((n) => ({ id: `l-${n}`, market: 'home', title: `Home listing ${n}` })),
  fr: [3, 4, 5, 6, 7, 8].map((n) => ({ id: `l-${n}`, market: 'fr', title: `Annonce ${n}` })),
};

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });

async function startUpstream(): Promise<string> {
  upstream = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    const send = (body: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.headers['x-api-key'] !== 'store-key') {
      res.writeHead(401).end();
      return;
    }
    if (url.pathname === '/listings') {
      send({ items: listings[url.searchParams.get('market') ?? ''] ?? [] });
      return;
    }
    if (url.pathname === '/products/deleted') {
      send({ ids: deletedUpstream });
      return;
    }
    if (url.pathname !== '/products') {
      res.writeHead(404).end();
      return;
    }
    const all = [...products.values()].sort((a, b) => a.id.localeCompare(b.id));
    const start = Number(url.searchParams.get('cursor') ?? '0');
    const limit = Math.min(Number(url.searchParams.get('limit') ?? '50'), pageCap);
    const items = all.slice(start, start + limit);
    if (pageDelayMs > 0) {
      setTimeout(() => send({ items, next_cursor: start + limit < all.length ? String(start + limit) : null }), pageDelayMs);
      return;
    }
    send({ items, next_cursor: start + limit < all.length ? String(start + limit) : null });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
}

async function statusOf(sync: string, variant = 'base'): Promise<SyncStatus | undefined> {
  const { syncs } = await client.syncStatus('store', [sync], 'conn-1');
  return syncs.find((entry) => entry.variant === variant);
}

/** Waits for a run that finished after `after` (an ISO time, or null for any) and is no longer running. */
function finishedRun(sync: string, after: string | null, variant = 'base', timeoutMs = 60_000): Promise<SyncStatus> {
  return eventually(
    async () => {
      const status = await statusOf(sync, variant);
      if (!status || status.status === 'RUNNING' || status.finishedAt === null) return undefined;
      return after === null || status.finishedAt > after ? status : undefined;
    },
    timeoutMs,
    `a finished run of ${sync}/${variant}`,
    // A status counts every model's records: asked less often, it leaves FerretDB to the run.
    500,
  );
}

async function allRecords(options: { model: string; variant?: string; filter?: string; modifiedAfter?: string }) {
  const records: Array<Record<string, unknown>> = [];
  let cursor: string | null = null;
  do {
    const page: { records: Array<Record<string, unknown>>; next_cursor: string | null } = await client.listRecords({
      providerConfigKey: 'store',
      connectionId: 'conn-1',
      model: options.model,
      limit: 1000,
      ...(options.variant ? { variant: options.variant } : {}),
      ...(options.filter ? { filter: options.filter as 'updated' } : {}),
      ...(options.modifiedAfter ? { modifiedAfter: options.modifiedAfter } : {}),
      ...(cursor ? { cursor } : {}),
    });
    records.push(...page.records);
    cursor = page.next_cursor;
  } while (cursor);
  return records;
}

beforeAll(async () => {
  for (let i = 0; i < PRODUCTS; i++) {
    const id = `p-${String(i).padStart(5, '0')}`;
    products.set(id, { id, name: `Product ${i}`, price: i });
  }
  receiver = await startReceiver();
  const upstreamUrl = await startUpstream();
  stack = await startStack({
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstreamUrl)), PROXY_ALLOW_CIDRS: '127.0.0.1/32' },
    serviceEnv: {
      'sync-scheduler': { SYNC_MIN_FREQUENCY_MS: '1000', SCHEDULER_TICK_MS: '300' },
      'webhook-router': { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_RETRY_BASE_MS: '100', WEBHOOK_RETRY_CAP_MS: '500' },
      // Pages read while a run writes 10,000 records wait on FerretDB's SQLite writer: on a busy
      // two-core machine one can take longer than the default 5 s deadline.
      gateway: { REQUEST_TIMEOUT_MS: '20000' },
    },
  });
  client = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
  expect((await http(`${stack.url}/admin/environments/dev`, { method: 'PATCH', token: stack.adminToken, body: { webhook_url: receiver.url } })).status).toBe(200);
  await seedApiKeyConnection(stack, 'store', 'conn-1', 'store-key');
  await deployWithCli(SYNC_FUNCTIONS_DIR, stack);
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  await receiver?.close();
  upstream?.close();
});

describe('sync runs', () => {
  let firstRun: SyncStatus;

  it('runs a deployed sync for the existing connection at once: records saved, status SUCCESS with counts', async () => {
    firstRun = await finishedRun('products', null);
    expect(firstRun).toMatchObject({
      connection_id: 'conn-1',
      name: 'products',
      variant: 'base',
      status: 'SUCCESS',
      frequency: 'every hour',
      latestResult: { Product: { added: PRODUCTS, updated: 0, deleted: 0 } },
      recordCount: { Product: PRODUCTS },
      latestError: null,
    });
    expect(Date.parse(firstRun.nextScheduledSyncAt!)).toBeGreaterThan(Date.now() + 50 * 60_000);
    const records = await allRecords({ model: 'Product' });
    expect(records).toHaveLength(PRODUCTS);
    expect(new Set(records.map((record) => record.id)).size).toBe(PRODUCTS);
    expect(records.find((record) => record.id === 'p-00007')).toMatchObject({ name: 'Product 7', price: 7, _metadata: { last_action: 'ADDED' } });
  });

  it('sends a sync webhook for a run with changes', async () => {
    const [hook] = await receiver.waitFor((item) => item.json?.type === 'sync' && item.json.responseResults?.added === PRODUCTS);
    expect(hook!.json).toMatchObject({
      type: 'sync',
      connectionId: 'conn-1',
      providerConfigKey: 'store',
      syncName: 'products',
      model: 'Product',
      syncVariant: 'base',
      responseResults: { added: PRODUCTS, updated: 0, deleted: 0 },
    });
    expect(typeof hook!.json.modifiedAfter).toBe('string');
    expect(typeof hook!.json.queryTimeStamp).toBe('string');
  });

  it('a triggered run writes only what changed: 10 updated, 5 deleted, the rest untouched; paging while it writes misses nothing', async () => {
    for (const id of UPDATED) products.get(id)!.price += 1000;
    for (const id of DELETED) products.delete(id);
    deletedUpstream = DELETED;
    pageDelayMs = 500;
    expect(await client.triggerSync('store', ['products'], 'conn-1')).toEqual({ success: true });
    // Page everything while the run writes: every record comes, and only a changed one comes twice.
    const pagedDuringRun = await allRecords({ model: 'Product' });
    const second = await finishedRun('products', firstRun.finishedAt);
    pageDelayMs = 0;
    const ids = pagedDuringRun.map((record) => record.id as string);
    expect(new Set(ids).size).toBe(PRODUCTS);
    const repeated = ids.filter((id, index) => ids.indexOf(id) !== index);
    expect(repeated.every((id) => UPDATED.includes(id) || DELETED.includes(id))).toBe(true);

    expect(second).toMatchObject({ status: 'SUCCESS', latestResult: { Product: { added: 0, updated: 10, deleted: 5 } }, recordCount: { Product: KEPT } });
    const updated = await allRecords({ model: 'Product', filter: 'updated' });
    expect(updated.map((record) => record.id).sort()).toEqual([...UPDATED].sort());
    expect(updated.every((record) => (record.price as number) >= 1000)).toBe(true);
    expect((await allRecords({ model: 'Product', filter: 'deleted' })).map((record) => record.id).sort()).toEqual([...DELETED].sort());
    const [hook] = await receiver.waitFor((item) => item.json?.type === 'sync' && item.json.responseResults?.updated === 10);
    expect(hook!.json.responseResults).toEqual({ added: 0, updated: 10, deleted: 5 });
    const changed = await allRecords({ model: 'Product', modifiedAfter: hook!.json.modifiedAfter });
    expect(changed.map((record) => record.id).sort()).toEqual([...UPDATED, ...DELETED].sort());
    // An unchanged record was not rewritten: still the first run's write.
    const untouched = (await allRecords({ model: 'Product' })).find((record) => record.id === 'p-00007')!;
    expect((untouched._metadata as { last_action: string }).last_action).toBe('ADDED');
    deletedUpstream = [];
  });

  it('fails loudly on an invalid record after saving the valid ones of the batch', async () => {
    const status = await finishedRun('broken', null);
    // The error is raised inside the function (which could catch it), so the run fails as the function did.
    expect(status).toMatchObject({ status: 'ERROR', latestError: { code: 'function_failed' }, latestResult: { Thing: { added: 2, updated: 0, deleted: 0 } } });
    expect(status.latestError!.message).toMatch(/1 of 3 Thing records are invalid/);
    expect((await allRecords({ model: 'Thing' })).map((record) => record.id).sort()).toEqual(['a', 'c']);
  });

  it('a full resync clears the records first and saves them again', async () => {
    const before = await finishedRun('products', null);
    await client.triggerSync('store', ['products'], 'conn-1', { fullResync: true });
    const after = await finishedRun('products', before.finishedAt);
    expect(after.latestResult).toEqual({ Product: { added: KEPT, updated: 0, deleted: 0 } });
    expect((await allRecords({ model: 'Product', filter: 'deleted' })).length).toBe(0);
  });
});

describe('schedules', () => {
  beforeAll(async () => {
    for (const id of [...products.keys()]) if (Number(id.slice(2)) >= FEWER) products.delete(id);
    const before = await finishedRun('products', null);
    await client.triggerSync('store', ['products'], 'conn-1', { fullResync: true });
    expect(await finishedRun('products', before.finishedAt)).toMatchObject({ status: 'SUCCESS', recordCount: { Product: FEWER_KEPT } });
  }, 90_000);

  it('a connection created after the deploy gets its schedules and runs; a deleted one loses them', async () => {
    expect((await api('POST', '/connections', { provider_config_key: 'store', connection_id: 'conn-2', credentials: { type: 'API_KEY', apiKey: 'store-key' } })).status).toBe(201);
    const ran = await eventually(
      async () => {
        const { syncs } = await client.syncStatus('store', '*', 'conn-2');
        const products = syncs.find((entry) => entry.name === 'products');
        return products?.status === 'SUCCESS' ? syncs : undefined;
      },
      20_000,
      'the new connection to sync',
    );
    expect(ran.map((entry) => entry.name).sort()).toEqual(['broken', 'listings', 'products']);
    expect(ran.find((entry) => entry.name === 'products')!.recordCount).toEqual({ Product: FEWER_KEPT });
    // Status lists only connections the vault still has, so what becomes of a deleted
    // connection's schedules is not visible here: the sync-scheduler's integration test
    // (src/handlers/connection-deleted.int.test.ts) checks that they go and no other does.
    expect((await api('DELETE', '/connections/conn-2?provider_config_key=store')).status).toBe(200);
    const { syncs: kept } = await client.syncStatus('store', '*', 'conn-1');
    expect(kept.map((entry) => entry.name).sort()).toEqual(['broken', 'listings', 'products']);
  });

  it("a deletion heard late, once the name is taken again, leaves the new connection's schedules", async () => {
    const names = async (connectionId: string) => (await client.syncStatus('store', '*', connectionId)).syncs.map((entry) => entry.name).sort();
    const create = () => api('POST', '/connections', { provider_config_key: 'store', connection_id: 'conn-3', credentials: { type: 'API_KEY', apiKey: 'store-key' } });
    expect((await create()).status).toBe(201);
    await eventually(async () => ((await names('conn-3')).length === 3 ? true : undefined), 20_000, 'the first conn-3 to get its schedules');
    // The fact as the vault publishes it, kept to be heard again.
    const nc = await stack.connectNats();
    const deletions = nc.subscribe('events.connection.deleted', { max: 1 });
    await nc.flush();
    expect((await api('DELETE', '/connections/conn-3?provider_config_key=store')).status).toBe(200);
    let fact: Uint8Array | undefined;
    for await (const message of deletions) fact = message.data;
    expect((await create()).status).toBe(201);
    await eventually(async () => ((await names('conn-3')).length === 3 ? true : undefined), 20_000, 'the second conn-3 to get its schedules');
    // Heard again: redelivered, or published late by the vault's outbox sweep.
    await jetstream(nc).publish('events.connection.deleted', fact!);
    await nc.close();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await names('conn-3')).toEqual(['broken', 'listings', 'products']);
  });

  it('a frequency override changes the next run; the schedule runs on it; pause stops runs, start resumes them; null reverts', async () => {
    const before = await finishedRun('products', null);
    expect(await client.updateSyncConnectionFrequency('store', 'products', 'conn-1', '2s')).toEqual({ frequency: '2s' });
    try {
      await frequencyOverrideRuns(before.finishedAt);
    } finally {
      // Whatever failed above, the schedule runs hourly again and is not paused, so the cases
      // after this one do not meet a run every 2 s.
      await client.updateSyncConnectionFrequency('store', 'products', 'conn-1', null);
      await client.startSync('store', ['products']);
    }
  }, 150_000);

  /** The override's part of the case above: its own function, so the case can undo it whatever happens. */
  async function frequencyOverrideRuns(beforeFinishedAt: string | null): Promise<void> {
    const overridden = (await statusOf('products'))!;
    expect(overridden.frequency).toBe('2s');
    expect(Date.parse(overridden.nextScheduledSyncAt!)).toBeLessThan(Date.now() + 3000);
    // The scheduler runs it by itself: due within 2 s, then a run of a thousand records, which
    // a loaded machine took more than 15 s to finish.
    const scheduled = await finishedRun('products', beforeFinishedAt, 'base', 45_000);
    expect(scheduled.latestResult).toEqual({ Product: { added: 0, updated: 0, deleted: 0 } });

    expect(await client.pauseSync('store', ['products'], 'conn-1')).toEqual({ success: true });
    // A run in flight finishes; then nothing runs while paused.
    const settled = await eventually(async () => {
      const status = await statusOf('products');
      return status?.status === 'PAUSED' ? status : undefined;
    }, 10_000, 'paused');
    expect(settled.nextScheduledSyncAt).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 4500));
    expect((await statusOf('products'))!).toMatchObject({ status: 'PAUSED', finishedAt: settled.finishedAt });

    expect(await client.startSync('store', ['products'])).toEqual({ success: true });
    await finishedRun('products', settled.finishedAt, 'base', 45_000);

    expect(await client.updateSyncConnectionFrequency('store', 'products', 'conn-1', null)).toEqual({ frequency: 'every hour' });
    const reverted = await eventually(async () => {
      const status = await statusOf('products');
      return status && status.status !== 'RUNNING' ? status : undefined;
    }, 30_000, 'idle');
    expect(reverted.frequency).toBe('every hour');
    expect(Date.parse(reverted.nextScheduledSyncAt!)).toBeGreaterThan(Date.now() + 50 * 60_000);
  }

  it('refuses bad frequencies, unknown syncs and connections with the documented codes', async () => {
    const bad = await api('PUT', '/sync/update-connection-frequency', { provider_config_key: 'store', connection_id: 'conn-1', sync_name: 'products', frequency: 'sometimes' });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe('invalid_frequency');
    const unknownSync = await api('POST', '/sync/trigger', { provider_config_key: 'store', syncs: ['nope'] });
    expect([unknownSync.status, unknownSync.json.error.code]).toEqual([404, 'unknown_sync']);
    const unknownConnection = await api('POST', '/sync/pause', { provider_config_key: 'store', syncs: [], connection_id: 'ghost' });
    expect([unknownConnection.status, unknownConnection.json.error.code]).toEqual([404, 'unknown_connection']);
    const invalid = await api('POST', '/sync/start', { provider_config_key: 'store' });
    expect([invalid.status, invalid.json.error.code]).toEqual([400, 'invalid_body']);
    const noSyncs = await api('GET', '/sync/status?provider_config_key=store');
    expect([noSyncs.status, noSyncs.json.error.code]).toEqual([400, 'invalid_query_params']);
    const manySyncs = await api('GET', `/sync/status?provider_config_key=store&syncs=${Array.from({ length: 101 }, (_, i) => `s${i}`).join(',')}`);
    expect([manySyncs.status, manySyncs.json.error.code]).toEqual([400, 'invalid_query_params']);
  });
});

describe('variants', () => {
  it('a variant has its own schedule, status and records; deleting it drops them; base is refused', async () => {
    expect(await client.createSyncVariant({ provider_config_key: 'store', connection_id: 'conn-1', name: 'products', variant: 'eu' })).toMatchObject({ name: 'products', variant: 'eu' });
    const duplicate = await api('POST', '/sync/products/variant/eu', { provider_config_key: 'store', connection_id: 'conn-1' });
    expect([duplicate.status, duplicate.json.error.code]).toEqual([409, 'failed_sync_variant_creation']);
    const variantRun = await finishedRun('products', null, 'eu');
    expect(variantRun).toMatchObject({ status: 'SUCCESS', latestResult: { Product: { added: FEWER_KEPT, updated: 0, deleted: 0 } } });
    expect(await allRecords({ model: 'Product', variant: 'eu' })).toHaveLength(FEWER_KEPT);

    // The base records are their own: a change seen by the variant's next run only.
    products.get('p-00042')!.name = 'Renamed';
    await client.triggerSync('store', ['products'], 'conn-1', { syncVariant: 'eu' });
    await finishedRun('products', variantRun.finishedAt, 'eu');
    expect((await allRecords({ model: 'Product', variant: 'eu', filter: 'updated' })).map((record) => record.id)).toEqual(['p-00042']);
    expect((await allRecords({ model: 'Product', filter: 'updated' })).map((record) => record.id)).not.toContain('p-00042');

    expect(await client.deleteSyncVariant({ provider_config_key: 'store', connection_id: 'conn-1', name: 'products', variant: 'eu' })).toEqual({ success: true });
    expect(await allRecords({ model: 'Product', variant: 'eu' })).toHaveLength(0);
    expect(await statusOf('products', 'eu')).toBeUndefined();

    for (const method of ['POST', 'DELETE']) {
      const base = await api(method, '/sync/products/variant/base', { provider_config_key: 'store', connection_id: 'conn-1' });
      expect([base.status, base.json.error.code]).toEqual([400, 'invalid_uri_params']);
    }
    await expect(client.deleteSyncVariant({ provider_config_key: 'store', connection_id: 'conn-1', name: 'products', variant: 'gone' })).rejects.toBeInstanceOf(LatchkeyError);
    // A trigger of a variant no connection has runs nothing, and says so.
    const unknown = await api('POST', '/sync/trigger', { provider_config_key: 'store', syncs: ['products'], connection_id: 'conn-1', sync_variant: 'gone' });
    expect([unknown.status, unknown.json.error.code]).toEqual([404, 'unknown_sync_variant']);
  });

  it('a variant with other input keeps separate records: the sync reads its market from ctx.variant', async () => {
    const base = await finishedRun('listings', null);
    expect(base).toMatchObject({ variant: 'base', status: 'SUCCESS', latestResult: { Listing: { added: 4, updated: 0, deleted: 0 } } });

    const created = await api('POST', '/sync/listings/variant/fr', { provider_config_key: 'store', connection_id: 'conn-1' });
    expect([created.status, created.json]).toMatchObject([200, { name: 'listings', variant: 'fr' }]);
    const fr = await finishedRun('listings', null, 'fr');
    expect(fr).toMatchObject({ status: 'SUCCESS', latestResult: { Listing: { added: 6, updated: 0, deleted: 0 } }, recordCount: { Listing: 6 } });

    // Each variant holds exactly its own market's listings, even where the ids are the same.
    const content = (records: Array<Record<string, unknown>>) =>
      records.map(({ id, market, title }) => ({ id, market, title })).sort((a, b) => String(a.id).localeCompare(String(b.id)));
    expect(content(await allRecords({ model: 'Listing', variant: 'fr' }))).toEqual(listings['fr']);
    expect(content(await allRecords({ model: 'Listing' }))).toEqual(listings['home']);
    expect((await statusOf('listings'))!).toMatchObject({ status: 'SUCCESS', recordCount: { Listing: 4 }, finishedAt: base.finishedAt });

    // Running the base again changes nothing in either.
    await client.triggerSync('store', ['listings'], 'conn-1');
    const again = await finishedRun('listings', base.finishedAt);
    expect(again.latestResult).toEqual({ Listing: { added: 0, updated: 0, deleted: 0 } });
    expect(content(await allRecords({ model: 'Listing', variant: 'fr' }))).toEqual(listings['fr']);
    expect(content(await allRecords({ model: 'Listing' }))).toEqual(listings['home']);
  });
});

describe('a killed action-runner', () => {
  it('has its run redelivered and finished: every record once, none lost', async () => {
    const before = await finishedRun('products', null);
    pageDelayMs = 700;
    pageCap = 100;
    await client.triggerSync('store', ['products'], 'conn-1', { fullResync: true });
    // Killed after the first page was saved, before the last.
    await eventually(async () => ((await statusOf('products'))?.recordCount.Product ?? 0) > 0 || undefined, 10_000, 'the first page to be saved');
    const runner = stack.services.find((proc) => proc.service === 'action-runner')!;
    const exited = new Promise((resolve) => runner.child.once('exit', resolve));
    runner.child.kill('SIGKILL');
    await exited;
    const midway = (await statusOf('products'))!;
    expect(midway.status).toBe('RUNNING');
    expect(midway.recordCount.Product).toBeLessThan(FEWER_KEPT);
    pageDelayMs = 0;
    pageCap = Number.POSITIVE_INFINITY;
    await stack.restart('action-runner');
    // JetStream hands the run to the new runner once the dead one's heartbeat is missed (15 s).
    const after = await finishedRun('products', before.finishedAt, 'base', 45_000);
    expect(after.status).toBe('SUCCESS');
    expect(after.recordCount).toEqual({ Product: FEWER_KEPT });
    const records = await allRecords({ model: 'Product' });
    expect(records).toHaveLength(FEWER_KEPT);
    expect(new Set(records.map((record) => record.id)).size).toBe(FEWER_KEPT);
    // The run counts what the killed attempt reported and what the retried one wrote, which found
    // the first page already saved: no record twice.
    expect(after.latestResult.Product!.added).toBeLessThanOrEqual(FEWER_KEPT);
  }, 90_000);
});
