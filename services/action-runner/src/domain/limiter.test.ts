import { describe, expect, it } from '@jest/globals';
import { createLimiter } from './limiter.js';

describe('createLimiter', () => {
  it('runs at most its limit at once, the rest in order; one whose signal aborts while waiting leaves the line', async () => {
    const limited = createLimiter(1);
    const order: string[] = [];
    let release!: () => void;
    const first = limited(() => new Promise<void>((resolve) => (release = resolve)).then(() => void order.push('first')));
    const leaving = new AbortController();
    const reason = new Error('stopping');
    const second = limited(async () => void order.push('second'), leaving.signal);
    const third = limited(async () => void order.push('third'));
    leaving.abort(reason);
    await expect(second).rejects.toBe(reason);
    release();
    await Promise.all([first, third]);
    expect(order).toEqual(['first', 'third']);
    await expect(limited(async () => 'ran', AbortSignal.abort(reason))).resolves.toBe('ran'); // a free slot: nothing to wait for
  });

  it('gives up a wait past maxWaitMs with 503 service_unavailable, and never runs that work, even once a slot frees', async () => {
    const limited = createLimiter(1);
    let release!: () => void;
    const held = limited(() => new Promise<void>((resolve) => (release = resolve)));
    let ran = false;
    const late = limited(async () => void (ran = true), undefined, 50);
    await expect(late).rejects.toMatchObject({ code: 'service_unavailable' });
    release();
    await held;
    await expect(limited(async () => 'next')).resolves.toBe('next');
    expect(ran).toBe(false);
  });

  it('hands a freed slot straight to the first in line, so a call arriving as the slot frees never runs beside it', async () => {
    const limited = createLimiter(1);
    let running = 0;
    let peak = 0;
    const work = async () => {
      running++;
      peak = Math.max(peak, running);
      await new Promise((resolve) => setTimeout(resolve, 10));
      running--;
    };
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held = limited(() => gate);
    const waiter = limited(work);
    // Called back in the turn the slot frees: after the holder's release, before the waiter wakes.
    const racing = gate.then(() => limited(work));
    release();
    await Promise.all([held, waiter, racing]);
    expect(peak).toBe(1);
  });
});
