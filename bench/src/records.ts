import { createHash } from 'node:crypto';
import mongoose from 'mongoose';
import { createBus } from '@latchkey/bus';
import { gatewayContracts, recordsContracts } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';

/**
 * Records saved and read per second through Latchkey, against the same documents written with
 * mongoose's `insertMany` and read with `find` on the same database in the same run. Saving goes
 * through `records.write`, as a sync function's `batchSave` does (batches of 500); reading
 * through `GET /records` (pages of 1,000, following `next_cursor`). The baseline writes documents
 * of the store's shape into a collection with the store's indexes, so the ratio is what
 * Latchkey adds to the database's own work.
 */
export interface RecordsBenchOptions {
  natsUrl: string;
  /** Records are written as the action-runner writes them, under its identity. */
  natsIdentity: { user: string; password: string };
  mongoUri: string;
  /** The sync-scheduler's database: the baseline writes beside its records. */
  dbName: string;
  gatewayUrl: string;
  apiKey: string;
  adminToken: string;
  /** A connection of the bench's environment. */
  connection: { connection_id: string; provider_config_key: string };
  rounds: number;
}

const COUNT = 5000;
const BATCH = 500;
const PAGE = 1000;

function makeRecords(round: number) {
  return Array.from({ length: COUNT }, (_, i) => ({
    id: `r${round}-${i}`,
    name: `Record ${i}`,
    email: `person${i}@example.com`,
    score: i % 97,
    tags: ['bench', `group-${i % 10}`],
    address: { city: 'Lyon', zip: String(69000 + (i % 10)) },
  }));
}

const digest = (text: string) => createHash('sha256').update(text).digest('base64url');
const perSecond = (count: number, startedAt: bigint) => count / (Number(process.hrtime.bigint() - startedAt) / 1e9);

export async function benchRecords(options: RecordsBenchOptions) {
  const logger = createLogger({ service: 'bench', silent: true });
  const bus = await createBus({ servers: options.natsUrl, service: 'bench-records', identity: options.natsIdentity, logger, requestTimeoutMs: 60_000 });
  const db = await mongoose.createConnection(options.mongoUri, { dbName: options.dbName }).asPromise();
  try {
    const environments = (await (await fetch(`${options.gatewayUrl}/admin/environments`, { headers: { authorization: `Bearer ${options.adminToken}` } })).json()) as {
      data: Array<{ name: string; public_id: string }>;
    };
    const publicId = environments.data.find((environment) => environment.name === 'dev')!.public_id;
    const environmentId = (await bus.request(gatewayContracts.getEnvironment, { public_id: publicId })).id;
    // With the store's indexes: by record id (unique) and by change order, as reading needs.
    const baseline = db.collection<{ _id: string; seq: number }>('bench_baseline_records');
    await baseline.createIndex({ environment_id: 1, connection: 1, model: 1, variant: 1, external_id: 1 }, { unique: true });
    await baseline.createIndex({ environment_id: 1, connection: 1, model: 1, variant: 1, seq: 1 });
    const results = { apiWrite: [] as number[], plainWrite: [] as number[], apiRead: [] as number[], plainRead: [] as number[] };

    for (let round = 0; round < options.rounds; round++) {
      const model = `BenchRecord${round}`;
      const records = makeRecords(round);

      let started = process.hrtime.bigint();
      for (let at = 0; at < COUNT; at += BATCH) {
        const written = await bus.request(recordsContracts.write, {
          environment_id: environmentId,
          ...options.connection,
          model,
          variant: 'base',
          mode: 'save',
          records: records.slice(at, at + BATCH),
        });
        if (written.added !== Math.min(BATCH, COUNT - at)) throw new Error(`records.write added ${written.added}`);
      }
      results.apiWrite.push(perSecond(COUNT, started));

      // The same documents as the store keeps them: its key, the record as JSON text with its
      // content hash, the metadata and a sequence number.
      const now = new Date();
      const documents = records.map((record, seq) => {
        const payload = JSON.stringify(record);
        return {
          _id: digest(JSON.stringify([environmentId, round, model, 'base', record.id])),
          environment_id: environmentId,
          connection: round,
          model,
          variant: 'base',
          external_id: record.id,
          payload,
          hash: digest(payload),
          first_seen_at: now,
          last_modified_at: now,
          last_action: 'ADDED',
          deleted_at: null,
          pruned_at: null,
          seq,
        };
      });
      started = process.hrtime.bigint();
      for (let at = 0; at < COUNT; at += BATCH) await baseline.insertMany(documents.slice(at, at + BATCH), { ordered: true });
      results.plainWrite.push(perSecond(COUNT, started));

      started = process.hrtime.bigint();
      let read = 0;
      let cursor: string | null = null;
      do {
        const query = new URLSearchParams({ model, limit: String(PAGE), ...(cursor ? { cursor } : {}) });
        const response = await fetch(`${options.gatewayUrl}/records?${query}`, {
          headers: { authorization: `Bearer ${options.apiKey}`, 'connection-id': options.connection.connection_id, 'provider-config-key': options.connection.provider_config_key },
        });
        const page = (await response.json()) as { records: unknown[]; next_cursor: string | null };
        read += page.records.length;
        cursor = page.next_cursor;
      } while (cursor);
      if (read !== COUNT) throw new Error(`GET /records read ${read} records`);
      results.apiRead.push(perSecond(COUNT, started));

      started = process.hrtime.bigint();
      let plainRead = 0;
      let after = -1;
      for (;;) {
        const page = await baseline.find({ environment_id: environmentId, connection: round, model, variant: 'base', seq: { $gt: after } }).sort({ seq: 1 }).limit(PAGE).toArray();
        if (page.length === 0) break;
        plainRead += page.length;
        after = page.at(-1)!.seq;
      }
      if (plainRead !== COUNT) throw new Error(`find read ${plainRead} documents`);
      results.plainRead.push(perSecond(COUNT, started));
    }
    return results;
  } finally {
    await db.close();
    await bus.drain();
  }
}
