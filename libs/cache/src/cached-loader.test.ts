import { describe, expect, it } from '@jest/globals';
import { cachedLoader } from './cached-loader.js';

describe('cachedLoader', () => {
  it('keeps answers, null ones too, for the ttl, and asks once for concurrent misses', async () => {
    let now = 0;
    const asked: string[] = [];
    const get = cachedLoader(
      async (key) => {
        asked.push(key);
        return key === 'missing' ? null : key.toUpperCase();
      },
      { ttlMs: 2000, maxEntries: 10, now: () => now },
    );
    expect(await Promise.all([get('a'), get('a'), get('missing'), get('missing')])).toEqual(['A', 'A', null, null]);
    expect(asked).toEqual(['a', 'missing']);
    now = 1999;
    await get('a');
    await get('missing');
    expect(asked).toHaveLength(2);
    now = 2000;
    await get('a');
    expect(asked).toEqual(['a', 'missing', 'a']);
  });

  it('keeps no failure', async () => {
    let fail = true;
    const get = cachedLoader(async () => {
      if (fail) throw new Error('gateway did not answer');
      return 'ok';
    }, { ttlMs: 2000, maxEntries: 10 });
    await expect(get('k')).rejects.toThrow('gateway did not answer');
    fail = false;
    await expect(get('k')).resolves.toBe('ok');
  });
});
