import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { Latchkey } from '@latchkey/client';
import { syncContracts, type PayloadOf } from '@latchkey/contracts';
import { repoRoot } from '@latchkey/testing';
import { deployWithCli } from './functions.js';
import { apiKeyProviderYaml, seedApiKeyConnection, writeProvidersFile } from './providers.js';
import { startStack, type Stack, type StackOptions } from './stack.js';

/**
 * The provider of the `catalog` sync (`e2e/sync-long-functions/bulk/catalog.ts`) on loopback:
 * `pages` pages of `pageSize` items at `/items?page=n` behind `x-api-key: bulk-key`, each page
 * naming the next. The first request for `heldPage` (or the `heldServing`th) is answered only
 * once `release()` is called, so a test knows a run is in the middle while it stops or kills
 * what runs it.
 */
export interface CatalogUpstream {
  url: string;
  /** How often each page was served. */
  served: Map<number, number>;
  /** When each request for a page arrived (ms since the epoch), in order. */
  askedAt: Map<number, number[]>;
  release(): void;
  close(): void;
}

/**
 * `heldServing`: which serving of `heldPage` waits for `release` (the first by default), and
 * `heldServings` how many from it on (one by default: one run held);
 * `nameBytes`: each item's name padded to this length (for batches larger than a NATS message).
 */
export async function startCatalogUpstream(options: {
  pages: number;
  pageSize: number;
  heldPage: number;
  heldServing?: number;
  heldServings?: number;
  nameBytes?: number;
}): Promise<CatalogUpstream> {
  const { pages, pageSize, heldPage, heldServing = 1, heldServings = 1, nameBytes = 0 } = options;
  const served = new Map<number, number>();
  const askedAt = new Map<number, number[]>();
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const itemsOf = (page: number) =>
    Array.from({ length: pageSize }, (_, index) => {
      const rank = page * pageSize + index;
      return { id: `item-${rank}`, name: `Item ${rank}`.padEnd(nameBytes, '.'), rank };
    });
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (req.headers['x-api-key'] !== 'bulk-key' || url.pathname !== '/items') {
      res.writeHead(req.headers['x-api-key'] === 'bulk-key' ? 404 : 401).end();
      return;
    }
    const page = Number(url.searchParams.get('page'));
    served.set(page, (served.get(page) ?? 0) + 1);
    askedAt.set(page, [...(askedAt.get(page) ?? []), Date.now()]);
    const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ items: itemsOf(page), next: page + 1 < pages ? page + 1 : null }));
    const serving = served.get(page)!;
    if (page === heldPage && serving >= heldServing && serving < heldServing + heldServings) void held.then(answer);
    else answer();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    served,
    askedAt,
    release: () => release(),
    close: () => {
      release();
      server.close();
    },
  };
}

/** A sync run's end as NATS announced it: `sync.run.completed`, or `sync.run.failed` (`failed`). */
export type RunEnd = PayloadOf<typeof syncContracts.runCompleted> & { failed: boolean };

/** Collects every sync run's end from now on, in the order they come; `stop` unsubscribes. */
export async function collectRunEnds(nc: NatsConnection): Promise<{ ends: RunEnd[]; stop(): void }> {
  const ends: RunEnd[] = [];
  const subscriptions = ([[syncContracts.runCompleted, false], [syncContracts.runFailed, true]] as const).map(([contract, failed]) => {
    const subscription = nc.subscribe(contract.subject);
    void (async () => {
      for await (const message of subscription) ends.push({ ...(message.json() as PayloadOf<typeof syncContracts.runCompleted>), failed });
    })();
    return subscription;
  });
  await nc.flush();
  return { ends, stop: () => subscriptions.forEach((subscription) => subscription.unsubscribe()) };
}

/** What the tests of the `catalog` sync share: its upstream, the stack, a client, NATS, and every run's end. */
export interface CatalogStack {
  upstream: CatalogUpstream;
  stack: Stack;
  client: Latchkey;
  nc: NatsConnection;
  runEnds: RunEnd[];
  dispose(): Promise<void>;
}

/**
 * The upstream, then the stack calling it (`PROXY_TIMEOUT_MS` two minutes: a held page waits
 * while the test acts), connection `conn-1` of integration `bulk`, and the functions of
 * `e2e/sync-long-functions` deployed, whose sync's first run starts at once. `beforeDeploy`
 * runs just before that deployment (to subscribe, or stop a replica).
 */
export async function startCatalogStack(options: {
  upstream: Parameters<typeof startCatalogUpstream>[0];
  stack?: Omit<StackOptions, 'env'>;
  beforeDeploy?: (started: Pick<CatalogStack, 'stack' | 'nc'>) => Promise<void>;
}): Promise<CatalogStack> {
  const upstream = await startCatalogUpstream(options.upstream);
  const stack = await startStack({
    ...options.stack,
    env: { PROVIDERS_FILE: writeProvidersFile(apiKeyProviderYaml(upstream.url)), PROXY_ALLOW_CIDRS: '127.0.0.1/32', PROXY_TIMEOUT_MS: '120000' },
  });
  const client = new Latchkey({ host: stack.url, apiKey: stack.bootstrapKey });
  const nc = await stack.connectNats();
  const { ends: runEnds, stop } = await collectRunEnds(nc);
  await seedApiKeyConnection(stack, 'bulk', 'conn-1', 'bulk-key');
  await options.beforeDeploy?.({ stack, nc });
  await deployWithCli(join(repoRoot(), 'e2e', 'sync-long-functions'), stack);
  return {
    upstream,
    stack,
    client,
    nc,
    runEnds,
    dispose: async () => {
      stop();
      await nc.close();
      await stack.dispose();
      upstream.close();
    },
  };
}
