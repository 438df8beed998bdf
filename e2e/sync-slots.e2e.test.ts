import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { startCatalogStack, type CatalogStack } from './support/catalog-upstream.js';
import { eventually } from './support/functions.js';
import { http } from './support/stack.js';

/**
 * Syncs may run for hours, and every run of a replica shares its FUNCTION_CONCURRENCY slots:
 * with every slot held by a sync, async actions, webhooks and post-creation functions waited
 * for one to end, and every synchronous action was answered 503. Syncs take at most
 * SYNC_CONCURRENCY of the slots (by default three quarters of them, one at least), so the others
 * stay free for short work. Here FUNCTION_CONCURRENCY is 2: one slot for syncs. The `catalog`
 * sync (`e2e/sync-long-functions/bulk/catalog.ts`) of two connections is due at once, and the
 * upstream holds both runs' page 1 until released.
 */
let catalog: CatalogStack;

beforeAll(async () => {
  catalog = await startCatalogStack({
    upstream: { pages: 3, pageSize: 10, heldPage: 1, heldServings: 2 },
    stack: { serviceEnv: { 'action-runner': { FUNCTION_CONCURRENCY: '2' } } },
  });
}, 180_000);

afterAll(async () => {
  await catalog?.dispose();
}, 60_000);

it('a synchronous action finds a run slot while the syncs of two connections are due, and both syncs run in turn', async () => {
  const { stack, upstream, runEnds } = catalog;
  await eventually(async () => (upstream.served.get(1) === 1 ? true : undefined), 60_000, "the first connection's run to reach page 1", 100);
  const created = await http(`${stack.url}/connections`, {
    method: 'POST',
    token: stack.bootstrapKey,
    body: { provider_config_key: 'bulk', connection_id: 'conn-2', credentials: { type: 'API_KEY', apiKey: 'bulk-key' } },
  });
  expect(created.status).toBe(201);
  // The second connection's run is due at once: given the chance, it takes a slot within seconds.
  const deadline = Date.now() + 8_000;
  while (Date.now() < deadline && (upstream.served.get(0) ?? 0) < 2) await new Promise((resolve) => setTimeout(resolve, 100));

  const pinged = await fetch(`${stack.url}/action/trigger`, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.bootstrapKey}`, 'content-type': 'application/json', 'connection-id': 'conn-1', 'provider-config-key': 'bulk' },
    body: JSON.stringify({ action_name: 'ping' }),
  });
  expect({ status: pinged.status, body: await pinged.json() }).toEqual({ status: 200, body: { pong: true } });

  upstream.release();
  const ends = await eventually(async () => (runEnds.length >= 2 ? runEnds : undefined), 120_000, 'both runs to finish', 200);
  expect(ends.map((end) => [end.connection_id, end.failed]).sort()).toEqual([
    ['conn-1', false],
    ['conn-2', false],
  ]);
}, 240_000);
