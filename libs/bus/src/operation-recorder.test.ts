import { describe, expect, it } from '@jest/globals';
import type { Operation } from '@latchkey/contracts';
import { createOperationLog, traceIdOf, type RecordedOperation } from './operation-recorder.js';

const quiet = { warn: () => undefined };

const proxyCall = (n: number): RecordedOperation => ({
  type: 'proxy',
  environment_id: 'env-1',
  status: 'success',
  started_at: new Date(1_700_000_000_000 + n).toISOString(),
  duration_ms: 3,
  proxy: { method: 'GET', path: `/items/${n}`, upstream_status: 200 },
});

describe('the operation log', () => {
  it('sends what arrives together as one batch after flushMs, with unique ids', async () => {
    const batches: Operation[][] = [];
    const log = createOperationLog({ logger: quiet, flushMs: 20, send: async (batch) => void batches.push(batch) });
    for (let n = 0; n < 5; n++) log.record(proxyCall(n));
    expect(batches).toHaveLength(0);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(batches.map((batch) => batch.length)).toEqual([5]);
    expect(new Set(batches[0]?.map((operation) => operation.id)).size).toBe(5);
    expect(log.stats()).toEqual({ sent: 5, dropped: 0, failed: 0 });
  });

  it('sends a full batch at once, without waiting for the timer', async () => {
    const batches: Operation[][] = [];
    const log = createOperationLog({ logger: quiet, flushMs: 60_000, maxBatch: 3, send: async (batch) => void batches.push(batch) });
    for (let n = 0; n < 7; n++) log.record(proxyCall(n));
    expect(batches.map((batch) => batch.length)).toEqual([3, 3]);
    await log.flush();
    expect(batches.map((batch) => batch.length)).toEqual([3, 3, 1]);
  });

  it('holds at most maxBuffered operations, dropping and counting the rest, and never waits on a slow send', async () => {
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const log = createOperationLog({ logger: quiet, flushMs: 1, maxBatch: 4, maxBuffered: 10, send: () => stuck });
    for (let n = 0; n < 25; n++) log.record(proxyCall(n));
    expect(log.stats().dropped).toBe(15);
    release();
    await log.flush();
    expect(log.stats()).toEqual({ sent: 10, dropped: 15, failed: 0 });
    log.record(proxyCall(99));
    await log.flush();
    expect(log.stats().sent).toBe(11);
  });

  it('drops and counts a batch that could not be sent', async () => {
    const log = createOperationLog({ logger: quiet, send: () => Promise.reject(new Error('no stream')) });
    log.record(proxyCall(1));
    log.record(proxyCall(2));
    await log.flush();
    expect(log.stats()).toEqual({ sent: 0, dropped: 0, failed: 2 });
  });
});

describe('traceIdOf', () => {
  it('reads the trace id of a W3C traceparent and nothing else', () => {
    expect(traceIdOf('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(traceIdOf('00-00000000000000000000000000000000-00f067aa0ba902b7-01')).toBeUndefined();
    expect(traceIdOf('garbage')).toBeUndefined();
    expect(traceIdOf(undefined)).toBeUndefined();
  });
});
