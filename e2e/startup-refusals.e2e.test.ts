import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { SERVICE_NAMES, type ServiceName } from '@latchkey/contracts';
import { freePort, logRecords, repoRoot, runToExit, serviceEnvironment, startMongo, startNats, type TestMongo, type TestNats } from '@latchkey/testing';

// A service that cannot start says why in one JSON log line, as every other line it writes,
// and exits 1: a log pipeline reading JSON lines sees the reason, not a bare stack trace.

let nats: TestNats;
let mongo: TestMongo;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
}, 60_000);

afterAll(async () => {
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
});

/** Holds a port on every interface, as a service binds it. */
async function holdPort(): Promise<{ port: number; server: Server }> {
  const port = await freePort();
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, resolve);
  });
  return { port, server };
}

/** Runs a built service until it exits, with everything it printed on each stream. */
const runService = (service: ServiceName, env: Record<string, string>) =>
  runToExit(process.execPath, [...(service === 'action-runner' ? ['--no-node-snapshot'] : []), join(repoRoot(), 'services', service, 'dist', 'main.js')], {
    PATH: process.env['PATH'] ?? '',
    ...env,
  });

function environmentOf(service: ServiceName, takenPort: number): Record<string, string> {
  const env = serviceEnvironment(service, nats, mongo.uri, { LOG_LEVEL: 'info' });
  if (service === 'credential-vault') Object.assign(env, { ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}` });
  if (service !== 'gateway') return { ...env, HEALTH_PORT: String(takenPort) };
  // The gateway's metrics port is bound after NATS and the database are connected: an exit from
  // there must not wait on those connections.
  return {
    ...env,
    PORT: '0',
    METRICS_PORT: String(takenPort),
    ADMIN_TOKEN: randomBytes(24).toString('base64url'),
    API_KEY_DIGEST_SECRET: `digest-${randomBytes(16).toString('hex')}`,
    SETTINGS_ENCRYPTION_KEYS: `v1:${randomBytes(32).toString('base64')}`,
  };
}

describe('a service that cannot start', () => {
  it.each([...SERVICE_NAMES])(
    '%s, its port taken, exits 1 with the reason in one JSON line and nothing else on stderr',
    async (service) => {
      const held = await holdPort();
      try {
        const { code, stdout, stderr } = await runService(service, environmentOf(service, held.port));
        expect(stderr).toBe('');
        // Every line is a log record: nothing printed outside the JSON.
        const records = logRecords<{ level: string; message: string; service: string; error?: { message?: string } }>(stdout);
        const last = records.at(-1);
        expect(last).toMatchObject({ level: 'error', message: 'could not start', service });
        expect(last?.error?.message).toContain('EADDRINUSE');
        expect(code).toBe(1);
      } finally {
        held.server.close();
      }
    },
    60_000,
  );
});
