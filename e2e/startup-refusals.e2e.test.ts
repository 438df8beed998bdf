import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { SERVICE_NAMES, type ServiceName } from '@latchkey/contracts';
import { freePort, repoRoot, serviceEnvironment, startMongo, startNats, type TestMongo, type TestNats } from '@latchkey/testing';

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
function runToExit(service: ServiceName, env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const flags = service === 'action-runner' ? ['--no-node-snapshot'] : [];
  const child = spawn(process.execPath, [...flags, join(repoRoot(), 'services', service, 'dist', 'main.js')], {
    env: { PATH: process.env['PATH'] ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  // A service that hangs instead of exiting fails the case on jest's timeout, with a kill after it.
  const kill = setTimeout(() => child.kill('SIGKILL'), 50_000);
  return new Promise((resolve) =>
    child.once('close', (code) => {
      clearTimeout(kill);
      resolve({ code, stdout, stderr });
    }),
  );
}

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
        const { code, stdout, stderr } = await runToExit(service, environmentOf(service, held.port));
        expect(stderr).toBe('');
        const lines = stdout.split('\n').filter((line) => line.trim() !== '');
        // Every line is a log record: nothing printed outside the JSON.
        const records = lines.map((line) => JSON.parse(line) as { level: string; message: string; service: string; error?: { message?: string } });
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
