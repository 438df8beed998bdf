import { describe, expect, it } from '@jest/globals';
import { createOperationLog, type RecordedOperation } from '@latchkey/bus';
import { parsePrometheusText, sampleSum } from '@latchkey/testing';
import { busMetrics, scrape } from './index.js';

const quiet = { warn: () => undefined };

const proxyCall = (n: number, environment = 'env-1'): RecordedOperation => ({
  type: 'proxy',
  environment_id: environment,
  status: 'success',
  started_at: new Date(1_700_000_000_000 + n).toISOString(),
  duration_ms: 3,
  proxy: { method: 'GET', path: `/items/${n}`, upstream_status: 200 },
});

const sent = 'latchkey_operations_log_sent_total';
const dropped = 'latchkey_operations_log_dropped_total';

describe('the operations log metrics', () => {
  it('count the operations sent, and those dropped by reason, each reason at 0 from the start', async () => {
    const metrics = busMetrics();
    let families = parsePrometheusText(await scrape());
    expect(families.get(dropped)?.type).toBe('counter');
    expect(families.get(dropped)?.samples.map((sample) => [sample.labels['reason'], sample.value]).sort()).toEqual([
      ['buffer_full', 0],
      ['invalid_environment', 0],
      ['send_failed', 0],
    ]);
    expect(sampleSum(families, sent)).toBe(0);

    // Ten held by a send that does not answer yet, five past the buffer, one in no environment a page may name.
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const held = createOperationLog({ logger: quiet, observer: metrics, flushMs: 1, maxBatch: 4, maxBuffered: 10, send: () => stuck });
    for (let n = 0; n < 15; n++) held.record(proxyCall(n));
    release();
    await held.flush();
    const refused = createOperationLog({ logger: quiet, observer: metrics, send: () => Promise.reject(new Error('no stream')) });
    refused.record(proxyCall(1));
    refused.record(proxyCall(2));
    refused.record(proxyCall(3, 'env:1'));
    await refused.flush();

    families = parsePrometheusText(await scrape());
    expect(sampleSum(families, sent)).toBe(10);
    expect(sampleSum(families, dropped, dropped, { reason: 'buffer_full' })).toBe(5);
    expect(sampleSum(families, dropped, dropped, { reason: 'send_failed' })).toBe(2);
    expect(sampleSum(families, dropped, dropped, { reason: 'invalid_environment' })).toBe(1);
  });
});
