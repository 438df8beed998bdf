import { randomUUID } from 'node:crypto';
import type { Logger } from '@latchkey/logger';
import type { CredentialReadDoc } from '../db/credential-read-model.js';

/**
 * Records every read of plaintext credentials. Reads are counted in memory per connection, key
 * and purpose, and written once per flush interval (one document per group, one insert per
 * flush), so the fetch hot path never waits on the audit and a busy connection costs the
 * database one document a second, not one per read.
 */
export function createReadAudit(deps: { insertMany(docs: CredentialReadDoc[]): Promise<unknown>; logger: Logger }, flushMs = 1000) {
  let groups = new Map<string, CredentialReadDoc>();
  const flush = async () => {
    if (groups.size === 0) return;
    const batch = [...groups.values()];
    groups = new Map();
    try {
      await deps.insertMany(batch);
    } catch (error) {
      deps.logger.error('could not write the credential-read audit', { error, entries: batch.length });
      for (const doc of batch) {
        const pending = groups.get(groupOf(doc));
        if (pending) {
          pending.count += doc.count;
          pending.at = doc.at;
        } else {
          groups.set(groupOf(doc), doc);
        }
      }
    }
  };
  const timer = setInterval(() => void flush(), flushMs);
  timer.unref();
  return {
    record(entry: Pick<CredentialReadDoc, 'environment_id' | 'connection' | 'key_id' | 'purpose'> & Pick<Partial<CredentialReadDoc>, 'caller'>): void {
      const group = groupOf(entry);
      const now = new Date();
      const existing = groups.get(group);
      if (existing) {
        existing.count++;
        existing.last_at = now;
      } else {
        groups.set(group, { _id: randomUUID(), ...entry, at: now, last_at: now, count: 1 });
      }
    },
    flush,
    stop: async () => {
      clearInterval(timer);
      await flush();
    },
  };
}

function groupOf(entry: Pick<CredentialReadDoc, 'connection' | 'key_id' | 'purpose' | 'caller'>): string {
  return `${entry.connection}|${entry.key_id}|${entry.purpose}|${entry.caller ?? ''}`;
}

export type ReadAudit = ReturnType<typeof createReadAudit>;
