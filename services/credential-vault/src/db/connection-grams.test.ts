import { describe, expect, it } from '@jest/globals';
import { LONGEST_GRAMMED_ID, gramsOf, needleGrams, searchListsOf } from './connection-grams.js';

describe("a connection id's grams", () => {
  it('are its distinct lowercase trigrams, in order of first appearance', () => {
    expect(gramsOf('Bulk-12')).toEqual(['bul', 'ulk', 'lk-', 'k-1', '-12']);
    expect(gramsOf('aaaaAA')).toEqual(['aaa']);
    expect(gramsOf('abcabc')).toEqual(['abc', 'bca', 'cab']);
  });

  it('are none for fewer than three characters', () => {
    expect(gramsOf('')).toEqual([]);
    expect(gramsOf('ab')).toEqual([]);
    expect(gramsOf('abc')).toEqual(['abc']);
  });

  it('count characters, not UTF-16 units: a surrogate pair is never split', () => {
    expect(gramsOf('a😀bc')).toEqual(['a😀b', '😀bc']);
    // Lowercased as a whole, as the filter compares (İ lowers to two characters).
    expect(gramsOf('İX')).toEqual(['i̇x']);
  });

  it('of a needle are among the grams of every id that holds it', () => {
    const ids = ['550e8400-e29b-41d4-a716-446655440000', 'Customer_42-SLACK', 'x.y*z?(a)[b]'];
    for (const id of ids) {
      for (let start = 0; start < id.length; start++) {
        for (let end = start + 3; end <= id.length; end++) {
          const grams = new Set(gramsOf(id));
          for (const gram of needleGrams(id.slice(start, end).toUpperCase())) expect(grams.has(gram)).toBe(true);
        }
      }
    }
  });

  it('of a long needle are a bounded spread of its grams', () => {
    const needle = 'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(7);
    const grams = needleGrams(needle);
    expect(grams.length).toBeLessThanOrEqual(16);
    expect(grams[0]).toBe('abc');
    expect(grams.at(-1)).toBe(gramsOf(needle).at(-1));
    expect(needleGrams('ab')).toEqual([]);
  });
});

describe("the search lists a connection joins", () => {
  it('one per distinct gram, or the long ids list past the bound', () => {
    expect(searchListsOf('AbcAbc')).toEqual([
      ['gram', 'abc'],
      ['gram', 'bca'],
      ['gram', 'cab'],
    ]);
    expect(searchListsOf('ab')).toEqual([]);
    expect(searchListsOf('x'.repeat(LONGEST_GRAMMED_ID))).toEqual([['gram', 'xxx']]);
    expect(searchListsOf('x'.repeat(LONGEST_GRAMMED_ID + 1))).toEqual([['long_id']]);
  });
});
