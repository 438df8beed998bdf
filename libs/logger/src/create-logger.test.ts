import { describe, expect, it } from '@jest/globals';
import { PassThrough } from 'node:stream';
import { createLogger, runWithContext, useTraceIds } from './index.js';

function capture() {
  const stream = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  stream.on('data', (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) lines.push(JSON.parse(line));
  });
  return { stream, lines };
}

describe('createLogger', () => {
  it('writes JSON lines with the service and the current request id', async () => {
    const { stream, lines } = capture();
    const logger = createLogger({ service: 'test', stream });
    runWithContext({ requestId: 'req-1' }, () => logger.info('hello', { n: 1 }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines[0]).toMatchObject({ level: 'info', message: 'hello', service: 'test', requestId: 'req-1', n: 1 });
  });

  it('masks secrets at any depth', async () => {
    const { stream, lines } = capture();
    const logger = createLogger({ service: 'test', stream });
    logger.info('call', {
      headers: { authorization: 'Bearer sk_live_abc', accept: 'json' },
      connection: { credentials: { access_token: 'tok' }, client_secret: 'cs', id: 'c1' },
      apiKey: 'k',
    });
    await new Promise((resolve) => setImmediate(resolve));
    const text = JSON.stringify(lines[0]);
    for (const secret of ['sk_live_abc', '"tok"', '"cs"', '"k"']) expect(text).not.toContain(secret);
    expect(lines[0]).toMatchObject({ headers: { accept: 'json' }, connection: { id: 'c1' } });
  });

  it("masks a header's hyphenated names and a password's short names, and leaves look-alikes", async () => {
    const { stream, lines } = capture();
    const logger = createLogger({ service: 'test', stream });
    const secrets = { 'x-api-key': 's1', 'api-key': 's2', 'private-key': 's3', 'signing-key': 's4', pass: 's5', passphrase: 's6', pwd: 's7' };
    logger.info('call', { headers: secrets, bypass: 'kept', passthrough: 'kept' });
    await new Promise((resolve) => setImmediate(resolve));
    const text = JSON.stringify(lines[0]);
    for (const secret of Object.values(secrets)) expect(text).not.toContain(`"${secret}"`);
    expect(lines[0]).toMatchObject({ bypass: 'kept', passthrough: 'kept' });
  });

  it('adds trace_id and span_id of the active span while tracing is on, and none otherwise', async () => {
    const { stream, lines } = capture();
    const logger = createLogger({ service: 'test', stream });
    logger.info('off');
    useTraceIds(() => ({ trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) }));
    try {
      runWithContext({ requestId: 'req-2' }, () => logger.info('on'));
    } finally {
      useTraceIds(undefined);
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines[0]).not.toHaveProperty('trace_id');
    expect(lines[1]).toMatchObject({ message: 'on', requestId: 'req-2', trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16) });
  });
});
