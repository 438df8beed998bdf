import { describe, expect, it } from '@jest/globals';
import { METADATA_MAX_DEPTH, metadataSchema } from './vault.js';

/** `{a: [[…]]}`: arrays `levels` deep under `a`, the deepest at a path of `levels` steps. */
const nested = (levels: number) => JSON.parse(`{"a":${'['.repeat(levels)}${']'.repeat(levels)}}`) as Record<string, unknown>;

describe('metadataSchema', () => {
  it(`takes metadata nested ${METADATA_MAX_DEPTH - 1} levels deep, and refuses one level more at the path where it goes past`, () => {
    expect(metadataSchema.safeParse(nested(METADATA_MAX_DEPTH - 1)).success).toBe(true);
    const refused = metadataSchema.safeParse(nested(METADATA_MAX_DEPTH));
    expect(refused.success).toBe(false);
    expect(refused.error?.issues).toEqual([
      expect.objectContaining({ message: `nested deeper than ${METADATA_MAX_DEPTH} levels`, path: ['a', ...Array.from({ length: METADATA_MAX_DEPTH - 1 }, () => 0)] }),
    ]);
  });

  it('refuses metadata nested 20,000 levels deep as a validation issue, not a stack overflow', () => {
    const refused = metadataSchema.safeParse(nested(20_000));
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.message).toBe(`nested deeper than ${METADATA_MAX_DEPTH} levels`);
  });

  it('still reports keys that are not field-safe at their path, in the order they come', () => {
    const refused = metadataSchema.safeParse({ 'a.b': 1, c: { $d: [{ 'e.f': 2 }] } });
    expect(refused.error?.issues.map((issue) => issue.path)).toEqual([['a.b'], ['c', '$d'], ['c', '$d', 0, 'e.f']]);
  });
});
