import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { logRecords, repoRoot, runToExit, serviceEnvironment, startMongo, startNats, type TestMongo, type TestNats } from '@latchkey/testing';

// A running service in which a callback throws ends as Node would end it (exit 1), but says why
// in one JSON line, as every other line it writes, where Node printed a bare stack trace. The
// service is a process of its own, on the built runtime (`dist/`), against real NATS and FerretDB.

let nats: TestNats;
let mongo: TestMongo;
let dir: string;

beforeAll(async () => {
  [nats, mongo] = await Promise.all([startNats(), startMongo()]);
  dir = mkdtempSync(join(tmpdir(), 'latchkey-run-main-'));
}, 60_000);

afterAll(async () => {
  await Promise.all([nats?.dispose(), mongo?.dispose()]);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('a throw no code caught, once the service runs, is one JSON line and exit 1', async () => {
  const runtime = pathToFileURL(join(repoRoot(), 'libs', 'runtime', 'dist', 'index.js')).href;
  const script = join(dir, 'throws.mjs');
  writeFileSync(
    script,
    `import { runMain } from ${JSON.stringify(runtime)};
const env = process.env;
await runMain({
  service: 'proxy',
  config: { NATS_URL: env.NATS_URL, NATS_PASSWORD: env.NATS_PASSWORD, MONGODB_URI: env.MONGODB_URI, MONGODB_DB: env.MONGODB_DB,
    LOG_LEVEL: 'info', REQUEST_TIMEOUT_MS: 5000, SHUTDOWN_TIMEOUT_MS: 5000 },
  start: async () => { setTimeout(() => { throw new Error('a callback threw'); }, 200); },
});
`,
  );
  const { code, stdout, stderr } = await runToExit(process.execPath, [script], { PATH: process.env['PATH'] ?? '', ...serviceEnvironment('proxy', nats, mongo.uri) }, 30_000);

  expect(stderr).toBe('');
  const records = logRecords<{ level: string; message: string; error?: { message?: string; stack?: string } }>(stdout);
  expect(records.map((record) => record.message)).toEqual(expect.arrayContaining(['ready', 'uncaught exception; exiting']));
  expect(records.at(-1)).toMatchObject({ level: 'error', message: 'uncaught exception; exiting', error: { message: 'a callback threw' } });
  expect(records.at(-1)?.error?.stack).toContain('throws.mjs');
  expect(code).toBe(1);
}, 60_000);
