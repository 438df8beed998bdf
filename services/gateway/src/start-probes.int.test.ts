import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { parseConfig } from '@latchkey/config';
import { runService, type RunningService } from '@latchkey/runtime';
import { eventually, freePort, startMongo, startNats, uniqueDbName, type TestMongo, type TestNats } from '@latchkey/testing';
import { configSchema } from './config.js';
import { startGateway } from './start-gateway.js';

// The gateway's probes live on its API port: while it waits for NATS (or a JetStream cluster
// still electing its leader), that port must already say "alive, not ready", not be closed,
// or an orchestrator's startup probe restarts it in a loop.
let nats: TestNats;
let mongo: TestMongo;
let gateway: RunningService<{ port: number }> | undefined;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
});

afterAll(async () => {
  await gateway?.shutdown();
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

async function answer(port: number, path: string) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: response.status, body: (await response.json()) as { status?: string; error?: { code: string } } };
  } catch {
    return undefined;
  }
}

describe('gateway start', () => {
  it('answers /health 200 and /ready 503 on PORT while NATS is away, then serves the API on that same port', async () => {
    await nats.stop();
    const port = await freePort();
    const config = parseConfig(configSchema, {
      NATS_URL: nats.url,
      NATS_PASSWORD: nats.credentials('gateway').password,
      MONGODB_URI: mongo.uri,
      MONGODB_DB: uniqueDbName('gateway_start'),
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: 'error',
      ADMIN_TOKEN: 'admin-token-for-tests-0123456789abcdef',
      API_KEY_DIGEST_SECRET: 'digest-secret-for-tests-0123456789abcdef',
      SETTINGS_ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`,
      BOOTSTRAP_SECRET_KEY: 'lk_sk_bootstrap-secret-for-tests-0123456789',
    });
    const starting = runService({ service: 'gateway', config, httpPort: config.PORT, start: startGateway, handleSignals: false });
    let failed: unknown;
    starting.catch((error: unknown) => (failed = error));

    expect(await eventually(() => answer(port, '/health'), 10_000, 'the port to answer')).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await answer(port, '/ready')).toEqual({ status: 503, body: { status: 'not_ready' } });
    expect(await answer(port, '/ready/self')).toEqual({ status: 503, body: { status: 'not_ready' } });
    const early = await answer(port, '/connections');
    expect(early?.status).toBe(503);
    expect(early?.body.error?.code).toBe('service_unavailable');
    // Metrics stay off the API port, starting or not.
    expect((await answer(port, '/metrics'))?.status).toBe(503);

    await nats.start();
    gateway = await starting;
    expect(failed).toBeUndefined();
    expect(gateway.started.port).toBe(port);
    // The API now answers there: a request without a key is refused for that, not for starting.
    // (Its /ready waits for every other service's ping, which this test does not run.)
    const api = await answer(port, '/connections');
    expect(api?.status).toBe(401);
    expect((await answer(port, '/health'))?.status).toBe(200);
    expect(await answer(port, '/ready/self')).toEqual({ status: 200, body: { status: 'ready' } });
  }, 60_000);
});
