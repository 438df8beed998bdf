import { defineAction } from '@latchkey/functions';

/** Writes connection metadata (a dry run must leave it as it was). */
export default defineAction({
  name: 'set-plan',
  exec: async (ctx, input) => {
    const { plan } = input as { plan: string };
    await ctx.updateMetadata({ plan });
    return { plan, before: await ctx.getMetadata() };
  },
});
