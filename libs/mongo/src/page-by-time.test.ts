import { describe, expect, it } from '@jest/globals';
import { pageByTime } from './page-by-time.js';

/** A log newest first, as a collection sorted by time answers it. */
const log = [
  { id: 'a', at: new Date(5) },
  { id: 'b', at: new Date(4) },
  { id: 'c', at: new Date(4) },
  { id: 'd', at: new Date(4) },
  { id: 'e', at: new Date(3) },
];
const reader = (entries: typeof log) => ({
  read: async (limit: number, before?: Date) => entries.filter((entry) => before === undefined || entry.at < before).slice(0, limit),
  readAt: async (time: Date) => entries.filter((entry) => entry.at.getTime() === time.getTime()),
});

/** Every page, `?before` the last time of the one before, as an operator pages back. */
async function allPages(limit: number, entries = log): Promise<string[][]> {
  const { read, readAt } = reader(entries);
  const pages: string[][] = [];
  let before: Date | undefined;
  for (;;) {
    const page = await pageByTime(limit, (count) => read(count, before), (entry) => entry.at, readAt);
    if (page.length === 0) return pages;
    pages.push(page.map((entry) => entry.id));
    before = page.at(-1)!.at;
  }
}

describe('pageByTime', () => {
  it('ends each page between two times, so paging back by the last time skips no entry', async () => {
    expect(await allPages(2)).toEqual([['a'], ['b', 'c', 'd'], ['e']]);
    expect(await allPages(3)).toEqual([['a'], ['b', 'c', 'd'], ['e']]);
    expect(await allPages(4)).toEqual([['a', 'b', 'c', 'd'], ['e']]);
    expect(await allPages(10)).toEqual([['a', 'b', 'c', 'd', 'e']]);
  });

  it('holds every entry of a time that alone fills the page, past the limit', async () => {
    expect(await allPages(1)).toEqual([['a'], ['b', 'c', 'd'], ['e']]);
  });
});
