import { describe, expect, it } from '@jest/globals';
import { createLastUsedTracker } from './last-used.js';

/** A `touch` that fails for the keys named in `failing`, and records what it wrote otherwise. */
function store() {
  const written = new Map<string, number>();
  const failing = new Set<string>();
  return {
    written,
    failing,
    touch: async (keyId: string, at: Date) => {
      if (failing.has(keyId)) throw new Error(`database away for ${keyId}`);
      written.set(keyId, at.getTime());
    },
  };
}

describe('last-used tracker', () => {
  it('writes each key once per flush, with its latest use', async () => {
    let clock = 1_000;
    const db = store();
    const tracker = createLastUsedTracker({ touch: db.touch, now: () => clock });
    tracker.record('key_a');
    clock = 2_000;
    tracker.record('key_a');
    await tracker.flush();
    expect(db.written).toEqual(new Map([['key_a', 2_000]]));
    db.written.clear();
    await tracker.flush();
    expect(db.written.size).toBe(0);
  });

  it('keeps what a failed flush could not write, for the next flush, with the larger time', async () => {
    let clock = 1_000;
    const db = store();
    const tracker = createLastUsedTracker({ touch: db.touch, now: () => clock });
    tracker.record('key_a');
    tracker.record('key_b');
    db.failing.add('key_b');
    await expect(tracker.flush()).rejects.toThrow('database away for key_b');
    expect(db.written).toEqual(new Map([['key_a', 1_000]]));

    db.failing.clear();
    await tracker.flush();
    expect(db.written.get('key_b')).toBe(1_000);

    // A use recorded while a failing write is under way is newer than the one put back.
    tracker.record('key_c');
    db.failing.add('key_c');
    const flushing = tracker.flush();
    clock = 5_000;
    tracker.record('key_c');
    await expect(flushing).rejects.toThrow();
    db.failing.clear();
    await tracker.flush();
    expect(db.written.get('key_c')).toBe(5_000);
  });

  it('puts back no more than its bound while the database stays away', async () => {
    const db = store();
    const tracker = createLastUsedTracker({ touch: db.touch, now: () => 1_000 }, { maxPending: 3 });
    for (const key of ['key_a', 'key_b', 'key_c', 'key_d', 'key_e']) {
      tracker.record(key);
      db.failing.add(key);
    }
    await expect(tracker.flush()).rejects.toThrow();
    db.failing.clear();
    await tracker.flush();
    expect(db.written.size).toBe(3);
  });
});
