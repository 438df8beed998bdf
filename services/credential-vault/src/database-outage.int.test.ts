import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { createBus, type Bus } from '@latchkey/bus';
import { vaultContracts } from '@latchkey/contracts';
import { AppError } from '@latchkey/errors';
import { createLogger } from '@latchkey/logger';
import { runService, type RunningService } from '@latchkey/runtime';
import { startFerretDb, startNats, type TestNats, serviceEnvironment } from '@latchkey/testing';
import { configSchema } from './config.js';
import { startVault } from './start-vault.js';

// The database going away (a restart, a failover) under requests: what was in flight when its
// connections closed answers 503 service_unavailable, a code callers retry on, never a 500
// internal_error; once it is back, requests succeed again.
const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let ferret: Awaited<ReturnType<typeof startFerretDb>>;
let vault: RunningService<void>;
let gateway: Bus;
const environment_id = 'env_outage';

beforeAll(async () => {
  [nats, ferret] = await Promise.all([startNats(), startFerretDb()]);
  const config = configSchema.parse(serviceEnvironment('credential-vault', nats, ferret.uri, { ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}` }));
  vault = await runService({ service: 'credential-vault', config, start: startVault, handleSignals: false });
  gateway = await createBus({ servers: nats.url, service: 'gateway', identity: nats.credentials('gateway'), logger, requestTimeoutMs: 30_000 });
  await gateway.request(vaultContracts.createIntegration, { environment_id, provider: 'anthropic', unique_key: 'llm' });
}, 60_000);

afterAll(async () => {
  await gateway?.drain();
  await vault?.shutdown();
  await Promise.all([nats?.dispose(), ferret?.dispose()]);
});

describe('the database restarted under load', () => {
  it('answers what met it service_unavailable, never internal_error, and serves again once it is back', async () => {
    const codes = new Map<string, number>();
    let answered = 0;
    let running = true;
    const read = () => gateway.request(vaultContracts.getIntegration, { environment_id, unique_key: 'llm', include_webhook: false, include_credentials: false });
    const loops = Array.from({ length: 8 }, async () => {
      while (running) {
        try {
          await read();
          answered += 1;
        } catch (error) {
          const code = error instanceof AppError ? error.code : 'not an AppError';
          codes.set(code, (codes.get(code) ?? 0) + 1);
        }
      }
    });
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (let round = 0; round < 3; round++) {
      await ferret.restart(1_500);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    running = false;
    await Promise.all(loops);
    expect(answered).toBeGreaterThan(0);
    expect([...codes.keys()].filter((code) => code !== 'service_unavailable')).toEqual([]);
    expect((await read()).unique_key).toBe('llm');
  }, 90_000);
});
