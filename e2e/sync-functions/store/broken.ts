import { defineSync } from '@latchkey/functions';
import { z } from 'zod';

/** Saves two good records and one without its required field: the good ones are kept, the run fails. */
export default defineSync({
  name: 'broken',
  frequency: 'every day',
  models: { Thing: z.object({ id: z.string(), label: z.string() }) },
  exec: async (ctx) => {
    await ctx.batchSave([{ id: 'a', label: 'A' }, { id: 'b' }, { id: 'c', label: 'C' }] as Array<{ id: string; label: string }>, 'Thing');
  },
});
