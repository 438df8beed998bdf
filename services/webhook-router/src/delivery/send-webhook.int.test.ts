import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createAddressPolicy } from '@latchkey/net';
import { freePort } from '@latchkey/testing';
import { createWebhookSender } from './send-webhook.js';

let server: Server;
let port: number;
let hits = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    hits += 1;
    // Never answered: only the sender's timeout ends it. (In a loaded CI run an answer sent a
    // second late beat the 300 ms timeout: got lets an answer that arrives while the event loop
    // was blocked past the timeout win.)
    if (req.url === '/slow') return;
    if (req.url === '/busy') return void res.writeHead(429, { 'retry-after': '7' }).end();
    res.end('ok');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  server.close();
});

describe('the webhook sender', () => {
  // Only the timeout case runs on a short timeout: in a loaded CI run, a 429 answered at once
  // still took longer than 300 ms to arrive, and read as a timeout.
  const loopback = createAddressPolicy({ allowCidrs: ['127.0.0.1/32'] });
  const open = createWebhookSender({ policy: loopback, timeoutMs: 10_000 });
  const impatient = createWebhookSender({ policy: loopback, timeoutMs: 300 });
  const strict = createWebhookSender({ policy: createAddressPolicy({ allowCidrs: [] }), timeoutMs: 300 });
  afterAll(() => {
    open.close();
    impatient.close();
    strict.close();
  });

  it('refuses loopback, by literal and by name, unless allowed, without connecting', async () => {
    const before = hits;
    expect((await strict.send(`http://127.0.0.1:${port}/`, {}, '{}')).error).toBe('upstream_not_allowed');
    expect((await strict.send(`http://localhost:${port}/`, {}, '{}')).error).toBe('upstream_not_allowed');
    expect((await strict.send('http://169.254.169.254/latest', {}, '{}')).error).toBe('upstream_not_allowed');
    expect(hits).toBe(before);
    expect(await open.send(`http://127.0.0.1:${port}/`, {}, '{}')).toMatchObject({ status: 200, error: null });
  });

  it('names each failure by code and passes Retry-After on', async () => {
    expect((await impatient.send(`http://127.0.0.1:${port}/slow`, {}, '{}')).error).toBe('timeout');
    expect((await open.send(`http://127.0.0.1:${await freePort()}/`, {}, '{}')).error).toBe('connection_refused');
    expect(await open.send(`http://127.0.0.1:${port}/busy`, {}, '{}')).toMatchObject({ status: 429, retryAfter: '7' });
    expect((await open.send('ftp://127.0.0.1/', {}, '{}')).error).toBe('invalid_url');
  });
});
