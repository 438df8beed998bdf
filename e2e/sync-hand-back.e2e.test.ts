import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { Subscription } from '@nats-io/transport-node';
import type { Latchkey } from '@latchkey/client';
import type { GivenUpMessage } from '@latchkey/contracts';
import { startCatalogStack, type CatalogStack, type CatalogUpstream, type RunEnd } from './support/catalog-upstream.js';
import { eventually } from './support/functions.js';
import type { Stack } from './support/stack.js';

/**
 * SIGTERM to the action-runner replica in the middle of a sync run that lasts longer than its
 * shutdown timeout: the replica disposes the run's isolate, hands the run back (its message
 * nak'ed, not finished as failed) and exits 0 well within `SHUTDOWN_TIMEOUT_MS`; the other
 * replica takes the run at once (not after the ack wait) and resumes it from the checkpoint the
 * function saved last. The sync is `catalog` (`e2e/sync-long-functions/bulk/catalog.ts`), which
 * saves a checkpoint after each page; the upstream holds page `HELD_PAGE` on its first request,
 * so the run cannot finish while the first replica has it.
 */
const PAGES = 20;
const PAGE_SIZE = 100;
const HELD_PAGE = 6;
const TOTAL = PAGES * PAGE_SIZE;
const SHUTDOWN_TIMEOUT_MS = 8000;
/** The consumers' ack wait: a message of a replica that died comes back only after it. */
const ACK_WAIT_MS = 15_000;

let catalog: CatalogStack;
let stack: Stack;
let client: Latchkey;
let upstream: CatalogUpstream;
let runEnds: RunEnd[];
const givenUp: GivenUpMessage[] = [];
let givenUpSubscription: Subscription | undefined;

beforeAll(async () => {
  catalog = await startCatalogStack({
    upstream: { pages: PAGES, pageSize: PAGE_SIZE, heldPage: HELD_PAGE },
    stack: { replicas: { 'action-runner': 2 }, serviceEnv: { 'action-runner': { SHUTDOWN_TIMEOUT_MS: String(SHUTDOWN_TIMEOUT_MS) } } },
    beforeDeploy: async ({ stack: started, nc }) => {
      // Every service's given-up records (`events.message.given_up.<service>`).
      const subscription = (givenUpSubscription = nc.subscribe('events.message.given_up.*'));
      void (async () => {
        for await (const message of subscription) givenUp.push(message.json() as GivenUpMessage);
      })();
      await nc.flush();
      // The first replica alone takes the deployed sync's first run (it starts at once).
      expect(await started.stop('action-runner', 1)).toBe(0);
    },
  });
  ({ stack, client, upstream, runEnds } = catalog);
}, 180_000);

afterAll(async () => {
  givenUpSubscription?.unsubscribe();
  await catalog?.dispose();
}, 60_000);

it('a replica given SIGTERM mid-sync hands the run back and exits 0 in time; the other resumes it from its checkpoint, once, records whole', async () => {
  await eventually(async () => (upstream.served.has(HELD_PAGE) ? true : undefined), 120_000, `the run to reach page ${HELD_PAGE}`, 100);
  // The second replica is up and idle before the first one stops.
  await stack.start('action-runner', 1);

  const signalledAt = Date.now();
  const exitCode = await stack.stop('action-runner', 0);
  const stoppedMs = Date.now() - signalledAt;
  expect({ exitCode, withinTimeout: stoppedMs < SHUTDOWN_TIMEOUT_MS }).toEqual({ exitCode: 0, withinTimeout: true });

  const done = await eventually(async () => runEnds[0], 120_000, 'the resumed run to finish', 200);
  expect(done.failed).toBe(false);
  expect(done.error).toBeUndefined();
  // The resumed attempt starts at the checkpoint: it writes the records from the held page on,
  // and the run counts them with what the handed-back attempt reported.
  expect(done.results).toEqual({ Item: { added: TOTAL, updated: 0, deleted: 0 } });
  // Handed back at once: the other replica asked for the held page long before the ack wait.
  const resumedAfterMs = upstream.askedAt.get(HELD_PAGE)![1]! - signalledAt;
  expect(resumedAfterMs).toBeLessThan(ACK_WAIT_MS / 2);
  for (let page = 0; page < HELD_PAGE; page++) expect(upstream.served.get(page)).toBe(1);
  expect(upstream.served.get(HELD_PAGE)).toBe(2);
  for (let page = HELD_PAGE + 1; page < PAGES; page++) expect(upstream.served.get(page)).toBe(1);

  // Every item stored once.
  const ids: string[] = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<typeof client.listRecords>> = await client.listRecords({ providerConfigKey: 'bulk', connectionId: 'conn-1', model: 'Item', limit: 500, ...(cursor ? { cursor } : {}) });
    ids.push(...page.records.map((record) => String(record['id'])));
    cursor = page.next_cursor;
  } while (cursor);
  expect(ids).toHaveLength(TOTAL);
  expect(new Set(ids).size).toBe(TOTAL);

  // One end of the run, a success; nothing was given up.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  expect(runEnds).toHaveLength(1);
  expect(givenUp).toEqual([]);
  process.stdout.write(`sync-hand-back: replica stopped in ${stoppedMs} ms; the other asked for the held page ${resumedAfterMs} ms after the signal\n`);
}, 300_000);
