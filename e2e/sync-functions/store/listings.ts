import { defineSync } from '@latchkey/functions';
import { z } from 'zod';

const Listing = z.object({ id: z.string(), market: z.string(), title: z.string() });

/** Saves the listings of one market: the base sync reads the home market, a variant the market it is named after. */
export default defineSync({
  name: 'listings',
  frequency: 'every day',
  models: { Listing },
  exec: async (ctx) => {
    const market = ctx.variant === 'base' ? 'home' : ctx.variant;
    const { status, data } = await ctx.get<{ items: Array<z.infer<typeof Listing>> }>({ endpoint: '/listings', params: { market } });
    if (status !== 200) throw new Error(`the listings of ${market} answered ${status}`);
    await ctx.batchSave(data.items, 'Listing');
  },
});
