import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Agent } from 'node:http';
import { request } from 'node:http';
import { freePort } from '@latchkey/testing';
import { writeProvidersFile } from './support/providers.js';
import { startStack, type Stack } from './support/stack.js';
import { ACME_PROVIDER_YAML, acmeSignature, startReceiver, webhookEnvironment, type Receiver } from './support/webhooks.js';

/**
 * Deliveries survive a receiver that is down for two minutes, a router that dies, and a flood.
 * Back-off is shortened through the router's configuration (first retry 200 ms, at most 5 s
 * apart), so that every delivery is tried many times during the outage. The flood goes to
 * another environment's receiver during that outage: one receiver down holds up no other.
 */
let stack: Stack;
let receiver: Receiver;
let env: Awaited<ReturnType<typeof webhookEnvironment>>;
/** The flood's environment, with a receiver of its own that stays up. */
let floodReceiver: Receiver;
let floodEnv: Awaited<ReturnType<typeof webhookEnvironment>>;

beforeAll(async () => {
  receiver = await startReceiver(await freePort());
  floodReceiver = await startReceiver(await freePort());
  stack = await startStack({
    serviceEnv: {
      'credential-vault': { PROVIDERS_FILE: writeProvidersFile(ACME_PROVIDER_YAML) },
      'webhook-router': {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        WEBHOOK_RETRY_BASE_MS: '200',
        WEBHOOK_RETRY_CAP_MS: '5000',
        WEBHOOK_BREAKER_COOLDOWN_MS: '500',
      },
    },
  });
  env = await webhookEnvironment(stack, 'resilient', receiver.url);
  floodEnv = await webhookEnvironment(stack, 'flooded', floodReceiver.url);
}, 90_000);

afterAll(async () => {
  await stack?.dispose();
  await receiver?.close();
  await floodReceiver?.close();
});

const agent = new Agent({ keepAlive: true, maxSockets: 64 });
afterAll(() => agent.destroy());

/** One provider webhook to `to`, signed, over a kept-alive socket; resolves with the status. */
function post(marker: string, to = env): Promise<number> {
  const body = JSON.stringify({ marker });
  const url = new URL(`${stack.url}/webhook/${to.publicId}/acme`);
  return new Promise((resolve, reject) => {
    const req = request(url, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-acme-signature-256': acmeSignature(to.webhookSecret, body) },
    });
    req.once('response', (res) => {
      res.resume();
      res.once('end', () => resolve(res.statusCode ?? 0));
    });
    req.once('error', reject);
    req.end(body);
  });
}

/** Sends `markers` to `to` with `concurrency` requests in flight; returns the statuses. */
async function sendAll(markers: string[], concurrency = 32, to = env): Promise<number[]> {
  const statuses: number[] = new Array(markers.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < markers.length) {
        const index = next++;
        statuses[index] = await post(markers[index]!, to);
      }
    }),
  );
  return statuses;
}

/** Every marker arrived at `at`, and under exactly one webhook-id (copies of one id are the receiver's to drop). */
async function expectEachOnce(markers: string[], timeoutMs: number, at = receiver): Promise<void> {
  const wanted = new Set(markers);
  const deadline = Date.now() + timeoutMs;
  const arrived = () => new Set(at.received.map((item) => item.json?.payload?.marker).filter((marker) => wanted.has(marker))).size;
  while (arrived() < wanted.size && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
  const idsByMarker = new Map<string, Set<string>>();
  for (const item of at.received) {
    const marker = item.json?.payload?.marker as string | undefined;
    if (marker === undefined || !wanted.has(marker)) continue;
    const ids = idsByMarker.get(marker) ?? new Set<string>();
    ids.add(String(item.headers['webhook-id']));
    idsByMarker.set(marker, ids);
  }
  const missing = markers.filter((marker) => !idsByMarker.has(marker));
  expect(missing).toEqual([]);
  expect([...idsByMarker.values()].every((ids) => ids.size === 1)).toBe(true);
}

describe('webhook deliveries', () => {
  it('arrive once the receiver is back, after refusing connections and then answering 503; meanwhile 5,000 inbound webhooks from one client to another environment are all acknowledged and forwarded', async () => {
    await receiver.down();
    const markers = Array.from({ length: 100 }, (_, i) => `outage-${i}`);
    expect(new Set(await sendAll(markers))).toEqual(new Set([200]));
    const outageStarted = Date.now();
    await flood();
    // The flood took part of the minute: the rest of it, of refused connections.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 60_000 - (Date.now() - outageStarted))));
    await receiver.up();
    receiver.answerWith(503);
    await new Promise((resolve) => setTimeout(resolve, 60_000)); // and a minute of 503
    receiver.answerWith(200);
    await expectEachOnce(markers, 30_000);
  }, 360_000);

  it('are none lost when the router is killed with a backlog and restarted', async () => {
    receiver.answerWith(503);
    const inFlight = Array.from({ length: 100 }, (_, i) => `before-kill-${i}`);
    await sendAll(inFlight);
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // deliveries are attempted and backing off
    const router = stack.services.find((proc) => proc.service === 'webhook-router')!;
    const exited = new Promise((resolve) => router.child.once('exit', resolve));
    router.child.kill('SIGKILL');
    await exited;
    const backlog = Array.from({ length: 200 }, (_, i) => `while-dead-${i}`);
    expect(new Set(await sendAll(backlog))).toEqual(new Set([200])); // the gateway takes them meanwhile
    receiver.answerWith(200);
    await stack.restart('webhook-router');
    await expectEachOnce([...inFlight, ...backlog], 60_000);
  }, 120_000);

});

/** 5,000 inbound webhooks from one client to the flood's environment: all acknowledged, all forwarded. */
async function flood(): Promise<void> {
  const markers = Array.from({ length: 5_000 }, (_, i) => `flood-${i}`);
  const started = Date.now();
  const statuses = await sendAll(markers, 64, floodEnv);
  const ingestMs = Date.now() - started;
  expect(statuses.filter((status) => status !== 200)).toEqual([]);
  await expectEachOnce(markers, 150_000, floodReceiver).finally(() => {
    const copies = floodReceiver.received.filter((item) => String(item.json?.payload?.marker).startsWith('flood-')).length;
    console.log(`5000 webhooks: acknowledged in ${ingestMs} ms; ${copies} copies received after ${Date.now() - started} ms`);
  });
}
