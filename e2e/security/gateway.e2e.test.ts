import { afterAll, beforeAll, describe, expect, test } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { startMongo, type TestMongo } from '@latchkey/testing';
import { http, startStack, type Stack } from '../support/stack.js';

/**
 * Attacks on the gateway: authentication floods, database outages, its pages and the secrets it
 * stores. One stack for the file; each test is one case of the issue, written as the attack.
 * The gateway trusts one proxy hop (TRUSTED_PROXY_HOPS=1) so that attackers can be told apart by
 * X-Forwarded-For; requests without it come from the socket's peer.
 */

/** A loopback TCP relay to the database that a test can cut and restore: an outage for the gateway only. */
interface Relay {
  port: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

async function startRelay(targetPort: number): Promise<Relay> {
  const sockets = new Set<Socket>();
  let up = true;
  const server: Server = createServer((client) => {
    if (!up) return void client.destroy();
    const upstream = connect(targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut: () => {
      up = false;
      for (const socket of sockets) socket.destroy();
    },
    restore: () => {
      up = true;
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

let stack: Stack;
let relay: Relay;

const api = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.bootstrapKey, ...(body === undefined ? {} : { body }) });
const admin = (method: string, path: string, body?: unknown) => http(`${stack.url}${path}`, { method, token: stack.adminToken, ...(body === undefined ? {} : { body }) });
const wellFormedKey = () => `lk_sk_${randomBytes(32).toString('base64url')}`;
const canary = (name: string) => `CANARY_${name}_${randomBytes(12).toString('hex')}`;

/** Every log line every process of the stack printed so far. */
const allOutput = () => [...stack.gateways, ...stack.services].map((proc) => proc.output()).join('\n');

async function get(path: string, token: string, headers: Record<string, string> = {}) {
  const started = performance.now();
  const response = await fetch(`${stack.url}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers } });
  const text = await response.text();
  return { status: response.status, headers: response.headers, json: text ? JSON.parse(text) : undefined, ms: performance.now() - started };
}

let mongo: TestMongo;

beforeAll(async () => {
  // The stack's database, reached by the gateway only through a relay a test can cut.
  mongo = await startMongo();
  const mongoPort = Number(new URL(mongo.uri.replace(/^mongodb:/, 'http:')).port);
  relay = await startRelay(mongoPort);
  const given = process.env['MONGODB_URI'];
  process.env['MONGODB_URI'] = mongo.uri;
  try {
    stack = await startStack({
      serviceEnv: { gateway: { MONGODB_URI: mongo.uri.replace(`:${mongoPort}`, `:${relay.port}`), TRUSTED_PROXY_HOPS: '1', AUTH_FAILURES_PER_MINUTE: '30' } },
    });
  } finally {
    if (given === undefined) delete process.env['MONGODB_URI'];
    else process.env['MONGODB_URI'] = given;
  }
}, 120_000);

afterAll(async () => {
  await stack?.dispose();
  await relay?.close();
  await mongo?.dispose();
});

describe('gateway security', () => {
  test('case 7: a flood of random well-formed unknown keys from one address is cut off with 429 while a legitimate key keeps working', async () => {
    const attacker = { 'x-forwarded-for': '203.0.113.66' };
    // The legitimate client shares the attacker's address (a NAT): its key is known, so it passes.
    expect((await get('/environment-variables', stack.bootstrapKey, attacker)).status).toBe(200);
    const answers = await Promise.all(Array.from({ length: 200 }, () => get('/environment-variables', wellFormedKey(), attacker)));
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 401).length).toBeLessThanOrEqual(30);
    expect(statuses.filter((status) => status === 429).length).toBeGreaterThanOrEqual(170);
    const refused = answers.find((answer) => answer.status === 429)!;
    expect(refused.json.error.code).toBe('too_many_requests');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    // Still blocked, still cheap; the legitimate key still works from the same address and from its own.
    expect((await get('/environment-variables', wellFormedKey(), attacker)).status).toBe(429);
    expect((await get('/environment-variables', stack.bootstrapKey, attacker)).status).toBe(200);
    expect((await get('/environment-variables', stack.bootstrapKey)).status).toBe(200);
    // Another address is not affected by the attacker's failures.
    const other = await get('/environment-variables', wellFormedKey(), { 'x-forwarded-for': '198.51.100.7' });
    expect(other.status).toBe(401);
    expect(other.json.error.code).toBe('unknown_api_key');
  });

  test('case 7: malformed keys are refused as unknown_api_key, and a forged X-Forwarded-For does not move the attacker', async () => {
    for (const key of ['short', `lk_sk_${'a'.repeat(42)}`, `${stack.bootstrapKey}x`, 'x'.repeat(200)]) {
      const answer = await get('/environment-variables', key, { 'x-forwarded-for': '192.0.2.10' });
      expect(answer.status).toBe(401);
      expect(answer.json.error.code).toBe('unknown_api_key');
    }
    // One trusted hop: only the rightmost entry counts; what the attacker writes to the left is ignored.
    const forged = await get('/environment-variables', wellFormedKey(), { 'x-forwarded-for': '198.51.100.99, 203.0.113.66' });
    expect(forged.status).toBe(429);
  });

  test('case 17: while the database is down an uncached key gets a coded 503 within about 1.5 s, and all recovers when it is back', async () => {
    relay.cut();
    try {
      for (let i = 0; i < 3; i++) {
        const answer = await get('/environment-variables', wellFormedKey());
        expect(answer.status).toBe(503);
        expect(answer.json.error.code).toBe('service_unavailable');
        expect(answer.ms).toBeLessThan(1_700);
      }
      // A route that reads the database with a cached key fails the same way.
      const variables = await get('/environment-variables', stack.bootstrapKey);
      expect(variables.status).toBe(503);
      expect(variables.ms).toBeLessThan(1_700);
    } finally {
      relay.restore();
    }
    const deadline = Date.now() + 20_000;
    let status = 0;
    while (Date.now() < deadline && status !== 200) {
      status = (await get('/environment-variables', stack.bootstrapKey)).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(status).toBe(200);
    const unknown = await get('/environment-variables', wellFormedKey());
    expect(unknown.status).toBe(401);
  });
});
