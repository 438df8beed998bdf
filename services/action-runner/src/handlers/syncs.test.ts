import { describe, expect, it } from '@jest/globals';
import type { Bus, JobMessage } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import type { ActionDeps } from '../domain/action-deps.js';
import type { SyncWrites } from '../domain/host.js';
import { runSyncHandler } from './syncs.js';

describe('a sync run attempt', () => {
  it("ends its writes when it ends, though a batch it did not await is still going: the next attempt's records are not overwritten", async () => {
    let scheduled: SyncWrites['scheduled'];
    // The transport alone (no I/O in a unit test): the scheduler's answers to the run's requests.
    const bus = {
      request: async (contract: { subject: string }) => {
        if (contract.subject === 'sync.run.begin') return { run: { provider_config_key: 'crm', connection_id: 'c-1', sync_name: 'contacts', variant: 'base', started_at: new Date().toISOString(), checkpoint: null, results: {} } };
        return { recorded: true };
      },
    } as unknown as Bus;
    const runner = {
      loadFunction: async () => ({ description: { type: 'sync', name: 'contacts', models: [] }, bundle: '' }),
      // The function returns, leaving a batch's later parts to the host.
      run: async (options: { sync: SyncWrites }) => {
        scheduled = options.sync.scheduled;
        return { output: undefined, definition: undefined, logs: [], writes: [] };
      },
    } as unknown as ActionDeps['runner'];
    const handle = runSyncHandler({ bus, logger: createLogger({ service: 'test', silent: true }), runner });
    await handle({ environment_id: 'env_1', run_id: 'run_1' }, { info: { deliveryCount: 1 } } as unknown as JobMessage, new AbortController().signal);
    expect(scheduled?.signal?.aborted).toBe(true);
  });
});
