import { counter, histogram } from '@latchkey/metrics';
import type { ReadAudit } from './domain/read-audit.js';

const refreshes = counter('latchkey_vault_refreshes_total');
const lockWait = histogram('latchkey_vault_refresh_lock_wait_seconds');
const reads = counter('latchkey_vault_credential_reads_total');

/**
 * How a refresh this replica made ended: `success`, `superseded` (a newer one stored first),
 * `failed`, `deferred` (the token endpoint failed for now and the token in hand, still valid, was
 * handed out: nothing recorded against the connection), or `recovered` (it stored the answer
 * another holder of the lock got and did not store).
 */
export const countRefresh = (outcome: 'success' | 'superseded' | 'failed' | 'deferred' | 'recovered'): void => refreshes.inc({ outcome });

/** Time spent waiting for another replica's refresh lock on a connection. */
export const observeLockWait = (seconds: number): void => lockWait.observe(seconds);

/** Counts each plaintext read once its audit is written (reads refused for want of an audit are not reads). */
export function countingReads(audit: ReadAudit): ReadAudit {
  return {
    ...audit,
    record: (entry) => audit.record(entry).then(() => reads.inc({ purpose: entry.purpose })),
  };
}
