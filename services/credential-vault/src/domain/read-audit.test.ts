import { describe, expect, it } from '@jest/globals';
import { createLogger } from '@latchkey/logger';
import type { CredentialReadDoc } from '../db/credential-read-model.js';
import { createReadAudit } from './read-audit.js';

describe('credential-read audit', () => {
  it('writes one document per connection, key and purpose per flush, with the count', async () => {
    const written: CredentialReadDoc[][] = [];
    const audit = createReadAudit({ insertMany: async (docs) => written.push(docs), logger: createLogger({ service: 'test', silent: true }) }, 60_000);
    for (let i = 0; i < 5; i++) audit.record({ environment_id: 'env', connection: 'c1', key_id: 'k1', purpose: 'fetch' });
    audit.record({ environment_id: 'env', connection: 'c1', key_id: 'k2', purpose: 'fetch' });
    await audit.stop();
    expect(written).toHaveLength(1);
    expect(written[0]!.map((doc) => [doc.key_id, doc.count]).sort()).toEqual([
      ['k1', 5],
      ['k2', 1],
    ]);
  });

  it('keeps what it could not write for the next flush', async () => {
    let fail = true;
    const written: CredentialReadDoc[] = [];
    const audit = createReadAudit(
      {
        insertMany: async (docs) => {
          if (fail) throw new Error('database away');
          written.push(...docs);
        },
        logger: createLogger({ service: 'test', silent: true }),
      },
      60_000,
    );
    audit.record({ environment_id: 'env', connection: 'c1', key_id: 'k1', purpose: 'fetch' });
    await audit.flush();
    audit.record({ environment_id: 'env', connection: 'c1', key_id: 'k1', purpose: 'fetch' });
    fail = false;
    await audit.stop();
    expect(written.map((doc) => doc.count)).toEqual([2]);
  });
});
