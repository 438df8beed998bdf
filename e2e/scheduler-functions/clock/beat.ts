import { defineSync } from '@latchkey/functions';
import { z } from 'zod';

/** Every two seconds, reads the upstream's counter and saves it: a schedule that shows at once whether anyone schedules. */
export default defineSync({
  name: 'beat',
  frequency: 'every 2 seconds',
  models: { Beat: z.object({ id: z.string(), count: z.number() }) },
  exec: async (ctx) => {
    const { status, data } = await ctx.get<{ count: number }>({ endpoint: '/beat' });
    if (status !== 200) throw new Error(`the upstream answered ${status}`);
    await ctx.batchSave([{ id: 'beat', count: data.count }], 'Beat');
  },
});
