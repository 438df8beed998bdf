import { describe, expect, it } from '@jest/globals';
import { createDueIndex } from './due-index.js';

const at = (ms: number) => ({ paused: false, running: null, next_run_at: new Date(ms) });

describe('the due index', () => {
  it('gives what is due, earliest first, at most the limit, and forgets what it gave', () => {
    const index = createDueIndex();
    index.put('c', at(300));
    index.put('a', at(100));
    index.put('later', at(5000));
    index.put('b', at(200));
    expect(index.take(new Date(1000), 2)).toEqual(['a', 'b']);
    expect(index.take(new Date(1000), 10)).toEqual(['c']);
    expect(index.take(new Date(1000), 10)).toEqual([]);
    expect(index.size).toBe(1);
    expect(index.take(new Date(5000), 10)).toEqual(['later']);
  });

  it('keeps one time per schedule: the last put wins, paused and removed ones are not due', () => {
    const index = createDueIndex();
    index.put('moved', at(100));
    index.put('moved', at(9000));
    index.put('paused', { ...at(100), paused: true });
    index.put('gone', at(100));
    index.remove('gone');
    expect(index.take(new Date(1000), 10)).toEqual([]);
    expect(index.take(new Date(9000), 10)).toEqual(['moved']);
  });

  it('keeps a running schedule at its next run: if its run is still shown then, a claim looks at it', () => {
    const index = createDueIndex();
    index.put('running', { ...at(2000), running: 'run-1' });
    expect(index.take(new Date(1000), 10)).toEqual([]);
    expect(index.take(new Date(2000), 10)).toEqual(['running']);
  });

  it('stays bounded when the same schedules move again and again', () => {
    const index = createDueIndex();
    for (let round = 0; round < 200; round++) for (let i = 0; i < 100; i++) index.put(`s${i}`, at(1000 + round * 10 + i));
    expect(index.size).toBe(100);
    expect(index.take(new Date(10_000), 1000)).toHaveLength(100);
  });
});
