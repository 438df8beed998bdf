import { describe, expect, it } from '@jest/globals';
import { OPERATION_PAGE_BYTES_MAX, type Operation, type OperationPage } from '@latchkey/contracts';
import { eventually } from '@latchkey/testing';
import { createOperationLog, isoTime, newOperationId, operationsOfPages, traceIdOf, type RecordedOperation } from './operation-recorder.js';

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
    const log = createOperationLog({ logger: quiet, flushMs: 20, send: async (pages) => void batches.push(operationsOfPages(pages)) });
    for (let n = 0; n < 5; n++) log.record(proxyCall(n));
    expect(batches).toHaveLength(0);
    // Deflating is off the event loop, and a loaded machine may take a while to answer.
    await eventually(() => (batches.length > 0 ? true : undefined), 5_000, 'the batch', 10);
    expect(batches.map((batch) => batch.length)).toEqual([5]);
    expect(new Set(batches[0]?.map((operation) => operation.id)).size).toBe(5);
    expect(log.stats()).toEqual({ sent: 5, dropped: 0, failed: 0 });
  });

  it('sends a full batch at once, without waiting for the timer', async () => {
    const batches: Operation[][] = [];
    const log = createOperationLog({ logger: quiet, flushMs: 60_000, maxBatch: 3, send: async (pages) => void batches.push(operationsOfPages(pages)) });
    for (let n = 0; n < 7; n++) log.record(proxyCall(n));
    // Deflating is off the event loop: the full batches leave within a moment, not at flushMs.
    await eventually(() => (batches.length >= 2 ? true : undefined), 5_000, 'the two full batches', 10);
    expect(batches.map((batch) => batch.length)).toEqual([3, 3]);
    await log.flush();
    expect(batches.map((batch) => batch.length)).toEqual([3, 3, 1]);
  });

  it('groups a batch in pages, one per environment and second, each with its lowest id, each entry as recorded', async () => {
    const sent: OperationPage[][] = [];
    const log = createOperationLog({ logger: quiet, flushMs: 60_000, send: async (pages) => void sent.push(pages) });
    // env-1 in two seconds, env-2 in one of them.
    for (const [n, environment] of [[0, 'env-1'], [400, 'env-1'], [1_500, 'env-1'], [10, 'env-2'], [20, 'env-1']] as const) {
      log.record({ ...proxyCall(n), environment_id: environment });
    }
    await log.flush();
    expect(sent).toHaveLength(1);
    const pages = sent[0]!;
    expect(pages.map(({ environment_id, n }) => [environment_id, n])).toEqual([
      ['env-1', 3],
      ['env-1', 1],
      ['env-2', 1],
    ]);
    for (const page of pages) {
      const operations = operationsOfPages([page]);
      expect(operations).toHaveLength(page.n);
      expect(page.first_id).toBe(operations.map((operation) => operation.id).sort()[0]);
      expect(new Set(operations.map((operation) => Math.floor(Date.parse(operation.started_at) / 1000))).size).toBe(1);
      for (const operation of operations) expect(operation.environment_id).toBe(page.environment_id);
    }
    expect(operationsOfPages(pages).map((operation) => operation.proxy?.path).sort()).toEqual(['/items/0', '/items/10', '/items/1500', '/items/20', '/items/400']);
  });

  it('sends a batch once its entries reach maxBatchBytes', async () => {
    const sizes: number[] = [];
    const bytes = Buffer.byteLength(JSON.stringify({ ...proxyCall(0), id: newOperationId() }));
    const log = createOperationLog({ logger: quiet, flushMs: 60_000, maxBatchBytes: bytes * 4, send: async (pages) => void sizes.push(operationsOfPages(pages).length) });
    for (let n = 0; n < 20; n++) log.record(proxyCall(n));
    await eventually(() => (sizes.length >= 4 ? true : undefined), 5_000, 'four batches', 10);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(4);
    await log.flush();
    expect(sizes.reduce((sum, size) => sum + size, 0)).toBe(20);
  });

  it('starts a new page where one would pass the page bound in UTF-8, each with its own lowest id, nothing lost or reordered', async () => {
    const sent: OperationPage[][] = [];
    // Batches as large as a page may be: the entry that would take a page past it starts the next.
    const log = createOperationLog({ logger: quiet, flushMs: 60_000, maxBatchBytes: OPERATION_PAGE_BYTES_MAX, send: async (pages) => void sent.push(pages) });
    // Three bytes to a character, some 9 KB an entry. Started in reverse order, so a page's lowest id is not its first entry's.
    const wide = (n: number) => ({ ...proxyCall(999 - n), proxy: { method: 'GET', path: `/${n}/${'€'.repeat(3_000)}` } });
    for (let n = 0; n < 150; n++) log.record(wide(n));
    await log.flush();
    const pages = sent.flat();
    expect(pages.length).toBeGreaterThan(sent.length);
    for (const page of pages) {
      const operations = operationsOfPages([page]);
      expect(Buffer.byteLength(JSON.stringify(operations))).toBeLessThanOrEqual(OPERATION_PAGE_BYTES_MAX);
      expect(operations).toHaveLength(page.n);
      expect(page.first_id).toBe(operations.map((operation) => operation.id).sort()[0]);
    }
    // Batches deflate side by side and may leave in either order; each page keeps its entries in
    // the order they were recorded, and the pages, put in order, hold every entry once.
    const numbers = pages.map((page) => operationsOfPages([page]).map((operation) => Number(operation.proxy?.path.split('/')[1])));
    for (const inPage of numbers) expect(inPage).toEqual([...inPage].sort((a, b) => a - b));
    expect(numbers.sort((a, b) => a[0]! - b[0]!).flat()).toEqual([...Array(150).keys()]);
  });

  it('sends an entry larger than the page bound alone in its page, and the entries around it in theirs', async () => {
    const sent: OperationPage[][] = [];
    const log = createOperationLog({ logger: quiet, flushMs: 60_000, maxBatchBytes: OPERATION_PAGE_BYTES_MAX, send: async (pages) => void sent.push(pages) });
    log.record(proxyCall(0));
    log.record({ ...proxyCall(1), proxy: { method: 'GET', path: `/1/${'x'.repeat(OPERATION_PAGE_BYTES_MAX)}` } });
    log.record(proxyCall(2));
    await log.flush();
    // Batches deflate side by side and may leave in either order.
    const pages = sent.flat();
    expect(pages.map((page) => page.n)).toEqual([1, 1, 1]);
    expect(operationsOfPages(pages).map((operation) => operation.proxy?.path.slice(0, 8)).sort()).toEqual(['/1/xxxxx', '/items/0', '/items/2']);
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

  it('drops and counts, alone, an operation whose environment id no page may name', async () => {
    const sent: Operation[] = [];
    const log = createOperationLog({ logger: quiet, flushMs: 1, send: async (pages) => void sent.push(...operationsOfPages(pages)) });
    log.record({ ...proxyCall(1), environment_id: 'env:1' });
    log.record(proxyCall(2));
    await log.flush();
    expect(sent.map((operation) => operation.proxy?.path)).toEqual(['/items/2']);
    expect(log.stats()).toEqual({ sent: 1, dropped: 1, failed: 0 });
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

describe('isoTime', () => {
  it('is toISOString, across seconds, minutes, years and before 1970', () => {
    const starts = [0, 999, 1000, 1_700_000_000_000, Date.UTC(2026, 11, 31, 23, 59, 59, 999), Date.UTC(2027, 0, 1), -1, -1001, 1_700_000_000_000.7];
    for (const start of starts) for (let step = 0; step < 1500; step += 7) expect(isoTime(start + step)).toBe(new Date(Math.floor(start + step)).toISOString());
  });
});

describe('recordFields', () => {
  it('adds the id to the fields as written, and checks the environment as record does', async () => {
    const sent: OperationPage[][] = [];
    const log = createOperationLog({ logger: quiet, flushMs: 60_000, send: async (pages) => void sent.push(pages) });
    log.recordFields('env-1', 1_700_000_000_000, '"type":"proxy","environment_id":"env-1","status":"success","started_at":"2023-11-14T22:13:20.000Z","duration_ms":1');
    log.recordFields('env:1', 1_700_000_000_000, '"type":"proxy"');
    await log.flush();
    const [operation] = operationsOfPages(sent[0]!);
    expect(operation).toEqual({ id: expect.stringMatching(/^[0-9a-z]{9}/), type: 'proxy', environment_id: 'env-1', status: 'success', started_at: '2023-11-14T22:13:20.000Z', duration_ms: 1 });
    expect(log.stats()).toEqual({ sent: 1, dropped: 1, failed: 0 });
  });

  it('makes ids that grow within one millisecond', () => {
    const ids = Array.from({ length: 50 }, () => newOperationId(1_700_000_000_000));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(50);
  });

  it('tells its observer what it sent and what it dropped, and why', async () => {
    const told: string[] = [];
    const observer = { operationsSent: (count: number) => void told.push(`sent ${count}`), operationsDropped: (reason: string, count: number) => void told.push(`${reason} ${count}`) };
    let release: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const held = createOperationLog({ logger: quiet, observer, flushMs: 60_000, maxBatch: 2, maxBuffered: 2, send: () => stuck });
    for (let n = 0; n < 3; n++) held.record(proxyCall(n));
    held.record({ ...proxyCall(4), environment_id: 'env:1' });
    release();
    await held.flush();
    const refused = createOperationLog({ logger: quiet, observer, send: () => Promise.reject(new Error('no stream')) });
    refused.record(proxyCall(1));
    refused.record(proxyCall(2));
    await refused.flush();
    expect(told).toEqual(['buffer_full 1', 'buffer_full 1', 'sent 2', 'send_failed 2']);
  });
});
