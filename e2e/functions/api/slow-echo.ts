import { defineAction } from '@latchkey/functions';

/** Takes a while (the upstream waits), for async runs interrupted by a restart. */
export default defineAction({
  name: 'slow-echo',
  exec: async (ctx, input) => {
    const { n, ms } = input as { n: number; ms?: number };
    const response = await ctx.get<{ waitedMs: number }>({ endpoint: `/slow/${ms ?? 1500}` });
    return { n, waited: response.data.waitedMs };
  },
});
