import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { startCatalogStack, type CatalogStack } from './support/catalog-upstream.js';
import { eventually } from './support/functions.js';

/**
 * A `batchSave` larger than one NATS message (1 MiB here): the `catalog` sync
 * (`e2e/sync-long-functions/bulk/catalog.ts`) saves pages of 1,500 items of about 1 KB each,
 * 1.5 MB of JSON a batch. The functions runtime writes such a batch in as many requests as it
 * takes; before, the run failed with `payload_too_large` on its first page, every time.
 */
const PAGES = 2;
const PAGE_SIZE = 1500;

let catalog: CatalogStack;

beforeAll(async () => {
  catalog = await startCatalogStack({ upstream: { pages: PAGES, pageSize: PAGE_SIZE, heldPage: -1, nameBytes: 1000 } });
}, 120_000);

afterAll(() => catalog?.dispose(), 60_000);

it('saves batches larger than a NATS message, every record once', async () => {
  const done = await eventually(async () => catalog.runEnds[0], 120_000, 'the run to finish', 250);
  expect(done.error).toBeUndefined();
  expect(done.failed).toBe(false);
  expect(done.results).toEqual({ Item: { added: PAGES * PAGE_SIZE, updated: 0, deleted: 0 } });
  const ids = new Set<string>();
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<typeof catalog.client.listRecords>> = await catalog.client.listRecords({ providerConfigKey: 'bulk', connectionId: 'conn-1', model: 'Item', limit: 500, cursor });
    for (const record of page.records) ids.add(record['id'] as string);
    expect(page.records.every((record) => (record['name'] as string).length === 1000)).toBe(true);
    cursor = page.next_cursor;
  } while (cursor);
  expect(ids.size).toBe(PAGES * PAGE_SIZE);
}, 180_000);
