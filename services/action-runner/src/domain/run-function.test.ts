import { describe, expect, it } from '@jest/globals';
import type { Bus } from '@latchkey/bus';
import { createLogger } from '@latchkey/logger';
import { createFunctionCache } from './function-cache.js';
import { ENVIRONMENT_GRANTS } from './host.js';
import { createRunner } from './run-function.js';

/** A runner keeping warm isolates, for runs that make no context call (the bus is never asked). */
function runner() {
  return createRunner({
    bus: {} as Bus,
    logger: createLogger({ service: 'test', silent: true }),
    cache: createFunctionCache({ ttlMs: 60_000, maxEntries: 10, maxBytes: 1024 * 1024 }),
    limits: { memoryMb: 32, timeoutMs: 20_000 },
    syncLimits: { timeoutMs: 20_000 },
    warmIsolates: 2,
    limited: (work) => work(),
    proxyTimeoutMs: 5_000,
    publicUrl: 'http://127.0.0.1',
  });
}

// A deployed action that keeps what each run was given in its module: the way a function caches
// a token or a variable it read with its context.
const fn = {
  version: 1,
  description: { type: 'action' as const, name: 'remember', has_input_schema: false },
  bundle: `"use strict";const seen = [];
module.exports = { default: { kind: 'action', name: 'remember', exec: async (ctx, input) => { seen.push(input.secret ?? null); return seen; } } };`,
};
const target = { environment_id: 'env_1', provider_config_key: 'crm', connection_id: 'conn-1' };

describe('warm isolates', () => {
  it('are shared by the runs of a deployed function, but never with a dry run, which acts with a key\'s narrower scopes', async () => {
    const run = runner();
    const outputOf = async (input: unknown, dryRun: boolean) => {
      const grants = dryRun ? { kind: 'api_key' as const, scopes: new Set<never>(), refused: [] } : ENVIRONMENT_GRANTS;
      return JSON.parse((await run.run({ target, fn, input, dryRun, grants })).output!) as unknown;
    };
    expect(await outputOf({ secret: 'read with the environment\'s grants' }, false)).toEqual(['read with the environment\'s grants']);
    expect(await outputOf({}, false)).toEqual(['read with the environment\'s grants', null]);
    // A dry run starts from a fresh module: nothing an earlier run kept reaches it.
    expect(await outputOf({}, true)).toEqual([null]);
  });
});

describe('what a dry run reports', () => {
  it('keeps a bounded amount of its writes and log fields, however much the function sends', async () => {
    const big = {
      version: 1,
      description: { type: 'action' as const, name: 'flood', has_input_schema: false },
      bundle: `"use strict";
module.exports = { default: { kind: 'action', name: 'flood', exec: async (ctx) => {
  const s = 'x'.repeat(200000);
  for (let i = 0; i < 100; i++) {
    await ctx.batchSave([{ id: String(i), s }], 'Item');
    await ctx.updateMetadata({ s });
    ctx.log('info', 'a line', { s });
  }
  return 'done';
} } };`,
    };
    const grants = { kind: 'api_key' as const, scopes: new Set<never>(), refused: [] };
    const outcome = await runner().run({ target, fn: big, dryRun: true, grants });
    expect(JSON.parse(outcome.output!)).toBe('done');
    // 100 × 200 kB of records and as much metadata were sent: 40 MB.
    expect(JSON.stringify(outcome.writes).length).toBeLessThan(5 * 1024 * 1024);
    expect(outcome.writes.length).toBeGreaterThan(0);
    // 100 × 200 kB of fields: each line's are cut to a note of their size.
    expect(JSON.stringify(outcome.logs).length).toBeLessThan(1024 * 1024);
    expect(outcome.logs).toHaveLength(100);
  }, 60_000);
});
