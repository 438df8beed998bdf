import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { Latchkey } from '@latchkey/client';
import { startCatalogStack, type CatalogStack, type CatalogUpstream, type RunEnd } from './support/catalog-upstream.js';
import { eventually } from './support/functions.js';
import type { Stack } from './support/stack.js';

/**
 * A variant deleted while its run is in the middle: the run, still going, may write nothing
 * more. The sync `catalog` (`e2e/sync-long-functions/bulk/catalog.ts`) reads pages of items and
 * saves each; the base run reads them all, then the variant's run is held on its page
 * `HELD_PAGE` (the upstream's second serving of it) while the test deletes the variant. Once
 * let go, the run's save of that page is refused: the deleted variant keeps no records.
 */
const PAGES = 6;
const PAGE_SIZE = 50;
const HELD_PAGE = 3;

let catalog: CatalogStack;
let stack: Stack;
let client: Latchkey;
let upstream: CatalogUpstream;
let runEnds: RunEnd[];

beforeAll(async () => {
  catalog = await startCatalogStack({ upstream: { pages: PAGES, pageSize: PAGE_SIZE, heldPage: HELD_PAGE, heldServing: 2 } });
  ({ stack, client, upstream, runEnds } = catalog);
}, 120_000);

afterAll(() => catalog?.dispose(), 60_000);

const variantRecords = async (variant: string) =>
  (await client.listRecords({ providerConfigKey: 'bulk', connectionId: 'conn-1', model: 'Item', variant, limit: 1000 })).records.length;

/** What the action-runner counts of sync runs that ended in error. */
async function failedRuns(): Promise<number> {
  const runner = stack.replicas('action-runner')[0]!;
  const text = await (await fetch(`${runner.url}/metrics`)).text();
  const line = text.split('\n').find((entry) => entry.startsWith('latchkey_sync_runs_total{') && entry.includes('outcome="error"'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

it('refuses the writes of a run whose variant was deleted while it ran: the deleted variant keeps no records', async () => {
  // The deploy's base run reads every page, the held one included (its first serving).
  await eventually(async () => runEnds.find((end) => end.variant === 'base' && !end.failed), 120_000, 'the base run to finish');
  expect(await variantRecords('base')).toBe(PAGES * PAGE_SIZE);

  await client.createSyncVariant({ provider_config_key: 'bulk', connection_id: 'conn-1', name: 'catalog', variant: 'eu' });
  await eventually(async () => (upstream.served.get(HELD_PAGE) === 2 ? true : undefined), 120_000, "the variant's run to reach the held page", 50);
  expect(await variantRecords('eu')).toBe(HELD_PAGE * PAGE_SIZE);

  await client.deleteSyncVariant({ provider_config_key: 'bulk', connection_id: 'conn-1', name: 'catalog', variant: 'eu' });
  expect(await variantRecords('eu')).toBe(0);
  const failedBefore = await failedRuns();
  upstream.release();
  // The run gets its page, tries to save it, and ends in error: over, it may write nothing.
  await eventually(async () => ((await failedRuns()) > failedBefore ? true : undefined), 60_000, "the deleted variant's run to end", 100);
  expect(await variantRecords('eu')).toBe(0);
  // The next page was read once, by the base run: the variant's run went no further.
  expect(upstream.served.get(HELD_PAGE + 1)).toBe(1);
  expect(await variantRecords('base')).toBe(PAGES * PAGE_SIZE);
}, 300_000);
