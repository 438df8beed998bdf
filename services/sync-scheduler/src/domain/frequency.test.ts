import { describe, expect, it } from '@jest/globals';
import { MIN_FREQUENCY_MS, parseFrequency } from './frequency.js';
import { isDue, nextRunAfter } from './schedule-rules.js';

describe('parseFrequency', () => {
  it.each([
    ['every hour', 3600_000],
    ['every 30 minutes', 30 * 60_000],
    ['every day', 86_400_000],
    ['every 2 hours', 7200_000],
    ['Every 1 Minute', 60_000],
    ['1d', 86_400_000],
    ['30m', 30 * 60_000],
    ['2h', 7200_000],
    ['90s', 90_000],
    ['1w', 7 * 86_400_000],
    ['every 5min', 5 * 60_000],
  ])('%s', (text, ms) => expect(parseFrequency(text)).toBe(ms));

  it.each(['', 'hourly', 'every', 'every -1 hours', '10 fortnights', 'every 1.5 hours', '30s', '0m', '400d', 'every hour and a half'])('refuses %j', (text) =>
    expect(parseFrequency(text)).toBeUndefined(),
  );

  it('has a floor of one minute', () => {
    expect(MIN_FREQUENCY_MS).toBe(60_000);
    expect(parseFrequency('59s')).toBeUndefined();
    expect(parseFrequency('60s')).toBe(60_000);
    expect(parseFrequency('2s', 1000)).toBe(2000);
  });
});

describe('scheduling decisions', () => {
  const now = new Date('2026-01-01T12:00:00Z');
  const past = new Date('2026-01-01T11:00:00Z');
  it('runs a due, started, idle schedule', () => expect(isDue({ paused: false, running: null, next_run_at: past }, now)).toBe(true));
  it('does not run a paused one', () => expect(isDue({ paused: true, running: null, next_run_at: past }, now)).toBe(false));
  it('never overlaps the run in flight', () => expect(isDue({ paused: false, running: 'run-1', next_run_at: past }, now)).toBe(false));
  it('waits for its time', () => expect(isDue({ paused: false, running: null, next_run_at: new Date('2026-01-01T12:00:01Z') }, now)).toBe(false));
  it('counts the next run from now, so missed ticks make one run', () => {
    const longAgo = new Date('2025-12-01T00:00:00Z');
    expect(isDue({ paused: false, running: null, next_run_at: longAgo }, now)).toBe(true);
    const next = nextRunAfter(now, 3600_000);
    expect(next.toISOString()).toBe('2026-01-01T13:00:00.000Z');
    expect(isDue({ paused: false, running: null, next_run_at: next }, now)).toBe(false);
  });
});
