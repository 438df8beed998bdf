import { describe, expect, it } from '@jest/globals';
import type { Bus, JobMessage } from '@latchkey/bus';
import { syncContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import type { Runner } from '../domain/run-function.js';
import { runSyncHandler } from './syncs.js';

const logger = createLogger({ service: 'test', silent: true });
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const REPORT_EVERY_MS = 40;

/**
 * The sync-scheduler's side of one run, as the handler sees it over the bus: the run begins,
 * takes reports and ends. `told` keeps, in order, each report and the end.
 */
function scheduler() {
  const told: string[] = [];
  const bus = {
    request: async (contract: { subject: string }) => {
      if (contract.subject === syncContracts.beginRun.subject) {
        return { run: { provider_config_key: 'crm', connection_id: 'c-1', sync_name: 'tickets', variant: 'base', started_at: new Date().toISOString(), checkpoint: null, results: {}, attempt: 1 } };
      }
      if (contract.subject === syncContracts.reportProgress.subject) told.push('progress');
      else if (contract.subject === syncContracts.finishRun.subject) told.push('finish');
      return { recorded: true };
    },
  } as unknown as Bus;
  return { bus, told };
}

/** A sync that writes nothing and saves no checkpoint while it `exec`s (what `exec` does is `body`). */
function silentSync(body: (signal: AbortSignal) => Promise<void>): Runner {
  return {
    loadFunction: async () => ({ version: 1, description: { type: 'sync', name: 'tickets', frequency: 'every hour', models: [], webhook_subscriptions: [] }, bundle: '' }),
    run: async ({ signal }: { signal: AbortSignal }) => {
      await body(signal);
      return { output: undefined, definition: { kind: 'sync', name: 'tickets' }, logs: [], writes: [] };
    },
  } as unknown as Runner;
}

const job = { environment_id: 'env_a', run_id: 'run-1' };
const delivered = { info: { deliveryCount: 1 } } as unknown as JobMessage;
const progressReports = (told: string[]) => told.filter((subject) => subject === 'progress').length;

describe('a sync run that writes nothing for a long while (paging a slow API, collecting before one write)', () => {
  // The scheduler takes a run that has not reported within SYNC_RUN_STALE_MS for lost and starts
  // another beside it; the runner reported only on writes and checkpoints, so a silent run was
  // taken over while it still ran.
  it('reports its counts on a timer while its attempt runs, and stops once the attempt is over', async () => {
    const { bus, told } = scheduler();
    const handle = runSyncHandler({ bus, logger, runner: silentSync(() => sleep(REPORT_EVERY_MS * 10)) }, { progressEveryMs: REPORT_EVERY_MS });
    await handle(job, delivered, new AbortController().signal);
    // Several times (timers run late on a loaded machine, so not all ten).
    expect(progressReports(told)).toBeGreaterThanOrEqual(2);
    expect(told.at(-1)).toBe('finish');
    const atEnd = told.length;
    await sleep(REPORT_EVERY_MS * 3);
    expect(told.length).toBe(atEnd);
  });

  it('stops reporting when its attempt fails', async () => {
    const { bus, told } = scheduler();
    const failing = silentSync(async () => {
      await sleep(REPORT_EVERY_MS * 3);
      throw new AppError('function_failed', 'the provider said no');
    });
    await runSyncHandler({ bus, logger, runner: failing }, { progressEveryMs: REPORT_EVERY_MS })(job, delivered, new AbortController().signal);
    expect(progressReports(told)).toBeGreaterThanOrEqual(1);
    expect(told.at(-1)).toBe('finish');
    const atEnd = told.length;
    await sleep(REPORT_EVERY_MS * 3);
    expect(told.length).toBe(atEnd);
  });

  it('stops reporting when its replica hands the run back', async () => {
    const { bus, told } = scheduler();
    const stopping = new AbortController();
    const handedBack = silentSync(
      (signal) =>
        new Promise<void>((_, reject) => {
          signal.addEventListener('abort', () => reject(new AppError('service_unavailable', 'stopping')), { once: true });
        }),
    );
    const handled = runSyncHandler({ bus, logger, runner: handedBack }, { progressEveryMs: REPORT_EVERY_MS })(job, delivered, stopping.signal);
    await sleep(REPORT_EVERY_MS * 3);
    stopping.abort();
    await expect(handled).rejects.toMatchObject({ code: 'service_unavailable' });
    expect(progressReports(told)).toBeGreaterThanOrEqual(1);
    const atEnd = told.length;
    await sleep(REPORT_EVERY_MS * 3);
    expect(told.length).toBe(atEnd);
    expect(told).not.toContain('finish');
  });
});
