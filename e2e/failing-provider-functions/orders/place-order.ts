import { defineAction } from '@latchkey/functions';

/** Places an order with the provider: not safe to run twice (the provider may have taken the first). */
export default defineAction({
  name: 'place-order',
  exec: async (ctx) => {
    const response = await ctx.post<{ id: string }>({ endpoint: '/orders', data: { item: 'book' } });
    return response.data;
  },
});
