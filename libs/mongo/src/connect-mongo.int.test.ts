import { Writable } from 'node:stream';
import { expect, it } from '@jest/globals';
import { createLogger } from '@latchkey/logger';
import { freePort } from '@latchkey/testing';
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
