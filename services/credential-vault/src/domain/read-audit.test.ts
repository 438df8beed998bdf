import { describe, expect, it } from '@jest/globals';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import type { CredentialReadDoc } from '../db/credential-read-model.js';
import { createReadAudit } from './read-audit.js';

const logger = createLogger({ service: 'test', silent: true });
const read = (key_id: string) => ({ environment_id: 'env', connection: 'c1', key_id, purpose: 'fetch' as const });

describe('credential-read audit', () => {
  it('counts reads of one tick in one document per connection, key and purpose, and resolves them once written', async () => {
    const written: CredentialReadDoc[][] = [];
    const audit = createReadAudit({ insertMany: async (docs) => written.push(docs), logger }, { timeoutMs: 1000 });
    const reads = [...Array.from({ length: 5 }, () => audit.record(read('k1'))), audit.record(read('k2'))];
    await Promise.all(reads);
    expect(written).toHaveLength(1);
    expect(written[0]!.map((doc) => [doc.key_id, doc.count]).sort()).toEqual([
      ['k1', 5],
      ['k2', 1],
    ]);
  });

  it('resolves a read only after the insert that counts it has been acknowledged', async () => {
    let acknowledge: () => void = () => undefined;
    const audit = createReadAudit({ insertMany: () => new Promise<void>((resolve) => (acknowledge = resolve)), logger }, { timeoutMs: 1000 });
    let done = false;
    const recorded = audit.record(read('k1')).then(() => (done = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(done).toBe(false);
    acknowledge();
    await recorded;
    expect(done).toBe(true);
  });

  it('gathers the reads that arrive during a write into the next insert', async () => {
    const written: number[] = [];
    const audit = createReadAudit(
      { insertMany: async (docs) => { await new Promise((resolve) => setTimeout(resolve, 10)); written.push(docs[0]!.count); }, logger },
      { timeoutMs: 1000 },
    );
    const first = audit.record(read('k1'));
    await new Promise((resolve) => setTimeout(resolve, 2));
    await Promise.all([first, audit.record(read('k1')), audit.record(read('k1'))]);
    expect(written).toEqual([1, 2]);
  });

  it('fails closed: a failed or late write refuses the reads it covers with service_unavailable', async () => {
    const failing = createReadAudit({ insertMany: async () => { throw new Error('database away'); }, logger }, { timeoutMs: 1000 });
    await expect(failing.record(read('k1'))).rejects.toMatchObject({ code: 'service_unavailable' });
    // A driver that throws before it returns a promise (a closed client, say) is refused the same way.
    const throwing = createReadAudit({ insertMany: () => { throw new Error('client closed'); }, logger }, { timeoutMs: 1000 });
    await expect(throwing.record(read('k1'))).rejects.toMatchObject({ code: 'service_unavailable' });
    const hanging = createReadAudit({ insertMany: () => new Promise(() => undefined), logger }, { timeoutMs: 30 });
    const refusal = await hanging.record(read('k1')).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(AppError);
    expect((refusal as AppError).code).toBe('service_unavailable');
  });
});
