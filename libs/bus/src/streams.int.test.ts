import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { STREAMS } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { createBus, ensureStreams, type Bus } from './index.js';

const logger = createLogger({ service: 'test', silent: true });
let nats: TestNats;
let buses: Bus[];

beforeAll(async () => {
  nats = await startNats();
  const identity = nats.credentials('observer');
  // 10 s per request: what is checked is NATS's answer, never its speed; 16 services creating
  // every stream at once, 150 times over, is where a 2 s deadline runs out on a loaded machine.
  buses = await Promise.all(Array.from({ length: 16 }, (_, i) => createBus({ servers: nats.url, service: `starter-${i}`, identity, logger, requestTimeoutMs: 10_000 })));
});

afterAll(async () => {
  await Promise.all((buses ?? []).map((bus) => bus.drain()));
  await nats?.dispose();
});

describe('ensureStreams', () => {
  // NATS (2.9 here) checks a new stream's name under a read lock and its subjects later under the
  // write lock: a twin created in between is refused as "subjects overlap". The window is narrow;
  // many rounds of 16 services at once hit it on a loaded machine (CI failed on it once).
  it('succeeds for every service of a stack starting at once, whichever creates each stream', async () => {
    const jsm = await buses[0]!.jetstreamManager();
    for (let round = 0; round < 150; round++) {
      for (const stream of Object.values(STREAMS)) await jsm.streams.delete(stream.name).catch(() => undefined);
      const outcomes = await Promise.allSettled(buses.map((bus) => ensureStreams(bus)));
      const failures = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [String(outcome.reason)] : []));
      expect({ round, failures }).toEqual({ round, failures: [] });
    }
    const names = [];
    for await (const info of jsm.streams.list()) names.push(info.config.name);
    expect(names.sort()).toEqual(Object.values(STREAMS).map((stream) => stream.name).sort());
  }, 90_000);

  it('still refuses a stream of another name that holds the same subjects', async () => {
    const jsm = await buses[0]!.jetstreamManager();
    await jsm.streams.delete(STREAMS.events.name);
    await jsm.streams.add({ name: 'SQUATTER', subjects: [...STREAMS.events.subjects] });
    try {
      await expect(ensureStreams(buses[1]!)).rejects.toThrow(/subjects overlap/);
    } finally {
      await jsm.streams.delete('SQUATTER');
    }
    await ensureStreams(buses[1]!);
  });
});
