import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { LatchkeyError, type Latchkey, type SyncStatus } from '@latchkey/client';
import { startCatalogStack, type CatalogStack, type CatalogUpstream, type RunEnd } from './support/catalog-upstream.js';
import { eventually } from './support/functions.js';
import type { Stack } from './support/stack.js';

/**
 * A sync of 100,000 records through the stack as it runs by default (FerretDB on SQLite here):
 * the sync `catalog` (`e2e/sync-long-functions/bulk/catalog.ts`) reads 100 pages of 1,000 items
 * from an upstream on loopback and saves a checkpoint after each page. The upstream holds page
 * `HELD_PAGE` until the test lets it go: meanwhile `GET /sync/status` shows the run's progress,
 * and the action-runner is killed (SIGKILL) in the middle of the run. The run is redelivered to
 * the restarted action-runner, which resumes from the checkpoint: the pages before it are never
 * fetched again. A second run then finds every record unchanged.
 *
 * The runs' ends are read from `sync.run.completed` / `failed` on NATS. `GET /sync/status` reads
 * each model's `recordCount` from the scope's head, kept by every write: it answers within the
 * default deadline however many records the scope holds.
 */
const PAGES = 100;
const PAGE_SIZE = 1000;
const HELD_PAGE = 10;
const TOTAL = PAGES * PAGE_SIZE;

let catalog: CatalogStack;
let stack: Stack;
let client: Latchkey;
let upstream: CatalogUpstream;
let runEnds: RunEnd[];

/** Status reads that found no answer in time (the scheduler counts the records for each). */
let slowStatusReads = 0;

async function catalogStatus(): Promise<SyncStatus | undefined> {
  try {
    const { syncs } = await client.syncStatus('bulk', ['catalog'], 'conn-1');
    return syncs.find((item) => item.variant === 'base');
  } catch (error) {
    if (error instanceof LatchkeyError && error.code === 'service_unavailable') {
      slowStatusReads++;
      return undefined;
    }
    throw error;
  }
}

beforeAll(async () => {
  catalog = await startCatalogStack({ upstream: { pages: PAGES, pageSize: PAGE_SIZE, heldPage: HELD_PAGE } });
  ({ stack, client, upstream, runEnds } = catalog);
}, 120_000);

afterAll(() => catalog?.dispose(), 60_000);

it('syncs 100,000 records, shows progress while it runs, resumes from its checkpoint after the action-runner is killed, and re-syncs unchanged', async () => {
  const started = Date.now();
  // The run waits on the held page: everything before it is saved, and the status says so.
  await eventually(async () => (upstream.served.has(HELD_PAGE) ? true : undefined), 300_000, `the run to reach page ${HELD_PAGE}`, 100);
  const reachedMs = Date.now() - started;
  const running = await eventually(
    async () => {
      const status = await catalogStatus();
      return status?.status === 'RUNNING' && status.progress?.records === HELD_PAGE * PAGE_SIZE ? status : undefined;
    },
    120_000,
    'the status to show the progress',
    1000,
  );
  expect(running.progress).toMatchObject({ records: HELD_PAGE * PAGE_SIZE, results: { Item: { added: HELD_PAGE * PAGE_SIZE, updated: 0, deleted: 0 } } });
  expect(running.progress?.startedAt).toEqual(expect.any(String));

  const runner = stack.services.find((proc) => proc.service === 'action-runner')!;
  runner.child.kill('SIGKILL');
  await new Promise((resolve) => runner.child.once('exit', resolve));
  upstream.release();
  await stack.restart('action-runner');

  // JetStream hands the run to the restarted replica once the dead one's ack wait (15 s) passed.
  const done = await eventually(async () => runEnds[0], 600_000, 'the resumed run to finish', 500);
  const firstMs = Date.now() - started;
  expect(done.failed).toBe(false);
  expect(done.error).toBeUndefined();
  // The run's counts: what the killed attempt reported, and what the resumed one wrote after the
  // checkpoint (its re-save of the held page's records found them unchanged).
  expect(done.results).toEqual({ Item: { added: TOTAL, updated: 0, deleted: 0 } });
  // Resumed, not started over: every page before the held one was fetched once; the held one
  // twice (the killed attempt asked for it, the resumed one started there).
  for (let page = 0; page < HELD_PAGE; page++) expect(upstream.served.get(page)).toBe(1);
  expect(upstream.served.get(HELD_PAGE)).toBe(2);
  for (let page = HELD_PAGE + 1; page < PAGES; page++) expect(upstream.served.get(page)).toBe(1);

  // A complete pass cleared the checkpoint: the next run reads all again and changes nothing.
  const resyncStarted = Date.now();
  await client.triggerSync('bulk', ['catalog'], 'conn-1');
  const again = await eventually(async () => runEnds[1], 300_000, 'the re-sync to finish', 500);
  const resyncMs = Date.now() - resyncStarted;
  expect(again.failed).toBe(false);
  expect(again.results).toEqual({ Item: { added: 0, updated: 0, deleted: 0 } });
  expect(upstream.served.get(0)).toBe(2);
  expect(upstream.served.get(PAGES - 1)).toBe(2);
  expect(runEnds).toHaveLength(2);
  const { syncs } = await client.syncStatus('bulk', ['catalog'], 'conn-1');
  expect(syncs.find((item) => item.variant === 'base')?.recordCount).toEqual({ Item: TOTAL });
  expect(slowStatusReads).toBe(0);
  process.stdout.write(`sync-checkpoints: ${HELD_PAGE * PAGE_SIZE} records in ${reachedMs} ms; all ${TOTAL} (killed and resumed) in ${firstMs} ms; unchanged re-sync in ${resyncMs} ms; ${slowStatusReads} status reads timed out\n`);
}, 1_200_000);
