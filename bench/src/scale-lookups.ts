import { createHash, randomBytes } from 'node:crypto';
import mongoose from 'mongoose';

/**
 * `make bench-scale`'s connections and API-keys parts. The background data (the connections
 * and keys beside the probed ones) goes in bulk into the owning service's collections, in the
 * shape its repo writes (the document, its `_id` lookup entry and, for connections, its list
 * entries); the probed connections and keys are made through the real API, so each probe is a
 * first read (a cache miss).
 */
export interface LookupBench {
  mongoUri: string;
  /** The vault's and the gateway's databases. */
  vaultDb: string;
  gatewayDb: string;
  environmentId: string;
  api(method: string, path: string, body?: unknown, secret?: string): Promise<unknown>;
  admin(method: string, path: string, body?: unknown): Promise<unknown>;
  /** Records one operation's milliseconds at a size. */
  record(name: string, size: number, ms: number): void;
  note(text: string): void;
}

const PROBES = 5;
const BULK = 5000;
const PROVIDER_CONFIG_KEY = 'scale-upstream';

/** The median of `PROBES` runs, each on a fresh subject (a first read). */
async function median(runs: Array<() => Promise<number>>): Promise<number> {
  const values: number[] = [];
  for (const run of runs) values.push(await run());
  return values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
}

async function timeOnce(work: () => Promise<unknown>): Promise<number> {
  const startedAt = process.hrtime.bigint();
  await work();
  return Number(process.hrtime.bigint() - startedAt) / 1e6;
}

/** A background connection as the vault's repo stores it (credentials are never read). */
function connectionDoc(environmentId: string, i: number) {
  const now = new Date();
  return {
    _id: `conn_bulk_${i}`,
    id: 10_000_000 + i,
    environment_id: environmentId,
    integration_id: 'int_bulk',
    provider_config_key: i % 2 === 0 ? PROVIDER_CONFIG_KEY : 'scale-other',
    provider: 'scale-upstream',
    // The first 100 ids hold `cohort`: a search whose page is the same at every size.
    connection_id: i < 100 ? `bulk-${i}-cohort` : `bulk-${i}`,
    credentials_type: 'API_KEY',
    credentials: randomBytes(48).toString('base64'),
    credentials_version: 0,
    expires_at: null,
    metadata: {},
    connection_config: {},
    // `cohort` tags the first 100 connections only: a filter whose page is the same at every size.
    tags: i < 100 ? { team: `t${i % 100}`, cohort: 'first' } : { team: `t${i % 100}` },
    end_user: { id: `user-${i % 1000}` },
    errors: [],
    refresh_failure: null,
    created_via_session: false,
    created_at: now,
    updated_at: now,
    last_fetched_at: null,
    listed: true,
    searchable: true,
  };
}

type Bulk = Array<[string, Record<string, unknown>]>;

async function bulkLoad(db: mongoose.mongo.Db, from: number, to: number, make: (i: number) => Bulk, batch: (docs: Bulk) => Promise<Bulk> = async () => []) {
  for (let start = from; start < to; start += BULK) {
    const made: Bulk = [];
    for (let i = start; i < Math.min(to, start + BULK); i++) made.push(...make(i));
    const byCollection = new Map<string, Array<Record<string, unknown>>>();
    for (const [collection, doc] of [...made, ...(await batch(made))]) {
      const docs = byCollection.get(collection) ?? byCollection.set(collection, []).get(collection)!;
      docs.push(doc);
    }
    for (const [collection, docs] of byCollection) await db.collection(collection).insertMany(docs as never[], { ordered: false });
  }
}

/**
 * A connection id's search lists, as the vault's connection-grams.ts makes them: one per distinct
 * trigram (by code point) of the lowercased id, or the long ids' list past 64 characters.
 */
function searchLists(connectionId: string): string[][] {
  if (Array.from(connectionId).length > 64) return [['long_id']];
  const characters = Array.from(connectionId.toLowerCase());
  const grams = new Set<string>();
  for (let start = 0; start + 3 <= characters.length; start++) grams.add(characters.slice(start, start + 3).join(''));
  return [...grams].map((gram) => ['gram', gram]);
}

/**
 * The list entries of a batch of connections, as the vault's connection-lists.ts writes them:
 * each list's next numbers (after its head and any entries past it), listed when created (the
 * vault lists a connection the moment it stores it), and the heads raised after.
 */
async function listEntries(db: mongoose.mongo.Db, connections: Array<Record<string, unknown>>): Promise<Bulk> {
  const heads = db.collection<{ _id: string; top: number }>('connection_lists');
  const entries = db.collection<{ _id: string }>('connection_list_entries');
  const tops = new Map<string, number>();
  const made: Bulk = [];
  for (const doc of connections) {
    const t = (doc['created_at'] as Date).getTime();
    const environment = doc['environment_id'] as string;
    const tags = Object.entries(doc['tags'] as Record<string, string>).map(([key, value]) => ['tag', key, value]);
    const lists = [['all'], ['integration', doc['provider_config_key']], ...tags, ['end_user', (doc['end_user'] as { id: string }).id], ...searchLists(doc['connection_id'] as string)];
    for (const list of lists) {
      const head = JSON.stringify([environment, ...list]);
      let top = tops.get(head);
      if (top === undefined) {
        top = (await heads.findOne({ _id: head }))?.top ?? 0;
        while (await entries.findOne({ _id: JSON.stringify([environment, ...list, top + 1]) })) top += 1;
      }
      tops.set(head, top + 1);
      made.push(['connection_list_entries', { _id: JSON.stringify([environment, ...list, top + 1]), c: doc['_id'], n: doc['connection_id'], t }]);
    }
  }
  for (const [head, top] of tops) await heads.updateOne({ _id: head }, { $max: { top } }, { upsert: true });
  return made;
}

export async function benchConnections(bench: LookupBench, sizes: number[]): Promise<void> {
  const client = await mongoose.mongo.MongoClient.connect(bench.mongoUri);
  try {
    const db = client.db(bench.vaultDb);
    let loaded = 0;
    let probe = 0;
    for (const size of sizes) {
      await bulkLoad(
        db,
        loaded,
        size,
        (i) => {
          const doc = connectionDoc(bench.environmentId, i);
          return [
            ['connections', doc],
            ['connection_keys', { _id: JSON.stringify([doc.environment_id, doc.provider_config_key, doc.connection_id]), connection: doc._id }],
          ];
        },
        (made) => listEntries(db, made.filter(([collection]) => collection === 'connections').map(([, doc]) => doc)),
      );
      loaded = size;
      bench.note(`${size} connections in the environment (bulk, in the vault's shape)`);
      const fresh = async () => {
        const connectionId = `probe-${probe++}`;
        await bench.api('POST', '/connections', { connection_id: connectionId, provider_config_key: PROVIDER_CONFIG_KEY, credentials: { type: 'API_KEY', apiKey: 'k' } });
        return connectionId;
      };
      const ids: string[] = [];
      for (let i = 0; i < PROBES; i++) ids.push(await fresh());
      const read = (id: string) => () => timeOnce(() => bench.api('GET', `/connections/${id}?provider_config_key=${PROVIDER_CONFIG_KEY}`));
      bench.record('GET /connections/{id}, cache miss', size, await median(ids.map(read)));
      const lists: Array<[string, string]> = [
        ['GET /connections (no filter)', ''],
        ['GET /connections?connectionId', `connectionId=bulk-${size - 3}`],
        ['GET /connections?integrationId', `integrationId=${PROVIDER_CONFIG_KEY}`],
        ['GET /connections?tags', 'tags[team]=t7'],
        ['GET /connections?tags (100 at every size)', 'tags[cohort]=first'],
        ['GET /connections?endUserId', 'endUserId=user-7'],
        ['GET /connections?search', 'search=bulk-12'],
        ['GET /connections?search (100 at every size)', 'search=cohort'],
      ];
      for (const [name, query] of lists) bench.record(name, size, await timeOnce(() => bench.api('GET', `/connections?limit=100&${query}`)));
    }
  } finally {
    await client.close();
  }
}

export async function benchApiKeys(bench: LookupBench, sizes: number[]): Promise<void> {
  const client = await mongoose.mongo.MongoClient.connect(bench.mongoUri);
  try {
    const db = client.db(bench.gatewayDb);
    const account = (await db.collection<{ account_id: string }>('api_keys').findOne({}))!.account_id;
    let loaded = 0;
    for (const size of sizes) {
      await bulkLoad(db, loaded, size, (i) => {
        const digest = createHash('sha256').update(`bulk-${i}`).digest('hex');
        const _id = `key_bulk_${i}`;
        return [
          ['api_keys', { _id, environment_id: bench.environmentId, account_id: account, display_name: `bulk ${i}`, scopes: 'full_access', digest, hint: 'lk_sk_bulk', created_at: new Date(), last_used_at: null }],
          ['api_key_digests', { _id: digest, key_id: _id, environment_id: bench.environmentId }],
        ];
      });
      loaded = size;
      bench.note(`${size} API keys in the environment (bulk, in the gateway's shape)`);
      const secrets: string[] = [];
      for (let i = 0; i < PROBES; i++) {
        const created = (await bench.admin('POST', '/admin/environments/dev/api-keys', { display_name: `probe ${size} ${i}`, scopes: 'full_access' })) as { data: { secret: string } };
        secrets.push(created.data.secret);
      }
      const first = (secret: string) => () => timeOnce(() => bench.api('GET', '/integrations', undefined, secret));
      bench.record('authenticate a new key (its first request)', size, await median(secrets.map(first)));
    }
  } finally {
    await client.close();
  }
}
