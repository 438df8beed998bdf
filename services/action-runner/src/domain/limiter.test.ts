import { describe, expect, it } from '@jest/globals';
import { createLimiter } from './limiter.js';

describe('createLimiter', () => {
  it('runs at most its limit at once, the rest in order; one whose signal aborts while waiting leaves the line', async () => {
    const limited = createLimiter(1);
    const order: string[] = [];
    let release!: () => void;
    const first = limited(() => new Promise<void>((resolve) => (release = resolve)).then(() => void order.push('first')), { owner: 'env' });
    const leaving = new AbortController();
    const reason = new Error('stopping');
    const second = limited(async () => void order.push('second'), { owner: 'env', signal: leaving.signal });
    const third = limited(async () => void order.push('third'), { owner: 'env' });
    leaving.abort(reason);
    await expect(second).rejects.toBe(reason);
    release();
    await Promise.all([first, third]);
    expect(order).toEqual(['first', 'third']);
    await expect(limited(async () => 'ran', { owner: 'env', signal: AbortSignal.abort(reason) })).resolves.toBe('ran'); // a free slot: nothing to wait for
  });

  it('gives up a wait past maxWaitMs with 503 service_unavailable, and never runs that work, even once a slot frees', async () => {
    const limited = createLimiter(1);
    let release!: () => void;
    const held = limited(() => new Promise<void>((resolve) => (release = resolve)), { owner: 'env' });
    let ran = false;
    const late = limited(async () => void (ran = true), { owner: 'env', maxWaitMs: 50 });
    await expect(late).rejects.toMatchObject({ code: 'service_unavailable' });
    release();
    await held;
    await expect(limited(async () => 'next', { owner: 'env' })).resolves.toBe('next');
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
    const held = limited(() => gate, { owner: 'env' });
    const waiter = limited(work, { owner: 'env' });
    // Called back in the turn the slot frees: after the holder's release, before the waiter wakes.
    const racing = gate.then(() => limited(work, { owner: 'env' }));
    release();
    await Promise.all([held, waiter, racing]);
    expect(peak).toBe(1);
  });

  it('gives a freed slot to each waiting environment in turn, so one with a long queue delays another by one run', async () => {
    const limited = createLimiter(1);
    const order: string[] = [];
    let release!: () => void;
    const held = limited(() => new Promise<void>((resolve) => (release = resolve)), { owner: 'busy' });
    const runs = ['busy 1', 'busy 2', 'busy 3'].map((name) => limited(async () => void order.push(name), { owner: 'busy' }));
    runs.push(limited(async () => void order.push('quiet 1'), { owner: 'quiet' }));
    runs.push(limited(async () => void order.push('quiet 2'), { owner: 'quiet' }));
    runs.push(limited(async () => void order.push('third 1'), { owner: 'third' }));
    release();
    await Promise.all([held, ...runs]);
    expect(order).toEqual(['busy 1', 'quiet 1', 'third 1', 'busy 2', 'quiet 2', 'busy 3']);
  });

  it('keeps its turns when a waiter leaves: the rest of that environment and the others still run in turn', async () => {
    const limited = createLimiter(1);
    const order: string[] = [];
    let release!: () => void;
    const held = limited(() => new Promise<void>((resolve) => (release = resolve)), { owner: 'a' });
    const leaving = new AbortController();
    const gone = limited(async () => void order.push('a gone'), { owner: 'a', signal: leaving.signal });
    const alone = limited(async () => void order.push('c gone'), { owner: 'c', maxWaitMs: 10 });
    const runs = [limited(async () => void order.push('b 1'), { owner: 'b' }), limited(async () => void order.push('a 1'), { owner: 'a' })];
    leaving.abort(new Error('handed back'));
    await expect(gone).rejects.toThrow('handed back');
    await expect(alone).rejects.toMatchObject({ code: 'service_unavailable' });
    release();
    await Promise.all([held, ...runs]);
    expect(order).toEqual(['a 1', 'b 1']);
  });
});
