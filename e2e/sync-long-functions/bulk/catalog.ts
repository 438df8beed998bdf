import { defineSync } from '@latchkey/functions';
import { z } from 'zod';

interface CatalogPage {
  items: Array<{ id: string; name: string; rank: number }>;
  next: number | null;
}

/**
 * Reads the upstream's catalog page by page and saves a checkpoint after each page it saved, so
 * a run cut off carries on from the next page. A complete pass clears the checkpoint: the next
 * run reads everything again (and finds it unchanged).
 */
export default defineSync({
  name: 'catalog',
  frequency: '1d',
  models: { Item: z.object({ id: z.string(), name: z.string(), rank: z.number() }) },
  exec: async (ctx) => {
    const checkpoint = await ctx.getCheckpoint<{ page: number }>();
    let page: number | null = checkpoint?.page ?? 0;
    while (page !== null) {
      const { data }: { data: CatalogPage } = await ctx.get<CatalogPage>({ endpoint: '/items', params: { page: String(page) } });
      await ctx.batchSave(data.items, 'Item');
      page = data.next;
      if (page !== null) await ctx.saveCheckpoint({ page });
    }
    await ctx.clearCheckpoint();
  },
});
