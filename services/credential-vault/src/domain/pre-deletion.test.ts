import { describe, expect, it, jest } from '@jest/globals';
import type { Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import type { ConnectionDoc } from '../db/connection-model.js';
import { announcePreDeletion } from './connections.js';

const doc = { _id: 'c1', environment_id: 'env', id: 1, connection_id: 'x', provider_config_key: 'p', provider: 'p', tags: {} } as unknown as ConnectionDoc;
const logger = createLogger({ service: 'credential-vault', level: 'error' });
const busWith = (publish: () => Promise<void>) => ({ publish }) as unknown as Bus;

describe('connection.pre_deletion', () => {
  it('never fails a deletion when it cannot be stored', async () => {
    await expect(announcePreDeletion({ bus: busWith(() => Promise.reject(new Error('no JetStream'))), logger }, doc)).resolves.toBeUndefined();
  });

  it('never holds a deletion for more than a second', async () => {
    // On the test's own clock: a loaded machine can fire a real timer late, not the code wait longer.
    jest.useFakeTimers();
    try {
      let done = false;
      void announcePreDeletion({ bus: busWith(() => new Promise(() => undefined)), logger }, doc).then(() => (done = true));
      await jest.advanceTimersByTimeAsync(999);
      expect(done).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      expect(done).toBe(true);
    } finally {
      jest.useRealTimers();
    }
  });
});
