import { defineOnEvent } from '@latchkey/functions';

/** After a connection is made: registers a (pretend) provider subscription and remembers it. */
export default defineOnEvent({
  event: 'post-connection-creation',
  exec: async (ctx) => {
    const integration = await ctx.getIntegration();
    const response = await ctx.post<{ path: string }>({
      endpoint: '/echo/subscriptions',
      data: { url: integration.webhook_url, secret_set: Boolean(integration.webhookSecret) },
    });
    await ctx.updateMetadata({ subscription: response.data.path, webhook_url: integration.webhook_url, secret_set: Boolean(integration.webhookSecret) });
  },
});
