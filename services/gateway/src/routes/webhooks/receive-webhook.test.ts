import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { createLogger } from '@latchkey/logger';
import type { GatewayDeps } from '../../http/deps.js';
import { withBareRoutes } from '../../http/serve-bare.js';
import { receiveWebhook } from './receive-webhook.js';

// The receiver alone, on a loopback server, with what it asks of the rest of the gateway faked:
// bodies up to 2,000 bytes, 3,000 bytes held at most by the replica, 500 ms to send a body.
const deps = {
  config: { MAX_BODY_BYTES: 2000, WEBHOOK_BODIES_HELD_BYTES: 3000, WEBHOOK_BODY_TIMEOUT_MS: 500 },
  logger: createLogger({ service: 'test', silent: true }),
  bus: { inlineLimit: 960 * 1024, enqueue: async () => undefined },
  knownEnvironments: { has: async () => true },
  webhookIngest: { take: async () => ({ allowed: true, limit: 0, retryAfter: 0 }) },
} as unknown as GatewayDeps;

let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer(withBareRoutes((_req, res) => res.writeHead(404).end(), [receiveWebhook], deps));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A webhook sent whole: its status and error code. */
function post(body: string): Promise<{ status: number; code?: string }> {
  return new Promise((resolve, reject) => {
    const sent = request({ host: '127.0.0.1', port, path: '/webhook/env_pub/acme', method: 'POST', headers: { 'content-type': 'text/plain' } }, (response) => {
      let text = '';
      response.on('data', (chunk: Buffer) => (text += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, code: text ? JSON.parse(text).error?.code : undefined }));
    });
    sent.on('error', reject);
    sent.end(body);
  });
}

/**
 * A sender that declares `declared` bytes and sends `sent` of them, then nothing more: what the
 * gateway answers it (the head's first line and whether it closes), or undefined when nothing
 * came within `waitMs`.
 */
function stall(declared: number, sent: number) {
  const socket: Socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  socket.write(`POST /webhook/env_pub/acme HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${declared}\r\n\r\n${'x'.repeat(sent)}`);
  let answer = '';
  let closed = false;
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
  const closing = new Promise<void>((resolve) => socket.once('close', () => ((closed = true), resolve())));
  return {
    async answer(waitMs: number) {
      await Promise.race([closing, settle(waitMs)]);
      return { head: answer.split('\r\n')[0], code: /"code":"([a-z_]+)"/.exec(answer)?.[1], closed };
    },
    drop: () => socket.destroy(),
  };
}

describe('provider webhooks on their way', () => {
  it("hold a body's bytes as they arrive: a sender that declares a body and sends none holds nothing", async () => {
    const silent = [stall(2000, 0), stall(2000, 0)];
    try {
      await settle(100);
      expect(await post('x'.repeat(1500))).toEqual({ status: 200 });
    } finally {
      for (const sender of silent) sender.drop();
      await settle(50);
    }
  });

  it('refuse a webhook with 503 while the bytes that arrived already hold the replica (3,000 here)', async () => {
    const trickling = stall(2000, 1999);
    try {
      await settle(100);
      expect(await post('x'.repeat(1500))).toEqual({ status: 503, code: 'service_unavailable' });
    } finally {
      trickling.drop();
      await settle(50);
    }
    expect(await post('x'.repeat(1500))).toEqual({ status: 200 });
  });

  it('answer a body not sent within WEBHOOK_BODY_TIMEOUT_MS with 400 invalid_body, close its connection, and give back what it held', async () => {
    const started = Date.now();
    const [trickling, silent] = [stall(2000, 1999), stall(2000, 0)];
    try {
      const [late, never] = await Promise.all([trickling.answer(3000), silent.answer(3000)]);
      for (const answer of [late, never]) expect(answer).toEqual({ head: 'HTTP/1.1 400 Bad Request', code: 'invalid_body', closed: true });
      expect(Date.now() - started).toBeLessThan(2500);
      // Answered, and gone: its 1,999 bytes no longer hold the replica.
      expect(await post('x'.repeat(1500))).toEqual({ status: 200 });
    } finally {
      trickling.drop();
      silent.drop();
    }
  });
});
