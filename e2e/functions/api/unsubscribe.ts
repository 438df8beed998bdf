import { defineOnEvent } from '@latchkey/functions';

/** Before a connection goes: tries to remove the subscription, and fails (deletion must go on). */
export default defineOnEvent({
  event: 'pre-connection-deletion',
  exec: async (ctx) => {
    await ctx.delete({ endpoint: `/echo/subscriptions/${ctx.connectionId}` });
    throw new Error('the provider refused to unsubscribe');
  },
});
