import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createBus, type Bus } from '@latchkey/bus';
import { proxyContracts, type ProxyReplyMeta } from '@latchkey/contracts';
import { parseConfig } from '@latchkey/config';
import { createLogger } from '@latchkey/logger';
import { scrape } from '@latchkey/metrics';
import { proxyExchange } from '@latchkey/proxy-hop';
import { runService } from '@latchkey/runtime';
import { eventually, parsePrometheusText, sampleSum, startNats, type TestNats } from '@latchkey/testing';
import { configSchema } from './config.js';
import { proxyMetaFixture } from './domain/meta-fixture.js';
import { startProxy } from './start-proxy.js';

// A proxy replica as `main.ts` runs it, against real NATS, a stand-in vault and a provider on
// loopback: what it does with more calls than it may hold, and with calls that outlast its stop.

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let gateway: Bus;
let vault: Bus;
let provider: Server;
/** `/held/*` answers waiting for `release`; `/silent` never answers; `/busy` is 503, retry in 3 s. */
const held: ServerResponse[] = [];
const seen: string[] = [];
/** Connections the provider saw close, by the path of their last request. */
const closed: string[] = [];

beforeAll(async () => {
  nats = await startNats();
  provider = createServer((req, res) => {
    const path = req.url ?? '';
    seen.push(path);
    req.socket.once('close', () => closed.push(path));
    if (path.startsWith('/held/')) held.push(res);
    else if (path === '/busy') res.writeHead(503, { 'retry-after': '3' }).end('busy');
    else if (path !== '/silent') res.writeHead(200).end('ok');
  });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  const { port } = provider.address() as AddressInfo;
  vault = await createBus({ servers: nats.url, service: 'credential-vault', identity: nats.credentials('credential-vault'), logger, requestTimeoutMs: 5_000 });
  vault.serve(proxyContracts.getCredentials, () => ({ id: 'c1', provider: 'crm', auth_mode: 'API_KEY', expires_at: null, base_url: `http://127.0.0.1:${port}`, headers: {}, query: {}, decompress: false }));
  await vault.flush();
  gateway = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('gateway'), logger, requestTimeoutMs: 5_000 });
}, 60_000);

afterAll(async () => {
  provider?.closeAllConnections();
  await new Promise((resolve) => provider?.close(resolve));
  await gateway?.drain();
  await vault?.drain();
  await nats?.dispose();
});

/** A proxy replica with these settings, on loopback only. */
function startReplica(env: Record<string, string>) {
  const config = parseConfig(configSchema, {
    NATS_URL: nats.url,
    NATS_PASSWORD: nats.credentials('proxy').password,
    LOG_LEVEL: 'error',
    HEALTH_PORT: '0',
    PROXY_ALLOW_CIDRS: '127.0.0.1/32',
    ...env,
  });
  return runService({ service: 'proxy', database: false, config, handleSignals: false, start: startProxy });
}

/** One call as the gateway sends it, with a deadline far off: its answer, and when it came. */
async function call(path: string, retries = 0): Promise<{ reply: ProxyReplyMeta; at: number }> {
  const answer = await proxyExchange(gateway, proxyMetaFixture(path, { retries, deadline_ms: 120_000 }), new Uint8Array(0), 120_000);
  return { reply: answer.meta, at: Date.now() };
}

const shed = async (reason: string) => sampleSum(parsePrometheusText(await scrape()), 'latchkey_proxy_calls_shed_total', 'latchkey_proxy_calls_shed_total', { reason });

describe('a proxy replica', () => {
  it('answers a call past PROXY_MAX_IN_FLIGHT at once with 503 service_unavailable, and the calls it holds complete', async () => {
    const running = await startReplica({ PROXY_MAX_IN_FLIGHT: '2' });
    try {
      const before = await shed('in_flight_limit');
      const first = [call('/held/1'), call('/held/2')];
      await eventually(() => (held.length === 2 ? true : undefined), 10_000, 'the provider to hold two calls');

      const sentAt = Date.now();
      const refused = await call('/held/3');
      expect(refused.reply).toMatchObject({ ok: false, error: { code: 'service_unavailable' } });
      expect(refused.at - sentAt).toBeLessThan(1_000);
      expect(seen).not.toContain('/held/3');
      expect(await shed('in_flight_limit')).toBe(before + 1);

      for (const response of held.splice(0)) response.writeHead(200).end('done');
      expect((await Promise.all(first)).map(({ reply }) => reply)).toEqual([expect.objectContaining({ ok: true, status: 200 }), expect.objectContaining({ ok: true, status: 200 })]);
      // A slot freed is taken again.
      expect((await call('/ok')).reply).toMatchObject({ ok: true, status: 200 });
    } finally {
      await running.shutdown();
    }
  }, 30_000);

  it('stopping, takes no more retries, and answers a call still waiting for its provider before SHUTDOWN_TIMEOUT_MS: 504 upstream_timeout', async () => {
    const running = await startReplica({ SHUTDOWN_TIMEOUT_MS: '4000' });
    seen.length = 0;
    const silent = call('/silent');
    const busy = call('/busy', 3);
    await eventually(() => (seen.includes('/silent') && seen.includes('/busy') ? true : undefined), 10_000, 'both calls to reach the provider');

    const stoppedAt = Date.now();
    await running.shutdown();
    const stoppedIn = Date.now() - stoppedAt;
    // Within the shutdown timeout (4 s), having waited for the call until its deadline (3 s).
    expect(stoppedIn).toBeLessThan(4_000);
    expect(stoppedIn).toBeGreaterThanOrEqual(2_900);

    // The call waiting to retry is answered at once, with the provider's last status named; no
    // second attempt was made.
    const retried = await busy;
    expect(retried.reply).toMatchObject({ ok: false, error: { code: 'service_unavailable', message: expect.stringContaining('503') } });
    expect(retried.at - stoppedAt).toBeLessThan(1_000);
    expect(seen.filter((path) => path === '/busy')).toHaveLength(1);

    // The one the provider never answered: 504, saying it may have reached the provider, and its
    // connection closed rather than left to the process's end.
    const cut = await silent;
    expect(cut.reply).toMatchObject({ ok: false, error: { code: 'upstream_timeout', message: expect.stringContaining('may have') } });
    expect(cut.at - stoppedAt).toBeLessThan(4_000);
    await eventually(() => (closed.includes('/silent') ? true : undefined), 2_000, 'the silent call\'s connection to close');
    expect(await shed('shutdown_deadline')).toBeGreaterThanOrEqual(1);
  }, 30_000);
});
