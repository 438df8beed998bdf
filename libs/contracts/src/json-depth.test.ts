import { describe, expect, it } from '@jest/globals';
import { JSON_MAX_DEPTH, pathTooDeep } from './json-depth.js';

describe('pathTooDeep', () => {
  it('names the first array or object past the limit, counting containers only', () => {
    expect(pathTooDeep({ a: [1, { b: 'x' }] }, 2)).toBeUndefined();
    expect(pathTooDeep({ a: [1, { b: ['x'] }] }, 2)).toEqual(['a', 1, 'b']);
    expect(pathTooDeep('text')).toBeUndefined();
  });

  it('walks a value nested 100,000 levels without overflowing, and stops at the limit', () => {
    const deep = JSON.parse(`{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`);
    expect(pathTooDeep(deep)).toEqual(['a', ...Array(JSON_MAX_DEPTH).fill(0)]);
  });
});
