import { describe, expect, it } from '@jest/globals';
import { isValidRequestId, newRequestId, requestIdFrom } from './request-context.js';

describe('newRequestId', () => {
  it('makes plain tokens, each new, in the order they were made', () => {
    const ids = Array.from({ length: 10_000 }, () => newRequestId());
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every(isValidRequestId)).toBe(true);
    expect([...ids].sort()).toEqual(ids);
  });

  it('starts with the time it was made, in base 36', () => {
    const before = Date.now();
    const id = newRequestId();
    const at = parseInt(id.slice(0, before.toString(36).length), 36);
    expect(at).toBeGreaterThanOrEqual(before);
    expect(at).toBeLessThanOrEqual(Date.now());
  });
});

describe('requestIdFrom', () => {
  it("keeps a caller's plain token and replaces anything else", () => {
    expect(requestIdFrom('abc-123')).toBe('abc-123');
    for (const bad of ['', 'a b', 'x'.repeat(129), 'line\nbreak', 42, undefined]) {
      const made = requestIdFrom(bad);
      expect(made).not.toBe(bad);
      expect(isValidRequestId(made)).toBe(true);
    }
  });
});
