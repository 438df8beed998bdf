import { Writable } from 'node:stream';
import { DiscardPolicy, type JetStreamManager } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { z } from 'zod';
import { defineJob, STREAMS, STREAMS_OWNER } from '@latchkey/contracts';
import { createLogger } from '@latchkey/logger';
import { startNats, type TestNats } from '@latchkey/testing';
import { createBus, ensureStreams, type Bus } from './index.js';

const logger = createLogger({ service: 'test', silent: true });
/** What the streams' owner logged (it alone updates a stream, and says when it holds a bound back). */
const ownerLines: string[] = [];
const ownerLogger = createLogger({ service: 'test', stream: new Writable({ write: (line, _, done) => done(void ownerLines.push(String(line))) }) });
let nats: TestNats;
let buses: Bus[];
let owner: Bus;

beforeAll(async () => {
  nats = await startNats();
  const identity = nats.credentials('observer');
  // 10 s per request: what is checked is NATS's answer, never its speed; 16 services creating
  // every stream at once, 150 times over, is where a 2 s deadline runs out on a loaded machine.
  buses = await Promise.all(Array.from({ length: 16 }, (_, i) => createBus({ servers: nats.url, service: `starter-${i}`, identity, logger, requestTimeoutMs: 10_000 })));
  owner = await createBus({ servers: nats.url, service: STREAMS_OWNER, identity, logger: ownerLogger, requestTimeoutMs: 10_000 });
});

afterAll(async () => {
  await Promise.all([...(buses ?? []), ...(owner ? [owner] : [])].map((bus) => bus.drain()));
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

describe('the JOBS stream', () => {
  // Small bounds, so a few jobs fill the stream; the services' default is STREAMS.jobs.maxBytes.
  const bound = 64 * 1024;
  const probe = defineJob('test.stream-bound', z.object({ filler: z.string() }));
  const filler = 'x'.repeat(8 * 1024);

  /** JOBS as a version without a byte bound made it, holding `count` jobs. */
  async function unboundedJobs(jsm: JetStreamManager, count: number): Promise<void> {
    await jsm.streams.delete(STREAMS.jobs.name).catch(() => undefined);
    await jsm.streams.add({ name: STREAMS.jobs.name, subjects: [...STREAMS.jobs.subjects], max_age: nanos(STREAMS.jobs.maxAgeMs) });
    for (let n = 0; n < count; n++) await buses[0]!.enqueue(probe, { filler });
  }

  it('is bounded by bytes from its creation, and refuses a job past the bound with a clear 503', async () => {
    const jsm = await buses[0]!.jetstreamManager();
    await jsm.streams.delete(STREAMS.jobs.name).catch(() => undefined);
    await ensureStreams(buses[1]!, { jobsMaxBytes: bound });
    expect((await jsm.streams.info(STREAMS.jobs.name)).config).toMatchObject({ max_bytes: bound, discard: DiscardPolicy.New });

    let accepted = 0;
    let refusal: unknown;
    while (refusal === undefined && accepted < 100) {
      try {
        await buses[0]!.enqueue(probe, { filler });
        accepted += 1;
      } catch (error) {
        refusal = error;
      }
    }
    expect(accepted).toBeGreaterThan(0);
    expect(refusal).toMatchObject({ code: 'service_unavailable', message: expect.stringMatching(/^jobs\.test\.stream-bound: the JOBS stream is full/) });
    // Refused, not made room for: every job stored is still there, the first one first.
    expect((await jsm.streams.info(STREAMS.jobs.name)).state).toMatchObject({ messages: accepted, first_seq: 1 });
  });

  it('takes its bound when the streams\' owner starts on an existing stream, keeping every job it holds', async () => {
    const jsm = await buses[0]!.jetstreamManager();
    await unboundedJobs(jsm, 3);
    // Only the owner may change a stream: the others leave it as it is.
    await ensureStreams(buses[1]!, { jobsMaxBytes: bound });
    expect((await jsm.streams.info(STREAMS.jobs.name)).config).toMatchObject({ max_bytes: -1, discard: DiscardPolicy.Old });

    await ensureStreams(owner, { jobsMaxBytes: bound });
    const info = await jsm.streams.info(STREAMS.jobs.name);
    expect(info.config).toMatchObject({ max_bytes: bound, discard: DiscardPolicy.New });
    expect(info.state).toMatchObject({ messages: 3, first_seq: 1 });
    await expect(async () => {
      for (let n = 0; n < 100; n++) await buses[0]!.enqueue(probe, { filler });
    }).rejects.toMatchObject({ code: 'service_unavailable', message: expect.stringMatching(/the JOBS stream is full/) });
  });

  it('holds a bound back, and says so, while the stream holds more than it (NATS 2.9 would drop the oldest jobs)', async () => {
    const jsm = await buses[0]!.jetstreamManager();
    await unboundedJobs(jsm, 12);
    ownerLines.length = 0;
    await ensureStreams(owner, { jobsMaxBytes: bound });
    const info = await jsm.streams.info(STREAMS.jobs.name);
    expect(info.config.max_bytes).toBe(-1);
    expect(info.state).toMatchObject({ messages: 12, first_seq: 1 });
    expect(ownerLines.map((line) => JSON.parse(line) as { level: string; message: string; stream?: string })).toContainEqual(
      expect.objectContaining({ level: 'warn', message: expect.stringMatching(/holds more than its bound/), stream: STREAMS.jobs.name }),
    );
    // Once it holds less (the jobs aged out), the next start applies it.
    await jsm.streams.purge(STREAMS.jobs.name);
    await ensureStreams(owner, { jobsMaxBytes: bound });
    expect((await jsm.streams.info(STREAMS.jobs.name)).config).toMatchObject({ max_bytes: bound, discard: DiscardPolicy.New });
  });

  it('names the setting when NATS cannot reserve the bound in its store', async () => {
    const jsm = await buses[0]!.jetstreamManager();
    await jsm.streams.delete(STREAMS.jobs.name).catch(() => undefined);
    // A pebibyte: more than the store of any test server (75 % of its disk's free space, 1 TB at most).
    await expect(ensureStreams(buses[1]!, { jobsMaxBytes: 2 ** 50 })).rejects.toThrow(/JOBS_STREAM_MAX_BYTES/);
    await ensureStreams(buses[1]!);
    expect((await jsm.streams.info(STREAMS.jobs.name)).config).toMatchObject({ max_bytes: STREAMS.jobs.maxBytes, discard: DiscardPolicy.New });
  });
});
