import { defineSync } from '@latchkey/functions';
import { z } from 'zod';

/** Reads every page of the upstream's cursor list and saves the items; handles `item.updated` webhooks. */
export default defineSync({
  name: 'items',
  frequency: 'every hour',
  models: { Item: z.object({ id: z.string(), n: z.number(), note: z.string().optional() }) },
  webhookSubscriptions: ['item.updated'],
  exec: async (ctx) => {
    for await (const page of ctx.paginate<{ id: string; n: number }>({
      endpoint: '/paginate/cursor',
      paginate: { type: 'cursor', response_path: 'items', cursor_path_in_response: 'next_cursor', cursor_name_in_request: 'cursor' },
    })) {
      await ctx.batchSave(page, 'Item');
    }
  },
  /** A provider webhook for an item: remember which one arrived last. */
  onWebhook: async (ctx, payload) => {
    const { id } = payload as { id: string };
    await ctx.updateMetadata({ last_webhook: id });
  },
});
