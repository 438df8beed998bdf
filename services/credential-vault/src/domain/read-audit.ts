import { randomUUID } from 'node:crypto';
import { AppError } from '@latchkey/errors';
import type { Logger } from '@latchkey/logger';
import { settledWithin } from '@latchkey/runtime';
import type { CredentialReadDoc } from '../db/credential-read-model.js';

export type ReadEntry = Pick<CredentialReadDoc, 'environment_id' | 'connection' | 'key_id' | 'purpose'> & Pick<Partial<CredentialReadDoc>, 'caller'>;

interface Batch {
  groups: Map<string, CredentialReadDoc>;
  waiters: Array<{ resolve: () => void; reject: (error: AppError) => void }>;
}

/**
 * Records every read of plaintext credentials, durably and failing closed: `record` resolves
 * only once the database has acknowledged a document that counts this read, and a caller must
 * await it before the plaintext leaves the vault. If the write fails or outlasts `timeoutMs`,
 * it rejects with 503 `service_unavailable` and the read is refused: no audit, no plaintext.
 *
 * Group commit keeps the hot path cheap: while one insert is in flight, the reads that arrive
 * gather in the next batch (one document per connection, key and purpose, with their count),
 * written by one insert as soon as the previous one ends. A busy connection costs one document
 * per round trip to the database, not one per read, and nothing waits for a timer.
 */
export function createReadAudit(deps: { insertMany(docs: CredentialReadDoc[]): Promise<unknown>; logger: Logger }, options: { timeoutMs: number }) {
  let next: Batch | undefined;
  let writing: Promise<void> | undefined;

  async function write(batch: Batch): Promise<void> {
    try {
      const inserted = deps.insertMany([...batch.groups.values()]);
      if (!(await settledWithin(inserted, options.timeoutMs))) throw new Error(`no answer within ${options.timeoutMs} ms`);
      await inserted;
      for (const waiter of batch.waiters) waiter.resolve();
    } catch (error) {
      deps.logger.error('could not write the credential-read audit; the reads it covers are refused', { error, reads: batch.waiters.length });
      const refusal = new AppError('service_unavailable', 'The credential-read audit could not be written, so no credentials are served; try again');
      for (const waiter of batch.waiters) waiter.reject(refusal);
    }
  }

  /** Writes the gathered batches one after the other until none is left. */
  function drain(): void {
    if (writing !== undefined || next === undefined) return;
    const batch = next;
    next = undefined;
    writing = write(batch).finally(() => {
      writing = undefined;
      drain();
    });
  }

  return {
    record(entry: ReadEntry): Promise<void> {
      if (next === undefined) next = { groups: new Map(), waiters: [] };
      const batch = next;
      const group = groupOf(entry);
      const now = new Date();
      const existing = batch.groups.get(group);
      if (existing) {
        existing.count++;
        existing.last_at = now;
      } else {
        batch.groups.set(group, { _id: randomUUID(), ...entry, at: now, last_at: now, count: 1 });
      }
      const recorded = new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
      // Reads of this same tick join the batch before it is written.
      queueMicrotask(drain);
      return recorded;
    },
    /** Waits for every record asked for so far to be written (or refused). */
    async stop(): Promise<void> {
      while (writing !== undefined || next !== undefined) {
        drain();
        await writing;
      }
    },
  };
}

function groupOf(entry: Pick<CredentialReadDoc, 'connection' | 'key_id' | 'purpose' | 'caller'>): string {
  return `${entry.connection}|${entry.key_id}|${entry.purpose}|${entry.caller ?? ''}`;
}

export type ReadAudit = ReturnType<typeof createReadAudit>;
