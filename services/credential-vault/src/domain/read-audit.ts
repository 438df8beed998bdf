import { randomUUID } from 'node:crypto';
import type { Logger } from '@latchkey/logger';
import type { CredentialReadDoc } from '../db/credential-read-model.js';

/**
 * Records every read of plaintext credentials. Entries are buffered and written in batches
 * (at most one insert a second), so the fetch hot path never waits on the audit.
 */
export function createReadAudit(deps: { insertMany(docs: CredentialReadDoc[]): Promise<unknown>; logger: Logger }, flushMs = 1000) {
  let buffer: CredentialReadDoc[] = [];
  const flush = async () => {
    if (buffer.length === 0) return;
    const batch = buffer;
    buffer = [];
    try {
      await deps.insertMany(batch);
    } catch (error) {
      deps.logger.error('could not write the credential-read audit', { error, entries: batch.length });
      buffer = batch.concat(buffer);
    }
  };
  const timer = setInterval(() => void flush(), flushMs);
  timer.unref();
  return {
    record(entry: Omit<CredentialReadDoc, '_id' | 'at'>): void {
      buffer.push({ _id: randomUUID(), at: new Date(), ...entry });
    },
    flush,
    stop: async () => {
      clearInterval(timer);
      await flush();
    },
  };
}

export type ReadAudit = ReturnType<typeof createReadAudit>;
