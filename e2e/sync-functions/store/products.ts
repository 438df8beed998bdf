import { defineSync } from '@latchkey/functions';
import { z } from 'zod';

/** Reads every page of the upstream's product list and saves them; products gone upstream are deleted. */
export default defineSync({
  name: 'products',
  frequency: 'every hour',
  models: { Product: z.object({ id: z.string(), name: z.string(), price: z.number() }) },
  exec: async (ctx) => {
    const seen: string[] = [];
    for await (const page of ctx.paginate<{ id: string; name: string; price: number }>({
      endpoint: '/products',
      paginate: { type: 'cursor', response_path: 'items', cursor_path_in_response: 'next_cursor', cursor_name_in_request: 'cursor', limit_name_in_request: 'limit', limit: 1000 },
    })) {
      await ctx.batchSave(page, 'Product');
      seen.push(...page.map((item) => item.id));
    }
    const gone = (await ctx.proxy<{ ids: string[] }>({ endpoint: '/products/deleted' })).data.ids;
    if (gone.length > 0) await ctx.batchDelete(gone.map((id) => ({ id })), 'Product');
  },
});
