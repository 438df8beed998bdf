import { Writable } from 'node:stream';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { z } from 'zod';
import { defineRequest } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { createBus, type Bus } from './index.js';
import { connectionOf } from './bus-connection.js';

const echo = defineRequest('test.json.echo', z.object({ text: z.string() }), z.object({ text: z.string() }));
const garbled = defineRequest('test.json.garbled', z.object({}), z.object({}));

/** What the serving bus logged: a hostile request's bytes must not reach it. */
const lines: string[] = [];
const logger = createLogger({ service: 'test', stream: new Writable({ write: (line, _, done) => done(void lines.push(String(line))) }) });
let nats: TestNats;
let server: Bus;
let client: Bus;

beforeAll(async () => {
  nats = await startNats();
  const identity = nats.credentials('observer');
  server = await createBus({ servers: nats.url, service: 'server', identity, logger, requestTimeoutMs: 5_000 });
  client = await createBus({ servers: nats.url, service: 'client', identity, logger: createLogger({ service: 'test', silent: true }), requestTimeoutMs: 5_000 });
  server.serve(echo, ({ text }) => ({ text }));
  // A peer answering bytes that are not JSON.
  connectionOf(server).nc.subscribe(garbled.subject, { callback: (_error, msg) => void msg.respond(new TextEncoder().encode('<html>secret=hunter2')) });
  await server.flush();
}, 60_000);

afterAll(async () => {
  await client?.drain();
  await server?.drain();
  await nats?.dispose();
});

it('answers a request that is not JSON as an invalid body, without logging its bytes as a defect', async () => {
  const reply = await connectionOf(client).nc.request(echo.subject, new TextEncoder().encode('{"text": secret=hunter2'), { timeout: 5_000 });
  expect(reply.json()).toEqual({ ok: false, error: expect.objectContaining({ code: 'invalid_body' }) });
  expect(lines.join('')).not.toContain('hunter2');
  expect(lines.join('')).not.toContain('handler failed');
  // The service goes on answering.
  await expect(client.request(echo, { text: 'still here' })).resolves.toEqual({ text: 'still here' });
});

it('gives a reply that is not JSON the coded error of a malformed reply, not the JSON error quoting it', async () => {
  const failure = await client.request(garbled, {}).catch((error: unknown) => error);
  expect(failure).toMatchObject({ code: 'internal_error', message: `malformed reply from ${garbled.subject}` });
  expect(String((failure as Error).message)).not.toContain('hunter2');
});
