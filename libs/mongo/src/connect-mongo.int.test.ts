import { Writable } from 'node:stream';
import { expect, it } from '@jest/globals';
import { createLogger } from '@latchkey/logger';
import { freePort, startMongo, uniqueDbName } from '@latchkey/testing';
import { connectMongo, isMongoUnavailable } from './connect-mongo.js';

/** A logger whose lines the test reads. */
function recordingLogger(): { logger: ReturnType<typeof createLogger>; retries: () => number } {
  const lines: string[] = [];
  const logger = createLogger({ service: 'test', stream: new Writable({ write: (line, _, done) => done(void lines.push(String(line))) }) });
  return { logger, retries: () => lines.filter((line) => line.includes('mongodb not reachable yet')).length };
}

it('tries an unreachable database again after growing pauses, until its startup wait runs out', async () => {
  const { logger, retries } = recordingLogger();
  // Nothing listens there: each try is refused within its 50 ms selection timeout.
  const port = await freePort();
  const connecting = connectMongo({ uri: `mongodb://127.0.0.1:${port}`, dbName: 'unreached', logger, serverSelectionTimeoutMs: 50, startupWaitMs: 1_500 });
  const error = await connecting.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(isMongoUnavailable(error)).toBe(true);
  // Pauses of 100, 200, 400 and 800 ms fill the 1.5 s; without them, some twenty tries of 50 ms would.
  expect(retries()).toBeGreaterThanOrEqual(1);
  expect(retries()).toBeLessThanOrEqual(6);
});

it('fails at once, without a retry, when the database refuses the login', async () => {
  const mongo = await startMongo();
  try {
    const { logger, retries } = recordingLogger();
    // The test database with a login it refuses: FerretDB refuses the mechanism the driver
    // picks, MongoDB the unknown user or the wrong password. Neither mends by waiting.
    const refused = new URL(mongo.uri);
    refused.username = refused.username || 'latchkey-test';
    refused.password = 'not-the-password';
    const error = await connectMongo({ uri: refused.toString(), dbName: uniqueDbName('refused'), logger, startupWaitMs: 10_000 }).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toMatchObject({ name: 'MongoServerError', code: 18 });
    expect(isMongoUnavailable(error)).toBe(false);
    expect(retries()).toBe(0);
  } finally {
    await mongo.dispose();
  }
});
