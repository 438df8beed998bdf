import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { z } from 'zod';
import { busOperationLog, consume, createBus, ensureStreams, type Bus } from '@latchkey/bus';
import { STREAMS, defineEvent, defineRequest } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import { eventually, idOrSecretLabels, parsePrometheusText, sampleSum, startNats, type TestNats } from '@latchkey/testing';
import { busMetrics, serveMetrics } from './index.js';

/** The bus's traffic, through its observer, on a real NATS, scraped over HTTP and parsed strictly. */
const lookup = defineRequest('test.metrics.lookup', z.object({ id: z.string() }), z.object({ found: z.boolean() }));
const nobody = defineRequest('test.metrics.nobody', z.object({}), z.object({}));
const happened = defineEvent('test.metrics.happened', z.object({ n: z.number() }));

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let bus: Bus;
let server: Server;
let url: string;

beforeAll(async () => {
  nats = await startNats();
  // The services' 5 s deadline: no case here waits one out (`nobody` has no listener, refused at
  // once), and 500 ms was a bet on a loaded machine for creating the streams and the consumer.
  bus = await createBus({ servers: nats.url, service: 'metrics-test', identity: nats.credentials('observer'), logger, requestTimeoutMs: 5_000, observer: busMetrics() });
  await ensureStreams(bus);
  server = await serveMetrics(0, '127.0.0.1');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
});

afterAll(async () => {
  await bus?.drain();
  server?.close();
  await nats?.dispose();
});

const scrape = async () => {
  const response = await fetch(url);
  expect(response.status).toBe(200);
  return parsePrometheusText(await response.text());
};

describe('bus metrics', () => {
  it('time requests sent and answered and messages consumed, by subject template and error code', async () => {
    bus.serve(lookup, ({ id }) => {
      if (id.startsWith('conn_')) throw new AppError('unknown_connection', `No connection ${id}`);
      return { found: true };
    });
    await bus.flush();
    await bus.request(lookup, { id: 'a' });
    await expect(bus.request(lookup, { id: 'conn_0123456789abcdef0123' })).rejects.toMatchObject({ code: 'unknown_connection' });
    await expect(bus.request(nobody, {})).rejects.toMatchObject({ code: 'service_unavailable' });
    const consumer = await consume({ bus, logger, stream: STREAMS.events.name, durable: 'metrics-test', contract: happened, concurrency: 1, handler: async () => undefined });
    await bus.publish(happened, { n: 1 });

    const sent = 'messaging_client_operation_duration_seconds';
    const handled = 'messaging_process_duration_seconds';
    const families = await eventually(
      async () => {
        const scraped = await scrape();
        return sampleSum(scraped, handled, `${handled}_count`, { messaging_destination_name: happened.subject }) === 1 ? scraped : undefined;
      },
      10_000,
      'the event to be consumed',
    );
    await consumer.stop();

    const count = (family: string, labels: Record<string, string>) => sampleSum(families, family, `${family}_count`, { messaging_system: 'nats', ...labels });
    expect(count(sent, { messaging_operation_name: 'send', messaging_destination_name: lookup.subject, error_type: '' })).toBe(1);
    expect(count(sent, { messaging_destination_name: lookup.subject, error_type: 'unknown_connection' })).toBe(1);
    expect(count(sent, { messaging_destination_name: nobody.subject, error_type: 'service_unavailable' })).toBe(1);
    expect(count(handled, { messaging_operation_name: 'process', messaging_destination_name: lookup.subject, error_type: '' })).toBe(1);
    expect(count(handled, { messaging_destination_name: lookup.subject, error_type: 'unknown_connection' })).toBe(1);
    expect(families.get(sent)?.type).toBe('histogram');
    expect(idOrSecretLabels(families)).toEqual([]);
  });
});

describe('operations log metrics', () => {
  it('count what a service\'s operations log stored, through its bus\'s observer', async () => {
    const log = busOperationLog(bus, { warn: () => undefined }, 'proxy');
    for (let n = 0; n < 3; n++) {
      log.record({ type: 'proxy', environment_id: 'env-1', status: 'success', started_at: new Date().toISOString(), duration_ms: 3, proxy: { method: 'GET', path: `/items/${n}`, upstream_status: 200 } });
    }
    await log.flush();
    const families = await scrape();
    expect(sampleSum(families, 'latchkey_operations_log_sent_total')).toBe(3);
    expect(sampleSum(families, 'latchkey_operations_log_dropped_total')).toBe(0);
  });
});
