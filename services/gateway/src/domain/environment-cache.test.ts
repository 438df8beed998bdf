import { describe, expect, it } from '@jest/globals';
import type { EnvironmentDoc } from '../db/environment-model.js';
import { createEnvironmentCache } from './environment-cache.js';

function environment(id: string, variables: Array<{ name: string; value: string }>): EnvironmentDoc {
  const at = new Date(0);
  return {
    _id: id,
    account_id: 'acc_1',
    name: 'prod',
    public_id: 'pub_1',
    webhook_url: null,
    webhook_url_secondary: null,
    send_auth_webhooks: false,
    callback_url: null,
    connect_return_origins: [],
    variables,
    signing_keys: [],
    created_at: at,
    updated_at: at,
  };
}

/** An environment store in memory that counts reads, and the announcements made. */
function source() {
  const stored = new Map<string, EnvironmentDoc>([['env_1', environment('env_1', [{ name: 'A', value: '1' }])]]);
  const reads: string[] = [];
  const announced: string[] = [];
  const repo = {
    findById: async (id: string) => (reads.push(id), stored.get(id) ?? null),
    update: async (id: string, patch: Partial<EnvironmentDoc>) => {
      const current = stored.get(id);
      if (!current) return null;
      stored.set(id, { ...current, ...patch });
      return stored.get(id)!;
    },
    rotateSigningKeys: async () => [],
  };
  const cache = createEnvironmentCache({ repo, announce: (id) => announced.push(id) }, { ttlMs: 60_000, maxEntries: 10 });
  return { cache, reads, announced };
}

describe('environment cache', () => {
  it('reads an environment once, and shares one read between concurrent misses', async () => {
    const { cache, reads } = source();
    await Promise.all(Array.from({ length: 20 }, () => cache.findById('env_1')));
    expect((await cache.findById('env_1'))?.variables).toEqual([{ name: 'A', value: '1' }]);
    expect(reads).toEqual(['env_1']);
  });

  it('does not keep an unknown id: another replica may create it at any time', async () => {
    const { cache, reads } = source();
    expect(await cache.findById('env_2')).toBeNull();
    expect(await cache.findById('env_2')).toBeNull();
    expect(reads).toEqual(['env_2', 'env_2']);
  });

  it('drops its copy and announces on its own change, so the next read sees it', async () => {
    const { cache, announced } = source();
    await cache.findById('env_1');
    await cache.update('env_1', { variables: [{ name: 'A', value: '2' }] });
    expect(announced).toEqual(['env_1']);
    expect((await cache.findById('env_1'))?.variables).toEqual([{ name: 'A', value: '2' }]);
    await cache.rotateSigningKeys('env_1', new Date());
    expect(announced).toEqual(['env_1', 'env_1']);
  });

  it("drops its copy on another replica's announcement and on clear", async () => {
    const { cache, reads } = source();
    await cache.findById('env_1');
    cache.invalidate('env_1');
    await cache.findById('env_1');
    cache.clear();
    await cache.findById('env_1');
    expect(reads).toEqual(['env_1', 'env_1', 'env_1']);
  });
});
